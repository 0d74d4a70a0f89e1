import { readFileSync, statSync } from 'node:fs'
import { Resolver } from 'node:dns/promises'
import { isIP } from 'node:net'

/**
 * The proxy's own name lookups: /etc/hosts, then the system's DNS servers through c-ares, which
 * keeps its own sockets. getaddrinfo (dns.lookup) would run on libuv's thread pool, of which at
 * most two threads take lookups for the whole daemon: one owner's flood of names whose servers
 * never answer would stall every other owner's lookups (and the daemon's file work beside them).
 * Each lookup is bounded (LOOKUP_TIMEOUT_MS, tried twice).
 */
const LOOKUP_TIMEOUT_MS = 3000
const resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: 2 })

export async function lookupName(name: string): Promise<string[]> {
  const listed = hostsFile().get(name.toLowerCase())
  if (listed) return listed
  const [four, six] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)])
  const addresses = [...(four.status === 'fulfilled' ? four.value : []), ...(six.status === 'fulfilled' ? six.value : [])]
  if (addresses.length > 0) return addresses
  const failure = four.status === 'rejected' ? (four.reason as NodeJS.ErrnoException) : null
  throw Object.assign(new Error(`${name} could not be resolved`), { code: failure?.code ?? 'ENOTFOUND' })
}

const HOSTS_FILE = '/etc/hosts'
let hosts: { mtimeMs: number; size: number; names: Map<string, string[]> } | undefined

/** /etc/hosts as names to addresses, read again when it changes. */
function hostsFile(): Map<string, string[]> {
  let info
  try {
    info = statSync(HOSTS_FILE)
  } catch {
    return new Map()
  }
  if (hosts && hosts.mtimeMs === info.mtimeMs && hosts.size === info.size) return hosts.names
  const names = new Map<string, string[]>()
  let text = ''
  try {
    text = readFileSync(HOSTS_FILE, 'utf8')
  } catch {
    // unreadable: no entries
  }
  for (const line of text.split('\n')) {
    const [address, ...aliases] = line.replace(/#.*/, '').trim().split(/\s+/)
    if (!address || isIP(address) === 0) continue
    for (const alias of aliases) {
      const key = alias.toLowerCase()
      names.set(key, [...(names.get(key) ?? []), address])
    }
  }
  hosts = { mtimeMs: info.mtimeMs, size: info.size, names }
  return names
}
