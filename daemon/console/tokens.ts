import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { rename, writeFile } from 'node:fs/promises'
import type { Logger } from 'pino'

/** Tokens kept at most: each `tend console` makes one, the oldest go first. */
const MAX_TOKENS = 32

interface KeptToken {
  /** SHA-256 of the token, hex: the token itself is shown once and never stored. */
  digest: string
  createdAt: string
}

/**
 * The console's tokens: made fresh for each `tend console`, kept as SHA-256 digests in a 0600 file
 * of the daemon's home (they outlive a restart: a bookmarked URL keeps working), and checked in
 * constant time. A token is 32 random bytes, so its digest cannot be turned back into it.
 */
export class ConsoleTokens {
  private kept: KeptToken[]

  constructor(
    private readonly file: string,
    log: Pick<Logger, 'warn'>,
  ) {
    this.kept = readKept(file, log)
  }

  get count(): number {
    return this.kept.length
  }

  /** A new token, valid from the moment its digest is on disk. */
  async mint(): Promise<string> {
    const token = randomBytes(32).toString('base64url')
    this.kept = [...this.kept, { digest: digestOf(token), createdAt: new Date().toISOString() }].slice(-MAX_TOKENS)
    await this.save()
    return token
  }

  /** Whether the token is one of the kept ones; every kept digest is compared, each in constant time. */
  verify(token: string | undefined): boolean {
    if (!token) return false
    const presented = Buffer.from(digestOf(token), 'hex')
    let found = false
    for (const kept of this.kept) {
      if (timingSafeEqual(presented, Buffer.from(kept.digest, 'hex'))) found = true
    }
    return found
  }

  /** The digest a verified token is known by (sessions remember it, to end with it). */
  digest(token: string): string {
    return digestOf(token)
  }

  isKept(digest: string): boolean {
    return this.kept.some((kept) => kept.digest === digest)
  }

  /** Forgets every token. */
  async revokeAll(): Promise<void> {
    this.kept = []
    await this.save()
  }

  private async save(): Promise<void> {
    const temporary = `${this.file}.${process.pid}.tmp`
    await writeFile(temporary, `${JSON.stringify({ tokens: this.kept }, null, 2)}\n`, { mode: 0o600 })
    await rename(temporary, this.file)
  }
}

function digestOf(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

/**
 * The kept digests. A missing file keeps none; one that cannot be read or parsed keeps none too
 * (tokens are made again with `tend console`), and the log says why the earlier ones stopped working.
 */
function readKept(file: string, log: Pick<Logger, 'warn'>): KeptToken[] {
  let parsed: { tokens?: unknown }
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as { tokens?: unknown }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') log.warn({ err: error, file }, 'console tokens unreadable: earlier tokens no longer work (tend console makes a new one)')
    return []
  }
  const listed = Array.isArray(parsed?.tokens) ? parsed.tokens : []
  const kept = listed.filter((each): each is KeptToken => typeof each?.digest === 'string' && /^[0-9a-f]{64}$/.test(each.digest))
  if (kept.length !== listed.length || !Array.isArray(parsed?.tokens)) log.warn({ file, kept: kept.length, listed: listed.length }, 'console tokens file holds entries that are not tokens: those are ignored')
  return kept
}
