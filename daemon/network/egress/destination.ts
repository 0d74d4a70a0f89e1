import { isIP } from 'node:net'
import { allowingEntry, canonicalName, isInternalAddress } from '../allowlist.js'
import type { EgressTask } from './types.js'
import { lookupName } from './name-lookup.js'

/** Where a destination may be reached (the addresses the engine itself found), or why not. */
export type Verdict = { allowed: true; addresses: string[]; error?: string } | { allowed: false; reason: string }

export type Resolve = (name: string) => Promise<string[]>

export const defaultResolve: Resolve = lookupName

/** A host as it is compared and logged: lower case, no trailing dot, an IPv6 literal without brackets. */
export function hostOf(text: string): string {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  return canonicalName(bare)
}

/**
 * The policy check, on facts the task cannot shape: its mode, the allowlist for that name and
 * port, and the addresses found here (networkHosts first, then the system's resolver). A name
 * leading to any internal address is refused unless networkHosts maps it: a resolver answer
 * mixing one public and one internal address is a rebinding attempt, not a choice of the operator.
 */
export async function decideDestination(
  task: EgressTask,
  name: string,
  port: number,
  hosts: Readonly<Record<string, string>>,
  resolve: Resolve,
): Promise<Verdict> {
  if (task.network !== 'allow') return { allowed: false, reason: notProxied(task.network) }
  if (!Number.isInteger(port) || port < 1 || port > 65535) return { allowed: false, reason: `port ${port} is not a port` }
  const host = hostOf(name)
  if (isIP(host) !== 0) {
    if (allowingEntry(task.allow, host, port) === null) return { allowed: false, reason: 'an IP address not on the allowlist' }
    return { allowed: true, addresses: [host] }
  }
  if (allowingEntry(task.allow, host, port) === null) return { allowed: false, reason: 'not on the allowlist' }
  const mapped = mappedAddress(hosts, host)
  if (mapped !== undefined) return { allowed: true, addresses: [mapped] }
  let addresses: string[]
  try {
    addresses = await resolve(host)
  } catch (error) {
    return { allowed: true, addresses: [], error: (error as NodeJS.ErrnoException).code ?? String(error) }
  }
  if (addresses.length === 0) return { allowed: true, addresses: [], error: 'ENOTFOUND' }
  const internal = addresses.find((address) => isIP(address) === 0 || isInternalAddress(address))
  if (internal !== undefined) return { allowed: false, reason: `resolves to ${internal}, an internal address` }
  return { allowed: true, addresses }
}

/** Why a task whose network is not `allow` gets nothing from the proxy. */
export function notProxied(network: EgressTask['network']): string {
  return network === 'host' ? 'network host goes around the proxy' : `network ${network} reaches no host`
}

function mappedAddress(hosts: Readonly<Record<string, string>>, host: string): string | undefined {
  for (const [name, address] of Object.entries(hosts)) if (canonicalName(name) === host) return address
  return undefined
}
