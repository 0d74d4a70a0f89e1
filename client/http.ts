import { Agent, request as httpRequest } from 'node:http'
import { TendError, type WireError } from '../protocol/index.js'

export interface RequestOptions {
  body?: unknown
  query?: Record<string, string | number | boolean | undefined>
  signal?: AbortSignal
}

/** JSON over HTTP over the daemon's Unix socket, with kept-alive connections. */
export class SocketHttp {
  private readonly agent: Agent

  constructor(
    readonly socketPath: string,
    private readonly extraHeaders: Record<string, string> = {},
  ) {
    this.agent = new Agent({ keepAlive: true, maxSockets: 64 })
  }

  close(): void {
    this.agent.destroy()
  }

  request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = withQuery(path, options.query)
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    return new Promise<T>((resolve, reject) => {
      const req = httpRequest(
        {
          socketPath: this.socketPath,
          agent: this.agent,
          method,
          path: url,
          signal: options.signal,
          headers: payload === undefined ? this.extraHeaders : { ...this.extraHeaders, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
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
              reject(new TendError('TEND_ERR_PROTOCOL', { detail: `${method} ${path} answered ${res.statusCode} with non-JSON: ${text.slice(0, 200)}` }, { cause: error }))
              return
            }
            if ((res.statusCode ?? 500) >= 400) reject(TendError.fromWire((parsed ?? {}) as Partial<WireError>))
            else resolve(parsed as T)
          })
        },
      )
      req.on('error', (error: NodeJS.ErrnoException) => reject(connectionError(error)))
      if (payload !== undefined) req.write(payload)
      req.end()
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
