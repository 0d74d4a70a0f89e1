import type { NetworkMode } from '../../protocol/index.js'

/**
 * Where a task in its owner's namespace finds tend: the egress proxy (HTTP with CONNECT and
 * absolute URIs, and SOCKS5, on one port) and the DNS stub. Ports below 1024: a task, without
 * capabilities, cannot bind them first.
 */
export const PROXY_ADDRESS = '127.0.0.1'
export const PROXY_PORT = 1023
export const DNS_STUB_ADDRESS = '127.0.0.1'
export const DNS_STUB_PORT = 53

/** What loopback addresses a proxy-aware tool reaches directly: the owner's own servers. */
const NO_PROXY = 'localhost,127.0.0.1,::1'

/**
 * The proxy variables of an `allow` task, in both spellings (curl reads only the lower-case
 * http_proxy; Go, npm, pip and git read either). Tools that ignore them go through the DNS stub's
 * synthetic addresses instead (transparent).
 */
export function proxyEnvironment(mode: NetworkMode): Record<string, string> {
  if (mode !== 'allow') return {}
  const http = `http://${PROXY_ADDRESS}:${PROXY_PORT}`
  const socks = `socks5h://${PROXY_ADDRESS}:${PROXY_PORT}`
  return {
    HTTP_PROXY: http,
    HTTPS_PROXY: http,
    ALL_PROXY: socks,
    NO_PROXY,
    http_proxy: http,
    https_proxy: http,
    all_proxy: socks,
    no_proxy: NO_PROXY,
  }
}
