import { afterEach, describe, expect, test } from 'vitest'
import { createSocket, type Socket as UdpSocket } from 'node:dgram'
import { Resolver } from 'node:dns/promises'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { DnsStub, EgressProxy, SyntheticAddresses, type Decision, type EgressTask } from '../../daemon/network/egress/index.js'
import { waitFor } from '../helpers/wait-for.js'
import { listening, parsedAllow, rawConnection } from './egress-harness.js'

/*
 * The DNS stub on real sockets: Node's resolver (c-ares) asks a UDP socket on 127.0.0.1 that
 * hands each datagram to the stub. The engine's resolver records its calls: a lookup the stub
 * answers must never reach it (nothing a task puts in a name leaves the machine).
 */

interface Stub {
  resolver: Resolver
  decisions: Decision[]
  listened: Array<{ address: string; ports: readonly number[] }>
  resolved: string[]
  addresses: SyntheticAddresses
  stub: DnsStub
  udp: UdpSocket
  tcp: Server
  tcpPort: number
  task: { current: EgressTask }
}

let open: Stub | undefined

afterEach(async () => {
  if (open === undefined) return
  open.udp.close()
  await new Promise<void>((resolve) => open!.tcp.close(() => resolve()))
  open = undefined
})

async function startStub(task: EgressTask, listen?: (address: string, ports: readonly number[]) => Promise<void>): Promise<Stub> {
  const decisions: Decision[] = []
  const listened: Stub['listened'] = []
  const resolved: string[] = []
  const current = { current: task }
  const attribute = async () => current.current
  const record = (_task: EgressTask, decision: Decision) => decisions.push(decision)
  // The proxy shares the namespace with the stub; its resolver must stay untouched by lookups.
  const proxy = new EgressProxy({ hosts: {}, attribute, record, resolve: async (name) => (resolved.push(name), []) })
  proxy.close()
  const addresses = new SyntheticAddresses(listen ?? (async (address, ports) => void listened.push({ address, ports })))
  const stub = new DnsStub({ attribute, record, addresses })
  const udp = createSocket('udp4')
  udp.on('message', (message, remote) => {
    void stub
      .answerUdp(message, { proto: 'udp', address: remote.address, port: remote.port }, { address: '127.0.0.1', port: (udp.address() as AddressInfo).port })
      .then((reply) => {
        if (reply !== null) udp.send(reply, remote.port, remote.address)
      })
  })
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', () => resolve()))
  const tcp = createServer((socket) => stub.acceptTcp(socket))
  const tcpPort = await listening(tcp)
  const resolver = new Resolver({ timeout: 2_000, tries: 1 })
  resolver.setServers([`127.0.0.1:${(udp.address() as AddressInfo).port}`])
  open = { resolver, decisions, listened, resolved, addresses, stub, udp, tcp, tcpPort, task: current }
  return open
}

function allowTask(patterns: readonly string[], network: EgressTask['network'] = 'allow'): EgressTask {
  return { id: 'task-1', network, allow: parsedAllow(patterns) }
}

/** A query by hand: id, flags, one question. */
function query(name: string, type: number, id = 0x1234): Buffer {
  const labels = name.split('.').map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label)]))
  const header = Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])
  return Buffer.concat([header, ...labels, Buffer.from([0, type >> 8, type & 0xff, 0, 1])])
}

const PEER = { proto: 'udp' as const, address: '127.0.0.1', port: 5353 }
const LOCAL = { address: '127.0.0.1', port: 53 }

