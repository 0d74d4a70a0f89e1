import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'

/**
 * Where credentials usually live under a home folder; a sandboxed task sees them empty.
 * `.config/tend` is tend's own: where the shared queue's Redis URL and key files are kept by default.
 */
const HOME_CREDENTIALS = [
  '.ssh',
  '.aws',
  '.azure',
  '.config/gh',
  '.config/gcloud',
  '.config/hub',
  '.config/tend',
  '.docker',
  '.gnupg',
  '.kube',
  '.netrc',
  '.git-credentials',
  '.npmrc',
  '.pypirc',
  '.cargo/credentials',
  '.cargo/credentials.toml',
  '.terraformrc',
  '.vault-token',
]

/**
 * What a person typed, kept by shells, REPLs, database clients, the pager and vim: a URL with its
 * password, an `export TOKEN=…`, a `\password` in psql. Masked as credentials are.
 */
const HOME_HISTORIES = [
  '.bash_history',
  '.sh_history',
  '.zsh_history',
  '.zhistory',
  '.histfile',
  '.local/share/fish/fish_history',
  '.python_history',
  '.ipython/profile_default/history.sqlite',
  '.node_repl_history',
  '.irb_history',
  '.pry_history',
  '.julia/logs/repl_history.jl',
  '.ghc/ghci_history',
  '.scala_history',
  '.psql_history',
  '.mysql_history',
  '.sqlite_history',
  '.rediscli_history',
  '.dbshell',
  '.mongosh',
  '.influx_history',
  '.clickhouse-client-history',
  '.lesshst',
  '.viminfo',
  '.local/state/nvim/shada',
]

/** The secret paths of every home, relative to it. */
export const HOME_SECRETS = [...HOME_CREDENTIALS, ...HOME_HISTORIES]

/**
 * Every folder on the way from a home to its secret paths, besides the home itself (`.config`,
 * `.cargo`): a secret path appears, goes or becomes a link only by a change of one of them.
 */
export function foldersOnTheWay(relatives: readonly string[]): string[] {
  const folders = new Set<string>()
  for (const relative of relatives) for (let parent = dirname(relative); parent !== '.'; parent = dirname(parent)) folders.add(parent)
  return [...folders]
}

/** The secret paths of a home folder (as paths under it, not resolved). */
export function homeSecretPaths(home: string): string[] {
  return HOME_SECRETS.map((relative) => join(home, relative))
}

/** System-wide secrets: password hashes and the host's SSH private keys. */
function systemSecrets(): string[] {
  let hostKeys: string[] = []
  try {
    hostKeys = readdirSync('/etc/ssh')
      .filter((name) => /^ssh_host_.*_key$/.test(name))
      .map((name) => join('/etc/ssh', name))
  } catch {
    // no SSH server configuration
  }
  return ['/etc/shadow', '/etc/gshadow', '/etc/shadow-', '/etc/gshadow-', ...hostKeys]
}

export function secretPaths(home: string | undefined): string[] {
  return [...(home ? homeSecretPaths(home) : []), ...systemSecrets()]
}
