import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { closeSync, writeSync } from 'node:fs'
import type { Logger } from 'pino'
import { TOKEN_ID_DIGITS } from '../../protocol/console-redirect.js'
import { displaceSync, openHomeFileSync, renameIntoPlace } from '../../protocol/home-file.js'
import { readRegularFileSync } from '../../spool/index.js'

/** Far more than MAX_TOKENS entries take: past it the file is not the daemon's. */
const MAX_FILE_BYTES = 1024 * 1024

/** Tokens kept at most: each `tend console` makes one, the oldest go first. */
const MAX_TOKENS = 32

/**
 * What a token may do: `operator`, everything the API serves on the listener; `read`, only what
 * changes nothing (GET and HEAD). A cluster worker publishes a read token in Redis.
 */
export type TokenScope = 'operator' | 'read'

interface KeptToken {
  /** SHA-256 of the token, hex: the token itself is shown once and never stored. */
  digest: string
  createdAt: string
  /** Absent in files written before scopes: those tokens were the operator's. */
  scope?: TokenScope
}

/** A token as a request showed it: its id (a digest prefix, what logs name it by) and its scope. */
export interface VerifiedToken {
  id: string
  scope: TokenScope
}

/** The id a token (or session) is named by in logs, from its digest. */
export function tokenIdOf(digest: string): string {
  return digest.slice(0, TOKEN_ID_DIGITS)
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
  async mint(scope: TokenScope = 'operator'): Promise<string> {
    const token = randomBytes(32).toString('base64url')
    this.kept = [...this.kept, { digest: digestOf(token), createdAt: new Date().toISOString(), scope }].slice(-MAX_TOKENS)
    await this.save()
    return token
  }

  /** The token's id and scope when it is one of the kept ones, else null; every kept digest is compared, each in constant time. */
  verify(token: string | undefined): VerifiedToken | null {
    if (!token) return null
    const digest = digestOf(token)
    const presented = Buffer.from(digest, 'hex')
    let found: KeptToken | null = null
    for (const kept of this.kept) {
      if (timingSafeEqual(presented, Buffer.from(kept.digest, 'hex'))) found = kept
    }
    return found && { id: tokenIdOf(digest), scope: found.scope ?? 'operator' }
  }

  /** The scope of a kept digest (a session's token), or null once it is no longer kept. */
  scopeOf(digest: string): TokenScope | null {
    const kept = this.kept.find((each) => each.digest === digest)
    return kept ? (kept.scope ?? 'operator') : null
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
    // In the home, which a task under `off` can write: the temporary's name can be guessed, so what
    // stands there is moved aside, never written through (home-file.ts); so is a folder at the file's.
    const temporary = `${this.file}.${process.pid}.tmp`
    const { fd } = openHomeFileSync(temporary, { truncate: true })
    try {
      const bytes = Buffer.from(`${JSON.stringify({ tokens: this.kept }, null, 2)}\n`)
      for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset, bytes.length - offset)
    } finally {
      closeSync(fd)
    }
    await renameIntoPlace(temporary, this.file)
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
    // Never a FIFO waited on (it would hold the start) nor a link followed.
    parsed = JSON.parse(readRegularFileSync(file, MAX_FILE_BYTES, { secondNames: true }).toString('utf8')) as { tokens?: unknown }
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException
    if (code !== 'ENOENT') log.warn({ err: error, file }, 'console tokens unreadable: earlier tokens no longer work (tend console makes a new one)')
    // Not a file of its own (a FIFO, a folder, a link): moved aside, so the next token lands in a new one.
    if (code === 'EFTYPE' || code === 'ELOOP') displaceSync(file)
    return []
  }
  const listed = Array.isArray(parsed?.tokens) ? parsed.tokens : []
  const kept = listed.filter(
    (each): each is KeptToken =>
      typeof each?.digest === 'string' &&
      /^[0-9a-f]{64}$/.test(each.digest) &&
      (each.scope === undefined || each.scope === 'operator' || each.scope === 'read'),
  )
  if (kept.length !== listed.length || !Array.isArray(parsed?.tokens))
    log.warn({ file, kept: kept.length, listed: listed.length }, 'console tokens file holds entries that are not tokens: those are ignored')
  return kept
}
