import {
  Agent,
  request as httpRequest,
  type AgentOptions,
  type ClientRequest,
  type IncomingMessage,
  type RequestOptions as HttpRequestOptions,
} from 'node:http'
import { createRequire } from 'node:module'
import { TendError } from '../protocol/index.js'

/**
 * An empty TLS server name: without one, Node's agent asks `net.isIP` of the host to pick one
 * for every request, and its first call compiles the IPv6 pattern (~6 ms of every CLI command).
 * Over a Unix socket there is no TLS and no host to name.
 */
export const UNIX_SOCKET_AGENT_OPTIONS = { servername: '' } as AgentOptions

/**
 * Where the daemon answers: its Unix socket (the default, on this machine), or a console's TCP
 * listener (`http(s)://host:port` with a token), for a client in a container or on another
 * machine.
 */
export interface DaemonEndpoint {
  /** What errors name: the socket's path, or the URL. */
  readonly where: string
  readonly tcp: boolean
  /** Starts one request (node:http's or node:https's request, aimed at the daemon). */
  request(options: HttpRequestOptions, onResponse: (response: IncomingMessage) => void): ClientRequest
  /** A kept-alive agent for this endpoint's requests. */
  agent(options: AgentOptions): Agent
}

export function socketEndpoint(socketPath: string): DaemonEndpoint {
  return {
    where: socketPath,
    tcp: false,
    request: (options, onResponse) => httpRequest({ ...UNIX_SOCKET_AGENT_OPTIONS, ...options, socketPath }, onResponse),
    agent: (options) => new Agent({ ...options, ...UNIX_SOCKET_AGENT_OPTIONS }),
  }
}

/** A console's listener: every request carries `Authorization: Bearer <token>`; `ca` trusts a certificate of its own (PEM). */
export function tcpEndpoint(url: string, token: string, ca?: string): DaemonEndpoint {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: `TEND_URL: expected http://host:port or https://host:port, got ${JSON.stringify(url)}` })
  }
  if ((parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.pathname !== '/' || parsed.search !== '' || parsed.username !== '') {
    throw new TendError('TEND_ERR_CONFIG_INVALID', {
      detail: `TEND_URL: expected http://host:port or https://host:port (no path, query or user), got ${JSON.stringify(url)}`,
    })
  }
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(token))
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: 'TEND_TOKEN: expected the token tend console printed (letters, digits, - and _)' })
  const secure = parsed.protocol === 'https:'
  // node:https only for an https URL: the CLI on its socket never loads TLS.
  const http = secure ? (createRequire(import.meta.url)('node:https') as typeof import('node:https')) : null
  const target = { protocol: parsed.protocol, host: parsed.hostname.replace(/^\[|\]$/g, ''), port: parsed.port || (secure ? 443 : 80), ...(ca ? { ca } : {}) }
  const authorization = `Bearer ${token}`
  return {
    where: parsed.origin,
    tcp: true,
    request: (options, onResponse) => {
      const merged = { ...options, ...target, headers: { ...options.headers, authorization } }
      return http ? http.request(merged, onResponse) : httpRequest(merged, onResponse)
    },
    agent: (options) => (http ? new http.Agent({ ...options, ...(ca ? { ca } : {}) }) : new Agent(options)),
  }
}
