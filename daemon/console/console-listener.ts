import { readFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { isIP } from 'node:net'
import { createSecureContext } from 'node:tls'
import { LogController, type FastifyRequest } from 'fastify'
import { TendError } from '../../protocol/index.js'
import type { Logger } from 'pino'
import { buildApp } from '../http/server.js'
import type { TendApp } from '../http/tend-app.js'
import { consoleGuard } from './guard.js'
import { registerPageRoutes } from './page-routes.js'
import type { ConsoleSessions } from './sessions.js'
import type { ConsoleTokens, VerifiedToken } from './tokens.js'
import { ownerHeader, type Caller } from '../http/audit.js'

export interface ConsoleAddress {
  host: string
  port: number
  tls: { cert: string; key: string } | null
  insecure: boolean
}

export interface ConsoleListener {
  app: TendApp
  address: ConsoleAddress
  /** The port it got (the one asked for, or the kernel's choice for 0). */
  port: number
  /** scheme://host:port as a browser on this machine (loopback) or elsewhere (the machine's name) reaches it. */
  origin: string
  close: () => Promise<void>
}

/** Whether an address (or name) stays on this machine. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase()
  return bare === 'localhost' || bare === '::1' || (isIP(bare) === 4 && bare.startsWith('127.'))
}

/**
 * The console's TCP listener: the page and the whole `/v1` API (the socket's routes, with the same
 * schemas and errors), behind the guard (daemon/console/guard.ts). Refuses an address beyond
 * loopback without TLS unless insecure was asked for.
 */
export async function startConsoleListener(
  address: ConsoleAddress,
  { log, registerApi }: { log: Logger; registerApi: (app: TendApp) => void },
  auth: { tokens: ConsoleTokens; sessions: ConsoleSessions; onPageOpened?: (token: VerifiedToken) => void },
): Promise<ConsoleListener> {
  const loopback = isLoopback(address.host)
  if (!loopback && !address.tls && !address.insecure) throw new TendError('TEND_ERR_CONSOLE_INSECURE', { host: address.host })
  const https = address.tls ? await readTls(address.tls) : undefined
  // Its requests are not logged: a page's first address carries the token (?token=), and the log must never hold one.
  // The guard notes who each request came from; one it refused before that was no one's token.
  const callerOf = (request: FastifyRequest): Caller => ({ via: 'console', tokenId: null, scope: null, address: request.ip, owner: ownerHeader(request) })
  const app = buildApp(log, { logController: new LogController({ disableRequestLogging: true }), callerOf, ...(https ? { https } : {}) })
  let port = address.port
  const allowedHosts = () => (loopback ? new Set(['127.0.0.1', 'localhost', '[::1]', address.host.toLowerCase()].map((name) => `${name}:${port}`)) : null)
  app.addHook('onRequest', consoleGuard({ ...auth, tls: https !== undefined, allowedHosts, cookieName: () => `tend_console_${port}` }))
  app.addHook('onSend', async (_request, reply) => {
    void reply.header('x-content-type-options', 'nosniff')
  })
  registerApi(app)
  await registerPageRoutes(app)
  try {
    await app.listen({ host: address.host, port: address.port })
  } catch (error) {
    await app.close().catch(() => undefined)
    throw new TendError('TEND_ERR_CONSOLE_LISTEN', { address: `${address.host}:${address.port}`, detail: (error as Error).message }, { cause: error })
  }
  const bound = app.server.address()
  port = typeof bound === 'object' && bound !== null ? bound.port : address.port
  const shownHost = address.host === '0.0.0.0' || address.host === '::' ? hostname() : isIP(address.host) === 6 ? `[${address.host}]` : address.host
  const origin = `${https ? 'https' : 'http'}://${shownHost}:${port}`
  return { app, address: { ...address, port }, port, origin, close: () => app.close() }
}

async function readTls(files: { cert: string; key: string }): Promise<{ cert: Buffer; key: Buffer }> {
  let cert: Buffer
  let key: Buffer
  try {
    ;[cert, key] = await Promise.all([readFile(files.cert), readFile(files.key)])
  } catch (error) {
    throw new TendError('TEND_ERR_CONSOLE_TLS', { detail: (error as Error).message }, { cause: error })
  }
  try {
    // A key that does not match its certificate fails here, not at the first browser's handshake.
    createSecureContext({ cert, key })
  } catch (error) {
    throw new TendError('TEND_ERR_CONSOLE_TLS', { detail: `${files.cert}, ${files.key}: ${(error as Error).message}` }, { cause: error })
  }
  return { cert, key }
}
