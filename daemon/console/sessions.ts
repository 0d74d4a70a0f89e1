import { randomBytes, timingSafeEqual } from 'node:crypto'
import { tokenIdOf, type ConsoleTokens, type VerifiedToken } from './tokens.js'

/** How long a page's session lasts after it was opened with a token. */
const SESSION_MS = 12 * 60 * 60 * 1000

interface Session {
  /** The digest of the token it was opened with: revoking the token ends it. */
  tokenDigest: string
  expiresAt: number
}

/**
 * Sessions of the console's page: opening the URL with its token makes one, kept in a cookie
 * (HttpOnly, SameSite=Strict), so the token leaves the address bar and the page's requests need
 * no header. Sessions live in the daemon's memory only: a restarted daemon asks for the URL again.
 */
export class ConsoleSessions {
  private readonly sessions = new Map<string, Session>()

  constructor(private readonly tokens: ConsoleTokens) {}

  open(token: string): { id: string; maxAgeSeconds: number } {
    this.sweep()
    const id = randomBytes(32).toString('base64url')
    this.sessions.set(id, { tokenDigest: this.tokens.digest(token), expiresAt: Date.now() + SESSION_MS })
    return { id, maxAgeSeconds: SESSION_MS / 1000 }
  }

  /** The token a live session was opened with (its id and scope), while that token is kept; compared in constant time. */
  check(id: string | undefined): VerifiedToken | null {
    if (!id) return null
    const presented = Buffer.from(id)
    let found: Session | undefined
    for (const [known, session] of this.sessions) {
      const candidate = Buffer.from(known)
      if (candidate.length === presented.length && timingSafeEqual(candidate, presented)) found = session
    }
    if (found === undefined || found.expiresAt <= Date.now()) return null
    const scope = this.tokens.scopeOf(found.tokenDigest)
    return scope && { id: tokenIdOf(found.tokenDigest), scope }
  }

  clear(): void {
    this.sessions.clear()
  }

  private sweep(): void {
    const now = Date.now()
    for (const [id, session] of this.sessions) if (session.expiresAt <= now || !this.tokens.isKept(session.tokenDigest)) this.sessions.delete(id)
  }
}
