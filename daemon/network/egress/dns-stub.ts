import type { Socket } from 'node:net'
import { allowsName, canonicalName } from '../allowlist.js'
import { notProxied } from './destination.js'
import { buildAnswer, buildError, DNS_RCODE, DNS_TYPE, parseQuery, type DnsQuery } from './dns-message.js'
import type { SyntheticAddresses } from './synthetic-addresses.js'
import type { EgressOptions, EgressTask, LocalAddress, Peer } from './types.js'

/** Seconds a synthetic answer may be cached: short, so that a changed allowlist is soon seen. */
export const SYNTHETIC_TTL_SECONDS = 5
/** A DNS-over-TCP message larger than this ends the connection (no query needs it). */
const MAX_TCP_MESSAGE_BYTES = 4096

export interface DnsStubOptions {
  attribute: EgressOptions['attribute']
  record: EgressOptions['record']
  addresses: SyntheticAddresses
}

/**
 * The namespace's resolver. A name the task may reach gets a synthetic address (A) or an empty
 * answer (any other type); any other name gets NXDOMAIN, recorded as blocked. No query is ever
 * passed on: nothing a task puts in a name leaves the machine, and real addresses are found by
 * the proxy only when it connects.
 */
export class DnsStub {
  constructor(private readonly options: DnsStubOptions) {}

  async answerUdp(message: Buffer, peer: Peer, local: LocalAddress): Promise<Buffer | null> {
    return this.answer(message, peer, local)
  }

  /** DNS over TCP: messages with a 2-byte length prefix, answered in turn. */
  acceptTcp(socket: Socket): void {
    socket.on('error', () => socket.destroy())
    const peer: Peer = { proto: 'tcp', address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 }
    const local: LocalAddress = { address: socket.localAddress ?? '', port: socket.localPort ?? 0 }
    let buffered = Buffer.alloc(0)
    let chain = Promise.resolve()
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk])
      while (buffered.length >= 2) {
        const length = buffered.readUInt16BE(0)
        if (length > MAX_TCP_MESSAGE_BYTES) return void socket.destroy()
        if (buffered.length < 2 + length) return
        const message = buffered.subarray(2, 2 + length)
        buffered = buffered.subarray(2 + length)
        chain = chain.then(async () => {
          const reply = await this.answer(message, peer, local)
          if (reply === null) return void socket.destroy()
          const prefix = Buffer.alloc(2)
          prefix.writeUInt16BE(reply.length)
          if (!socket.destroyed) socket.write(Buffer.concat([prefix, reply]))
        })
      }
    })
  }

  private async answer(message: Buffer, peer: Peer, local: LocalAddress): Promise<Buffer | null> {
    const query = parseQuery(message)
    if (query === null) return null
    if (!('name' in query)) return buildError(query.id, query.flags, query.rcode)
    let task: EgressTask | null
    try {
      task = await this.options.attribute(peer, local)
    } catch {
      task = null
    }
    if (task === null) return null
    return this.answerFor(task, query)
  }

  private async answerFor(task: EgressTask, query: DnsQuery): Promise<Buffer> {
    const name = canonicalName(query.name)
    const reachable = task.network === 'allow' && name !== '' && allowsName(task.allow, name)
    if (!reachable) {
      const reason = `DNS lookup: ${task.network === 'allow' ? 'not on the allowlist' : notProxied(task.network)}`
      this.options.record(task, { time: new Date().toISOString(), name, port: 53, via: 'dns', decision: 'blocked', reason, sentBytes: 0, receivedBytes: 0 })
      return buildAnswer(query, DNS_RCODE.nxDomain, [], 0)
    }
    if (query.class !== 1 || query.type !== DNS_TYPE.A) return buildAnswer(query, DNS_RCODE.noError, [], 0)
    const ports = portsFor(task, name)
    try {
      const address = await this.options.addresses.addressFor(name, ports)
      return buildAnswer(query, DNS_RCODE.noError, [address], SYNTHETIC_TTL_SECONDS)
    } catch {
      return buildAnswer(query, DNS_RCODE.servFail, [], 0)
    }
  }
}

/** The ports of every entry allowing `name`: those a synthetic address must listen on. */
function portsFor(task: EgressTask, name: string): number[] {
  const ports = new Set<number>()
  for (const entry of task.allow) {
    if (entry.kind !== 'domain') continue
    if (entry.wildcard ? name.endsWith(`.${entry.domain}`) : name === entry.domain) for (const port of entry.ports) ports.add(port)
  }
  return [...ports].sort((a, b) => a - b)
}
