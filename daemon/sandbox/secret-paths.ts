import { readdirSync } from 'node:fs'
import { join } from 'node:path'

/** Where credentials usually live under a home folder; a sandboxed task sees them empty. */
const HOME_SECRETS = [
  '.ssh', '.aws', '.azure', '.config/gh', '.config/gcloud', '.config/hub', '.docker', '.gnupg', '.kube',
  '.netrc', '.git-credentials', '.npmrc', '.pypirc', '.cargo/credentials', '.cargo/credentials.toml', '.terraformrc', '.vault-token',
]

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
  return [...(home ? HOME_SECRETS.map((relative) => join(home, relative)) : []), ...systemSecrets()]
}
