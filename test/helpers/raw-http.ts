import { request as httpRequest, type Agent, type IncomingHttpHeaders } from 'node:http'

export interface RawAnswer {
  status: number
  headers: IncomingHttpHeaders
  contentType: string
  text: string
}

export interface RawRequest {
  method: string
  path: string
  headers?: Record<string, string>
  /** Sent as it is; a content-length is added when there is one. */
  body?: string
  /** A kept-alive agent to reuse connections (default: a connection of its own). */
  agent?: Agent
  /** No answer within this long fails the request, naming it. Default 5000. */
  timeoutMs?: number
}

/**
 * One raw request over a Unix socket, so that bodies, headers and methods can be anything the
 * client would never send. An event stream answers as soon as its head arrives (then it is
 * closed).
 */
export function rawRequest(socketPath: string, request: RawRequest): Promise<RawAnswer> {
  const timeoutMs = request.timeoutMs ?? 5000
  const what = `${request.method} ${request.path}${request.body === undefined ? '' : ` ${request.body.slice(0, 200)}`}`
  const headers = { ...request.headers, ...(request.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(request.body)) }) }
  return new Promise<RawAnswer>((resolve, reject) => {
    const req = httpRequest({ socketPath, agent: request.agent ?? false, method: request.method, path: request.path, headers }, (res) => {
      const contentType = String(res.headers['content-type'] ?? '')
      const answer = (text: string) => {
        clearTimeout(timer)
        resolve({ status: res.statusCode ?? 0, headers: res.headers, contentType, text })
      }
      if (contentType.startsWith('text/event-stream')) {
        req.destroy()
        answer('')
        return
      }
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.on('end', () => answer(text))
    })
    const timer = setTimeout(() => {
      req.destroy()
      reject(new Error(`no answer within ${timeoutMs}ms to ${what}`))
    }, timeoutMs)
    req.on('error', (error) => {
      clearTimeout(timer)
      reject(new Error(`${what} failed: ${error.message}`, { cause: error }))
    })
    req.end(request.body)
  })
}
