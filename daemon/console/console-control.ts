import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { TendError } from '../../protocol/index.js'
import { consoleRedirectFileName } from '../../protocol/console-redirect.js'
import type { ConsoleBody, ConsoleInfo } from '../../protocol/schemas.js'
import type { Logger } from 'pino'
import type { DaemonConfig } from '../config.js'
import type { TendApp } from '../http/tend-app.js'
import { startConsoleListener, type ConsoleAddress, type ConsoleListener } from './console-listener.js'
import { ConsoleSessions } from './sessions.js'
import { ConsoleTokens, type TokenScope, type VerifiedToken } from './tokens.js'

export interface ConsoleControlOptions {
  /** Where tokens and redirect files are kept, and the settings a request leaves out. */
  config: Pick<DaemonConfig, 'layout' | 'consoleHost' | 'consolePort' | 'consoleTlsCert' | 'consoleTlsKey' | 'consoleInsecure'>
  log: Logger
  /** Declares the `/v1` API on a listener: the socket's routes, over the same deps (daemon/http/api.ts). */
  registerApi: (app: TendApp) => void
}

/**
 * The console, from the daemon's side: at most one listener, started by `tend console` (or the
 * `console` setting at start), moved when asked for another address, closed with the daemon. Each
 * open makes a fresh token; tokens made before stay valid until revoked.
 */
export class ConsoleControl {
  private listener: ConsoleListener | null = null
  private readonly tokens: ConsoleTokens
  private readonly sessions: ConsoleSessions
  /** One change of the listener at a time. */
  private changing: Promise<unknown> = Promise.resolve()

  private readonly config: ConsoleControlOptions['config']
  private readonly log: Logger
  private readonly registerApi: (app: TendApp) => void

  constructor({ config, log, registerApi }: ConsoleControlOptions) {
    this.config = config
    this.log = log
    this.registerApi = registerApi
    this.tokens = new ConsoleTokens(config.layout.consoleTokens, log)
    this.sessions = new ConsoleSessions(this.tokens)
  }

  info(token: string | null = null): ConsoleInfo {
    const listener = this.listener
    return {
      listening: listener !== null,
      origin: listener?.origin ?? null,
      url: listener && token ? `${listener.origin}/?token=${token}` : null,
      token,
      host: listener?.address.host ?? null,
      port: listener?.port ?? null,
      tls: listener !== null && listener.address.tls !== null,
      tokens: this.tokens.count,
    }
  }

  /**
   * Listens where asked (the settings fill what the request leaves out), and makes a fresh token:
   * the operator's, or one that only reads (what a cluster worker publishes).
   */
  open(request: ConsoleBody = {}, scope: TokenScope = 'operator'): Promise<ConsoleInfo> {
    return this.serially(async () => {
      const address = this.addressFor(request)
      if (!this.listener || !sameAddress(this.listener.address, address)) {
        // The new listener first: if it cannot listen, the one there is stays.
        const next = await startConsoleListener(
          address,
          { log: this.log, registerApi: this.registerApi },
          { tokens: this.tokens, sessions: this.sessions, onPageOpened: (token) => this.redirectServed(token) },
        )
        const previous = this.listener
        this.listener = next
        await previous?.close()
        this.log.info({ origin: next.origin, tls: address.tls !== null }, 'console listening')
      }
      return this.info(await this.tokens.mint(scope))
    })
  }

  /** Redirect files of tokens no longer valid: a browser that never came leaves one behind. */
  private async removeRedirectFiles(): Promise<void> {
    const { home } = this.config.layout
    const names = await readdir(home).catch(() => [])
    await Promise.all(
      names.filter((name) => /^console-open-[0-9a-f]+\.html$/.test(name)).map((name) => rm(join(home, name), { force: true }).catch(() => undefined)),
    )
  }

  /** The browser came with the token `tend console` left in a redirect file: that file has served. */
  private redirectServed(token: VerifiedToken): void {
    const file = join(this.config.layout.home, consoleRedirectFileName(token.id))
    rm(file, { force: true }).catch((error: unknown) => this.log.warn({ err: error, file }, 'console redirect file not removed'))
  }

  /** Stops listening; tokens stay valid for the next open. */
  close(): Promise<ConsoleInfo> {
    return this.serially(async () => {
      const listener = this.listener
      this.listener = null
      await listener?.close()
      if (listener) this.log.info('console stopped')
      return this.info()
    })
  }

  /** Revokes every token and ends every page's session. */
  revoke(): Promise<ConsoleInfo> {
    return this.serially(async () => {
      await this.tokens.revokeAll()
      this.sessions.clear()
      await this.removeRedirectFiles()
      this.log.info('console tokens revoked')
      return this.info()
    })
  }

  private addressFor(request: ConsoleBody): ConsoleAddress {
    const { config } = this
    const certificate = request.tlsCert ?? config.consoleTlsCert
    const key = request.tlsKey ?? config.consoleTlsKey
    if ((certificate === null || certificate === undefined) !== (key === null || key === undefined)) {
      throw new TendError('TEND_ERR_CONSOLE_TLS', {
        detail: `a certificate needs its key and a key its certificate (got ${certificate ? 'a certificate' : 'a key'} only)`,
      })
    }
    const port = request.port ?? config.consolePort
    return {
      host: request.host ?? config.consoleHost,
      // Port 0 is any free port: the one a console listens on already is one.
      port: port === 0 && this.listener ? this.listener.port : port,
      tls: certificate && key ? { cert: certificate, key } : null,
      insecure: request.insecure ?? config.consoleInsecure,
    }
  }

  private serially<T>(change: () => Promise<T>): Promise<T> {
    const next = this.changing.then(change, change)
    this.changing = next.catch(() => undefined)
    return next
  }
}

function sameAddress(a: ConsoleAddress, b: ConsoleAddress): boolean {
  return a.host === b.host && a.port === b.port && a.insecure === b.insecure && a.tls?.cert === b.tls?.cert && a.tls?.key === b.tls?.key
}
