import { BlockList, isIP } from 'node:net'

/**
 * One destination the operator allows: a domain (exactly, or `*.` for every name below it, never
 * the name itself) or an IP address, on one port or, when none is given, on 80 and 443 (the web:
 * ssh, git:// or a database needs its port named).
 */
export type AllowEntry =
  | { kind: 'domain'; text: string; domain: string; wildcard: boolean; ports: readonly number[] }
  | { kind: 'address'; text: string; address: string; ports: readonly number[] }

/** The ports of an entry that names none. */
export const DEFAULT_ALLOWED_PORTS: readonly number[] = [80, 443]

const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/

/**
 * Addresses a name must not lead to unless the operator named that exact destination: loopback,
 * private, link-local, shared (CGNAT), multicast, unspecified and reserved ranges, IPv4 and IPv6
 * (IPv4-mapped IPv6 addresses are checked as the IPv4 address they carry).
 */
export const INTERNAL_ADDRESSES = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  INTERNAL_ADDRESSES.addSubnet(network, prefix, 'ipv4')
for (const [network, prefix] of [
  // IPv4-compatible (deprecated: ::a.b.c.d) and the unspecified and loopback addresses.
  ['::', 96],
  ['fc00::', 7],
  ['fe80::', 10],
  // Site-local (deprecated, still routed inside some networks).
  ['fec0::', 10],
  ['ff00::', 8],
  // NAT64 (the well-known prefix and the local-use one) and 6to4 carry an IPv4 address inside.
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['2002::', 16],
  // IPv4-translated (SIIT) and Teredo carry one too.
  ['::ffff:0:0:0', 96],
  ['2001::', 32],
  ['100::', 64],
] as const)
  INTERNAL_ADDRESSES.addSubnet(network, prefix, 'ipv6')

/** Whether an address is one a name must not lead to (see INTERNAL_ADDRESSES). */
export function isInternalAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 0) return false
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
    if (mapped) return INTERNAL_ADDRESSES.check(mapped[1]!, 'ipv4')
  }
  return INTERNAL_ADDRESSES.check(address, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * Parses one allowlist pattern (`registry.example`, `*.example.org`, `git.example:22`,
 * `203.0.113.7:443`, `[2001:db8::1]:443`), or says what is wrong with it in terms of what the
 * operator wrote. An internal address is refused here: it is allowed only through a name that
 * networkHosts maps to it, so that reaching it is a choice written down twice.
 */
export function parseAllowEntry(text: string): AllowEntry | { problem: string } {
  const quoted = JSON.stringify(text)
  const trimmed = text.trim()
  if (trimmed === '') return { problem: 'an empty pattern: expected a domain such as registry.example or *.example.org, with an optional :port' }
  if (/\s/.test(trimmed)) return { problem: `${quoted} contains white space: give one pattern per entry` }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed))
    return {
      problem:
        `${quoted} is a URL: give the host (and an optional :port), e.g. ` + `${JSON.stringify(trimmed.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').split('/')[0])}`,
    }
  if (trimmed.includes('/')) return { problem: `${quoted} has a path or a network prefix: give one host or address (and an optional :port)` }
  let host = trimmed
  let portText: string | null = null
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(trimmed)
  if (bracketed) {
    host = bracketed[1]!
    portText = bracketed[2] ?? null
  } else if (isIP(trimmed) !== 6) {
    const colon = trimmed.lastIndexOf(':')
    if (colon !== -1) {
      host = trimmed.slice(0, colon)
      portText = trimmed.slice(colon + 1)
    }
  }
  let ports = DEFAULT_ALLOWED_PORTS
  if (portText !== null) {
    const port = /^\d{1,5}$/.test(portText) ? Number(portText) : NaN
    if (!(port >= 1 && port <= 65535)) return { problem: `${quoted} has port ${JSON.stringify(portText)}: expected a number from 1 to 65535` }
    ports = [port]
  }
  const family = isIP(host)
  if (family !== 0) {
    if (bracketed && family !== 6) return { problem: `${quoted}: brackets are for IPv6 addresses` }
    if (isInternalAddress(host)) {
      return {
        problem:
          `${quoted} is an internal address (loopback, private, link-local or reserved): name it in networkHosts (e.g. {"db.internal": "` +
          `${host}"}) and allow that name, so that reaching it is written down as a choice`,
      }
    }
    return { kind: 'address', text: trimmed, address: host.toLowerCase(), ports }
  }
  if (bracketed) return { problem: `${quoted}: brackets are for IPv6 addresses, got ${JSON.stringify(host)}` }
  const lowered = host.toLowerCase().replace(/\.$/, '')
  const wildcard = lowered.startsWith('*.')
  const domain = wildcard ? lowered.slice(2) : lowered
  if (domain.includes('*')) return { problem: `${quoted}: a wildcard stands only at the start, as "*.", for every name below a domain (e.g. *.example.org)` }
  const labels = domain.split('.')
  if (!isDomainName(domain)) {
    const numeric = labels.length > 0 && LABEL.test(labels.at(-1)!) && !/^[a-z]/.test(labels.at(-1)!)
    if (numeric)
      return {
        problem:
          `${quoted}` +
          ' reads as an address, not a domain name (a resolver takes 127.1 or 2130706433 for 127.0.0.1): ' +
          'give a domain, or a public address in dotted form',
      }
    return { problem: `${quoted} is not a domain name: expected labels of letters, digits and hyphens separated by dots, e.g. registry.example` }
  }
  if (wildcard && labels.length < 2) return { problem: `${quoted} would allow every name under a top-level domain: name a domain, e.g. *.example.org` }
  return { kind: 'domain', text: trimmed, domain, wildcard, ports }
}

