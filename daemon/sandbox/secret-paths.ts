import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'

/**
 * Where credentials usually live under a home folder; a sandboxed task sees them empty.
 * `.config/tend` is tend's own: the cluster's Redis URL and key as docs/cluster.md keeps them.
 */
export const HOME_SECRETS = [
  '.ssh', '.aws', '.azure', '.config/gh', '.config/gcloud', '.config/hub', '.config/tend', '.docker', '.gnupg', '.kube',
  '.netrc', '.git-credentials', '.npmrc', '.pypirc', '.cargo/credentials', '.cargo/credentials.toml', '.terraformrc', '.vault-token',
]

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
    hostKeys = readdirSync('/etc/ssh').filter((name) => /^ssh_host_.*_key$/.test(name)).map((name) => join('/etc/ssh', name))
  } catch {
    // no SSH server configuration
  }
  return ['/etc/shadow', '/etc/gshadow', '/etc/shadow-', '/etc/gshadow-', ...hostKeys]
}

export function secretPaths(home: string | undefined): string[] {
  return [...(home ? homeSecretPaths(home) : []), ...systemSecrets()]
}
