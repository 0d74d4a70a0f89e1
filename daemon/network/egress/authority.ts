import { isIP } from 'node:net'
import { destinationLabel } from '../../../protocol/index.js'
import { hostOf } from './destination.js'

/** A host and port as a task named them (`name:port`, `[v6]:port`, or a bare name on `defaultPort`). */
export interface Authority {
  name: string
  port: number
}

/** Parses an authority (a CONNECT target, a Host header); null when it is none. */
export function parseAuthority(text: string, defaultPort: number | null): Authority | null {
  let host = text
  let portText: string | null = null
  const bracketed = /^\[([^\]]+)\](?::(\d*))?$/.exec(text)
  if (bracketed) {
    if (isIP(bracketed[1]!) !== 6) return null
    host = bracketed[1]!
    portText = bracketed[2] ?? null
  } else {
    const colon = text.lastIndexOf(':')
    if (colon !== -1) {
      host = text.slice(0, colon)
      portText = text.slice(colon + 1)
    }
    if (host.includes(':')) return null
  }
  if (!/^[a-z0-9._-]+$/i.test(host) && isIP(host) === 0) return null
  const port = portText === null || portText === '' ? defaultPort : /^\d{1,5}$/.test(portText) ? Number(portText) : NaN
  if (port === null || !(port >= 1 && port <= 65535)) return null
  return { name: hostOf(host), port }
}

/** Whether a Host header names the destination: the same name, and the same port when it gives one. */
export function hostMismatch(hostHeader: string | undefined, target: Authority): string | null {
  if (hostHeader === undefined) return null
  const named = parseAuthority(hostHeader, target.port)
  if (named === null) return `Host ${JSON.stringify(hostHeader).slice(0, 80)} is no host`
  if (named.name !== target.name) return `Host names ${named.name}, not ${target.name}`
  if (named.port !== target.port) return `Host names ${destinationLabel(named)}, not ${destinationLabel(target)}`
  return null
}
