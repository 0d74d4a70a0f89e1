import type { Agent } from 'node:http'
import { formatDuration, TendError, type WireError } from '../protocol/index.js'
import { DEFAULT_REQUEST_TIMEOUT_MS } from './options.js'
import type { DaemonEndpoint } from './endpoint.js'

export interface RequestOptions {
  body?: unknown
  query?: Record<string, string | number | boolean | undefined>
  signal?: AbortSignal
  /** Headers of this request only (e.g. Idempotency-Key). */
  headers?: Record<string, string>
  /** How long the daemon may hold this answer on purpose (a long-poll), in milliseconds; added to the request timeout. Default 0. */
  waitMs?: number
}

/**
 * JSON over HTTP to the daemon (its Unix socket, or a console's TCP listener), with kept-alive connections. Every request has a
 * deadline for connecting and the whole answer: a daemon that accepts and never answers fails it
 * with TEND_ERR_DAEMON_TIMEOUT instead of hanging the caller.
 */
export class SocketHttp {
  private readonly agent: Agent

  constructor(
    readonly endpoint: DaemonEndpoint,
    private readonly extraHeaders: Record<string, string> = {},
    /** Deadline of a request that does not long-poll, in milliseconds. */
    private readonly requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS,
  ) {
    this.agent = endpoint.agent({ keepAlive: true, maxSockets: 64 })
  }

  close(): void {
    this.agent.destroy()
  }

  request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return this.send<T>(method, path, options, true)
  }

  private send<T>(method: string, path: string, options: RequestOptions, mayResend: boolean): Promise<T> {
    const url = withQuery(path, options.query)
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    const timeoutMs = this.requestTimeoutMs + Math.max(0, options.waitMs ?? 0)
    return new Promise<T>((resolvePromise, rejectPromise) => {
      let connected = false
      const timer = setTimeout(() => {
        // Rejected first: the destroy below makes the request emit an error of its own.
        reject(this.timeoutError(method, path, timeoutMs, connected))
        req.destroy()
      }, timeoutMs)
      const resolve = (value: T) => {
        clearTimeout(timer)
        resolvePromise(value)
      }
      const reject = (error: unknown) => {
        clearTimeout(timer)
        rejectPromise(error)
      }
      const req = this.endpoint.request(
        {
          agent: this.agent,
          method,
          path: url,
          signal: options.signal,
          headers: {
            ...this.extraHeaders,
            ...options.headers,
            ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
          },
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (chunk: Buffer) => chunks.push(chunk))
          res.on('error', reject)
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8')
            let parsed: unknown
            try {
              parsed = text === '' ? undefined : JSON.parse(text)
            } catch (error) {
              reject(
                new TendError(
                  'TEND_ERR_PROTOCOL',
                  { detail: `${method} ${path} answered ${res.statusCode} with non-JSON: ${text.slice(0, 200)}` },
                  { cause: error },
                ),
              )
              return
            }
            if ((res.statusCode ?? 500) >= 400) reject(TendError.fromWire((parsed ?? {}) as Partial<WireError>))
            else resolve(parsed as T)
          })
        },
      )
      req.on('error', (error: NodeJS.ErrnoException) => {
        // A kept-alive connection the daemon had just closed (idle, or it restarted): the request
        // never reached it. Sent once more on a fresh connection; a submission keeps its key.
        if (mayResend && req.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE') && !options.signal?.aborted) {
          clearTimeout(timer)
          this.send<T>(method, path, options, false).then(resolvePromise, rejectPromise)
          return
        }
        reject(connectionError(error))
      })
      req.on('socket', (socket) => {
        // A kept-alive socket is connected already; a new one says so when it is.
        if (!socket.connecting) connected = true
        else socket.once('connect', () => (connected = true))
      })
      if (payload !== undefined) req.write(payload)
      req.end()
    })
  }

  private timeoutError(method: string, path: string, timeoutMs: number, connected: boolean): TendError {
    const what = connected ? 'it accepted the connection but sent no answer' : 'it did not accept the connection'
    return new TendError('TEND_ERR_DAEMON_TIMEOUT', {
      timeout: formatDuration(timeoutMs),
      detail:
        `${method} ${path} on ${this.endpoint.where}: ${what}` +
        ` (it may be wedged or overloaded; TEND_REQUEST_TIMEOUT or requestTimeoutMs sets how long to wait)`,
    })
  }
}

/** Errors that mean no daemon answers on the socket (as opposed to a daemon answering no). */
export function isUnreachable(error: unknown): boolean {
  return error instanceof TendError && error.code === 'TEND_ERR_DAEMON_UNAVAILABLE'
}

function connectionError(error: NodeJS.ErrnoException): Error {
  if (error.name === 'AbortError') return error
  if (error.code === 'ENOENT' || error.code === 'ECONNREFUSED' || error.code === 'ECONNRESET' || error.code === 'EPIPE') {
    return new TendError('TEND_ERR_DAEMON_UNAVAILABLE', { detail: `${error.code} on the daemon socket` }, { cause: error })
  }
  return new TendError('TEND_ERR_DAEMON_UNAVAILABLE', { detail: error.message }, { cause: error })
}

function withQuery(path: string, query: RequestOptions['query']): string {
  if (!query) return path
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) if (value !== undefined) search.set(key, String(value))
  const text = search.toString()
  return text ? `${path}?${text}` : path
}
