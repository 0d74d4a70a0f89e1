import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'

/** How long one try may take, from its connection to its answer's status line. */
export const URL_TRY_MS = 2000

/**
 * Makes the TCP connection a try goes over: inside the task's network (its owner's private
 * namespace). Absent: the daemon's own network, which is the task's (the host's).
 */
export type ConnectInside = (address: string, port: number) => Socket

/**
 * Whether `url` answers 2xx or 3xx now (a redirect is not followed: its status is the answer). One
 * try, at most URL_TRY_MS; any failure is a no. A certificate is not checked: whether the server
 * is up is the question, and a development server's certificate is rarely one a client trusts.
 */
export function answersUrl(url: string, connectInside?: ConnectInside): Promise<boolean> {
  const target = new URL(url)
  const secure = target.protocol === 'https:'
  const port = Number(target.port || (secure ? 443 : 80))
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1')
  return new Promise((resolve) => {
    let request: ClientRequest
    const done = (answer: boolean) => {
      clearTimeout(timer)
      request?.destroy()
      resolve(answer)
    }
    const timer = setTimeout(() => done(false), URL_TRY_MS)
    try {
      const createConnection = connectInside ? () => insideConnection(connectInside, host, port, secure, target.hostname) : undefined
      const headers = { 'user-agent': 'tend-readiness' }
      const options = { method: 'GET', headers, rejectUnauthorized: false, ...(createConnection ? { createConnection } : {}) }
      const onAnswer = (response: IncomingMessage) => {
        response.resume()
        const status = response.statusCode ?? 0
        done(status >= 200 && status < 400)
      }
      request = secure ? httpsRequest(target, options, onAnswer) : httpRequest(target, options, onAnswer)
      request.on('error', () => done(false))
      request.end()
    } catch {
      done(false)
    }
  })
}

function insideConnection(connectInside: ConnectInside, host: string, port: number, secure: boolean, servername: string): Socket {
  const socket = connectInside(insideAddress(host), port)
  return secure ? tlsConnect({ socket, servername, rejectUnauthorized: false }) : socket
}

/** The address a name has inside a private network: only loopback is there. */
function insideAddress(host: string): string {
  if (host === 'localhost') return '127.0.0.1'
  return host
}
