import type { FastifyReply, FastifyRequest } from 'fastify'
import { parseCookie, stringifySetCookie } from 'cookie'
import { TendError } from '../../protocol/index.js'
import { noteCaller, ownerHeader } from '../http/audit.js'
import type { ConsoleSessions } from './sessions.js'
import type { ConsoleTokens, VerifiedToken } from './tokens.js'

export interface GuardOptions {
  tokens: ConsoleTokens
  sessions: ConsoleSessions
  tls: boolean
  /** The Host headers the listener answers to (`name:port`); null: any (it listens beyond loopback). */
  allowedHosts: () => ReadonlySet<string> | null
  /** The session cookie's name: one per port, since browsers share cookies across a host's ports. */
  cookieName: () => string
  /** A page was opened with this token (the redirect file that carried it has served). */
  onPageOpened?: (token: VerifiedToken) => void
}

/** The page's own paths: opening one of them with ?token= starts a session. */
const PAGE_PATHS = new Set(['/', '/index.html'])
const SAFE_METHODS = new Set(['GET', 'HEAD'])

/**
 * The console listener's gate, run on every request before routing (onRequest):
 * 1. the Host must be the console's own address when it listens on loopback, so a site that
 *    rebinds its name to 127.0.0.1 is refused;
 * 2. a request from another origin is refused: an `Origin` that is not the console's, or
 *    `Sec-Fetch-Site` cross-site or same-site; no CORS header is ever sent;
 * 3. the caller must show a token (`Authorization: Bearer`) or the page's session cookie; a change
 *    made with the cookie must carry the console's `Origin`;
 * 4. the page opened with `?token=` gets a session cookie (HttpOnly, SameSite=Strict, Secure over
 *    TLS) and is sent on without the token in its address;
 * 5. a token of the read scope (or a session opened with one) changes nothing: any method but GET
 *    and HEAD is refused 403 TEND_ERR_READ_ONLY_TOKEN.
 * Each request is noted with the id of the token it showed, for the audit log (never the token).
 */
export function consoleGuard(options: GuardOptions) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const admit = (token: VerifiedToken | null): void => {
      noteCaller(request, { via: 'console', tokenId: token?.id ?? null, scope: token?.scope ?? null, address: request.ip, owner: ownerHeader(request) })
      if (token?.scope === 'read' && !SAFE_METHODS.has(request.method)) {
        throw new TendError('TEND_ERR_READ_ONLY_TOKEN', {
          tokenId: token.id,
          method: request.method,
          route: request.routeOptions.url ?? request.url.split('?', 1)[0],
        })
      }
    }
    admit(null)
    const host = (request.headers.host ?? '').toLowerCase()
    const allowed = options.allowedHosts()
    if (allowed && !allowed.has(host))
      throw new TendError('TEND_ERR_FOREIGN_ORIGIN', { detail: `the Host ${JSON.stringify(host)} is not the console's address` })
    const ownOrigin = `${options.tls ? 'https' : 'http'}://${host}`
    const origin = request.headers.origin
    if (origin !== undefined && origin !== ownOrigin) throw new TendError('TEND_ERR_FOREIGN_ORIGIN', { detail: `it comes from ${JSON.stringify(origin)}` })
    const fetchSite = request.headers['sec-fetch-site']
    if (fetchSite === 'cross-site' || fetchSite === 'same-site')
      throw new TendError('TEND_ERR_FOREIGN_ORIGIN', { detail: `it comes from another site (Sec-Fetch-Site: ${fetchSite})` })

    const authorization = request.headers.authorization
    if (authorization !== undefined) {
      const verified = options.tokens.verify(/^Bearer ([A-Za-z0-9_-]{1,200})$/.exec(authorization)?.[1])
      if (!verified) throw new TendError('TEND_ERR_UNAUTHORIZED', { detail: 'the bearer token is not valid (tend console makes one)' })
      return admit(verified)
    }
    const cookies = request.headers.cookie ? parseCookie(request.headers.cookie) : {}
    const session = options.sessions.check(cookies[options.cookieName()])
    if (session) {
      if (!SAFE_METHODS.has(request.method) && origin === undefined) {
        throw new TendError('TEND_ERR_FOREIGN_ORIGIN', { detail: 'a change made with the session cookie must carry the Origin header' })
      }
      return admit(session)
    }
    const [path, query = ''] = request.url.split('?', 2) as [string, string?]
    const token = new URLSearchParams(query).get('token') ?? undefined
    const opening = SAFE_METHODS.has(request.method) && PAGE_PATHS.has(path) && token !== undefined ? options.tokens.verify(token) : null
    if (opening && token !== undefined) {
      admit(opening)
      options.onPageOpened?.(opening)
      const session = options.sessions.open(token)
      const cookie = stringifySetCookie({
        name: options.cookieName(),
        value: session.id,
        httpOnly: true,
        sameSite: 'strict',
        secure: options.tls,
        path: '/',
        maxAge: session.maxAgeSeconds,
      })
      await reply.header('set-cookie', cookie).header('cache-control', 'no-store').redirect(path, 303)
      return reply
    }
    if (path.startsWith('/v1/')) throw new TendError('TEND_ERR_UNAUTHORIZED', { detail: 'send Authorization: Bearer <token> (tend console makes one)' })
    await reply.status(401).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(UNAUTHORIZED_PAGE)
    return reply
  }
}

const UNAUTHORIZED_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tend console: token needed</title></head>
<body><h1>401: token needed</h1>
<p>Open the address that <code>tend console</code> prints: it carries a token. A session ends after
12 hours, when its token is revoked (<code>tend console --revoke</code>), or when the daemon restarts.</p>
</body></html>
`