/** Parses every pattern of a list; the problems name each entry by its place (`networkAllow/2: …`). */
export function parseAllowList(entries: readonly string[], field: string): { entries: AllowEntry[]; problems: string[] } {
  const parsed: AllowEntry[] = []
  const problems: string[] = []
  entries.forEach((text, index) => {
    const entry = parseAllowEntry(text)
    if ('problem' in entry) problems.push(`${field}/${index}: ${entry.problem}`)
    else parsed.push(entry)
  })
  return { entries: parsed, problems }
}

/**
 * Whether `name` (lower case, no trailing dot) is a domain name the proxy may act on: labels of
 * letters, digits, hyphens and underscores, at most 253 characters, the last label starting
 * with a letter. Nothing else is: a NUL or a dot inside a label (which a resolver cuts or splits
 * differently from the text that matched a wildcard), white space, and names a resolver reads as
 * an address (127.1, 0x7f.1, 2130706433).
 */
export function isDomainName(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false
  const labels = name.split('.')
  return labels.every((label) => LABEL.test(label)) && /^[a-z]/.test(labels.at(-1)!)
}

/** A name as the proxy compares it: lower case, without a trailing dot. */
export function canonicalName(name: string): string {
  return name.toLowerCase().replace(/\.$/, '')
}

/** The entry that allows `name` (a domain or an address) on `port`, or null. */
export function allowingEntry(entries: readonly AllowEntry[], name: string, port: number): AllowEntry | null {
  const wanted = canonicalName(name)
  const address = isIP(wanted) !== 0 ? wanted : null
  if (address === null && !isDomainName(wanted)) return null
  for (const entry of entries) {
    if (!entry.ports.includes(port)) continue
    if (entry.kind === 'address') {
      if (address !== null && sameAddress(entry.address, address)) return entry
    } else if (address === null && (entry.wildcard ? wanted.endsWith(`.${entry.domain}`) : wanted === entry.domain)) return entry
  }
  return null
}

/** Whether a name matches some entry on any port (a DNS answer needs no port). */
export function allowsName(entries: readonly AllowEntry[], name: string): boolean {
  const wanted = canonicalName(name)
  if (!isDomainName(wanted)) return false
  return entries.some((entry) => entry.kind === 'domain' && (entry.wildcard ? wanted.endsWith(`.${entry.domain}`) : wanted === entry.domain))
}

function sameAddress(a: string, b: string): boolean {
  if (a === b) return true
  const list = new BlockList()
  try {
    list.addAddress(a, isIP(a) === 6 ? 'ipv6' : 'ipv4')
    return list.check(b, isIP(b) === 6 ? 'ipv6' : 'ipv4')
  } catch {
    return false
  }
}

/** What a task may reach: the operator's networkAllow and the task's own allowNet, parsed (both were checked when given). */
export function taskAllowList(networkAllow: readonly string[], allowNet: readonly string[] | undefined): AllowEntry[] {
  return parseAllowList([...networkAllow, ...(allowNet ?? [])], 'networkAllow').entries
}