describe('DNS stub', () => {
  test('an allowed name gets a synthetic address, with listeners on its ports opened first; the same name keeps it', async () => {
    const stub = await startStub(allowTask(['registry.example', '*.git.example:22', 'git.example:9418']))
    const first = await stub.resolver.resolve4('registry.example', { ttl: true })
    expect(first).toEqual([{ address: '127.100.0.1', ttl: 5 }])
    expect(stub.listened).toEqual([{ address: '127.100.0.1', ports: [80, 443] }])
    expect(await stub.resolver.resolve4('REGISTRY.example.')).toEqual(['127.100.0.1'])
    expect(await stub.resolver.resolve4('a.git.example')).toEqual(['127.100.0.2'])
    expect(stub.listened.at(-1)).toEqual({ address: '127.100.0.2', ports: [22] })
    expect(stub.addresses.nameOf('127.100.0.2')).toBe('a.git.example')
    expect(stub.listened).toHaveLength(2)
    expect(stub.decisions).toEqual([])
    expect(stub.resolved).toEqual([])
  })

  test('AAAA and other types for an allowed name answer NOERROR with no record', async () => {
    const stub = await startStub(allowTask(['registry.example']))
    await expect(stub.resolver.resolve6('registry.example')).rejects.toMatchObject({ code: 'ENODATA' })
    await expect(stub.resolver.resolveTxt('registry.example')).rejects.toMatchObject({ code: 'ENODATA' })
    expect(stub.decisions).toEqual([])
  })

  test('an unlisted name gets NXDOMAIN, is recorded as blocked, and no lookup leaves the stub', async () => {
    const stub = await startStub(allowTask(['registry.example']))
    await expect(stub.resolver.resolve4('secret-data.evil.example')).rejects.toMatchObject({ code: 'ENOTFOUND' })
    await expect(stub.resolver.resolveTxt('exfil.evil.example')).rejects.toMatchObject({ code: 'ENOTFOUND' })
    expect(stub.decisions.map((d) => [d.name, d.port, d.via, d.decision, d.reason])).toEqual([
      ['secret-data.evil.example', 53, 'dns', 'blocked', 'DNS lookup: not on the allowlist'],
      ['exfil.evil.example', 53, 'dns', 'blocked', 'DNS lookup: not on the allowlist'],
    ])
    expect(stub.resolved).toEqual([])
    expect(stub.listened).toEqual([])
  })

  test('a loopback task gets NXDOMAIN for every name', async () => {
    const stub = await startStub(allowTask(['registry.example'], 'loopback'))
    await expect(stub.resolver.resolve4('registry.example')).rejects.toMatchObject({ code: 'ENOTFOUND' })
    expect(stub.decisions.map((d) => d.reason)).toEqual(['DNS lookup: network loopback reaches no host'])
  })

  test('the answer echoes the question as the task cased it', async () => {
    const stub = await startStub(allowTask(['registry.example']))
    const reply = (await stub.stub.answerUdp(query('ReGiStRy.example', 1, 0xbeef), PEER, LOCAL))!
    expect(reply.readUInt16BE(0)).toBe(0xbeef)
    expect(reply.readUInt16BE(2) & 0x800f).toBe(0x8000)
    expect(reply.subarray(12, 12 + 18).toString('latin1')).toContain('ReGiStRy')
  })

  test('malformed messages are answered FORMERR or dropped', async () => {
    const stub = await startStub(allowTask(['registry.example']))
    expect(await stub.stub.answerUdp(Buffer.from([1, 2, 3]), PEER, LOCAL)).toBeNull()
    const two = query('registry.example', 1)
    two.writeUInt16BE(2, 4)
    expect((await stub.stub.answerUdp(two, PEER, LOCAL))!.readUInt16BE(2) & 0xf).toBe(1)
    const cut = query('registry.example', 1).subarray(0, 20)
    expect((await stub.stub.answerUdp(cut, PEER, LOCAL))!.readUInt16BE(2) & 0xf).toBe(1)
    const pointer = Buffer.concat([query('a', 1).subarray(0, 12), Buffer.from([0xc0, 0x0c, 0, 1, 0, 1])])
    expect((await stub.stub.answerUdp(pointer, PEER, LOCAL))!.readUInt16BE(2) & 0xf).toBe(1)
    const answer = query('registry.example', 1)
    answer.writeUInt16BE(0x8100, 2)
    expect(await stub.stub.answerUdp(answer, PEER, LOCAL)).toBeNull()
    expect(stub.listened).toEqual([])
  })

  test('a datagram no task is found for is dropped and nothing is recorded', async () => {
    const stub = await startStub(allowTask(['registry.example']))
    const stub2 = new DnsStub({ attribute: async () => null, record: (_t, d) => stub.decisions.push(d), addresses: stub.addresses })
    expect(await stub2.answerUdp(query('evil.example', 1), PEER, LOCAL)).toBeNull()
    expect(stub.decisions).toEqual([])
  })

  test('DNS over TCP answers each length-prefixed query in turn', async () => {
    const stub = await startStub(allowTask(['registry.example']))
    const client = rawConnection(stub.tcpPort)
    const framed = (message: Buffer) => Buffer.concat([Buffer.from([message.length >> 8, message.length & 0xff]), message])
    client.socket.write(Buffer.concat([framed(query('registry.example', 1, 1)), framed(query('evil.example', 1, 2))]))
    await waitFor('two answers', () => {
      const bytes = client.received()
      return (
        bytes.length >= 2 &&
        bytes.length >= 2 + bytes.readUInt16BE(0) + 2 &&
        bytes.length >= 4 + bytes.readUInt16BE(0) + bytes.readUInt16BE(2 + bytes.readUInt16BE(0))
      )
    })
    const bytes = client.received()
    const firstLength = bytes.readUInt16BE(0)
    const first = bytes.subarray(2, 2 + firstLength)
    const second = bytes.subarray(4 + firstLength)
    expect([first.readUInt16BE(0), first.readUInt16BE(2) & 0xf, first.readUInt16BE(6)]).toEqual([1, 0, 1])
    expect([...first.subarray(-4)]).toEqual([127, 100, 0, 1])
    expect([second.readUInt16BE(0), second.readUInt16BE(2) & 0xf]).toEqual([2, 3])
    client.socket.destroy()
  })

  test('two queries at once open each port once', async () => {
    const calls: Array<readonly number[]> = []
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const stub = await startStub(allowTask(['registry.example']), async (_address, ports) => {
      calls.push(ports)
      await gate
    })
    const both = Promise.all([stub.addresses.addressFor('registry.example', [80, 443]), stub.addresses.addressFor('registry.example', [443])])
    await waitFor('the first listen call', () => calls.length === 1)
    release()
    expect(await both).toEqual(['127.100.0.1', '127.100.0.1'])
    expect(calls).toEqual([[80, 443]])
  })

  test('a listener that cannot be opened answers SERVFAIL', async () => {
    const stub = await startStub(allowTask(['registry.example']), async () => {
      throw new Error('EADDRINUSE')
    })
    await expect(stub.resolver.resolve4('registry.example')).rejects.toMatchObject({ code: 'ESERVFAIL' })
  })
})
