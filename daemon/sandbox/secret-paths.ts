import { join } from 'node:path'

/** Where credentials usually live under a home folder; a sandboxed task sees them empty. */
const HOME_SECRETS = [
  '.ssh', '.aws', '.azure', '.config/gh', '.config/gcloud', '.config/hub', '.docker', '.gnupg', '.kube',
  '.netrc', '.git-credentials', '.npmrc', '.pypirc', '.cargo/credentials', '.cargo/credentials.toml', '.terraformrc', '.vault-token',
]

export function secretPaths(home: string | undefined): string[] {
  return home ? HOME_SECRETS.map((relative) => join(home, relative)) : []
}
