import type { Server, Socket } from 'node:net'
import type { Logger } from 'pino'
import type { NetworkDecision } from '../../protocol/index.js'
import { Attributor } from './attributor.js'
import { relayOf } from './egress/relay.js'
import { DnsStub, EgressProxy, SyntheticAddresses, type EgressTask, type LocalAddress, type Peer } from './egress/index.js'
import type { OwnerNetwork } from './owner-network.js'
import type { OwnerNetworks } from './owner-networks.js'
import { DNS_STUB_ADDRESS, DNS_STUB_PORT, PROXY_ADDRESS, PROXY_PORT } from './task-environment.js'

/** How long a connection from a task still being launched waits for its spawn to be answered. */
const LAUNCH_WAIT_MS = 5000
/**
 * Connections one namespace may hold open in the daemon at once (the proxy, DNS over TCP and the
 * synthetic addresses together, while Node holds them): past it, new ones are closed at once.
 */
export const CONNECTIONS_PER_NAMESPACE = 128
/** Ended tasks remembered (a lookup under way at a task's end takes milliseconds to seconds). */
const ENDED_REMEMBERED = 4096
/** A connection that sends or receives nothing for this long is closed (slow clients hold descriptors). */
const IDLE_MS = 120_000

/** Ends a connection, Node's or a relay thread's, and resolves once it is closed. */
function endConnection(socket: Socket): Promise<void> {
  const relay = relayOf(socket)
  if (relay) {
    relay.stop()
    return relay.ended
  }
  if (socket.closed) return Promise.resolve()
  return new Promise((resolve) => {
    socket.once('close', () => resolve())
    socket.destroy()
  })
}

export interface EgressServiceOptions {
  networks: OwnerNetworks
  /** networkHosts: names the proxy resolves itself. */
  hosts: Readonly<Record<string, string>>
  /** Where each decision goes (the task's network.log and record). */
  record(taskId: string, decision: NetworkDecision): void
  log: Pick<Logger, 'warn' | 'info'>
  /** The proxy's resolver; default the system's. */
  resolve?(name: string): Promise<string[]>
}

/**
 * tend's egress proxy and DNS stub in every owner's namespace: listeners made there by the
 * namespace's holder (proxy port, DNS over UDP and TCP, and each synthetic address as the stub
 * hands it out), carried to the engine, which asks here which task each connection comes from.
 */
export class EgressService {
  /** Each task's connections (TCP, held by Node or by a relay thread), so that they end with it. */
  private readonly connections = new Map<string, Set<Socket>>()
  /** Tasks whose connections were ended: one attributed to them afterwards (its lookup was under way) is refused. */
  private readonly ended = new Set<string>()

  constructor(private readonly options: EgressServiceOptions) {
    options.networks.onOpen((network) => {
      this.attach(network).catch((error: unknown) => {
        options.log.warn({ owner: network.owner, err: error }, "the egress proxy could not listen in an owner's private network: its allow tasks reach no host")
      })
    })
  }

  /**
   * Ends every connection of a task that has ended, and resolves once each is closed and recorded
   * (its final record then has them): a connection the task handed to another process (a socket
   * passed over a Unix socket) does not outlive it.
   */
  async endTask(id: string): Promise<void> {
    if (this.ended.size >= ENDED_REMEMBERED) this.ended.delete(this.ended.values().next().value!)
    this.ended.add(id)
    const sockets = [...(this.connections.get(id) ?? [])]
    this.connections.delete(id)
    await Promise.all(sockets.map((socket) => endConnection(socket)))
  }

  private async attach(network: OwnerNetwork): Promise<void> {
    let open = 0
    /** The namespace's open connections by their far end, until a task is found for each. */
    const byPeer = new Map<string, Socket>()
    const held = new Set<Socket>()
    /** Every connection the namespace's listeners accept, bounded and timed out, then handed on. */
    const admitted = (handle: (socket: Socket) => void) => (socket: Socket) => {
      // Before anything else: an error with no listener would end the daemon.
      socket.on('error', () => socket.destroy())
      if (open >= CONNECTIONS_PER_NAMESPACE) return void socket.destroy()
      open++
      held.add(socket)
      const peer = `${socket.remoteAddress}:${socket.remotePort}`
      byPeer.set(peer, socket)
      socket.once('close', () => {
        if (byPeer.get(peer) === socket) byPeer.delete(peer)
        // A relayed connection still counts (and is still ended with its task) until its relay ends.
        const relay = relayOf(socket)
        void (relay ? relay.ended : Promise.resolve()).then(() => {
          open--
          held.delete(socket)
          for (const [task, sockets] of this.connections) if (sockets.delete(socket) && sockets.size === 0) this.connections.delete(task)
        })
      })
      socket.setTimeout(IDLE_MS, () => socket.destroy())
      handle(socket)
    }
    network.onClose(() => {
      for (const socket of held) void endConnection(socket)
    })
    const attributor = new Attributor(
      () => network.pid,
      () => this.options.networks.tasksOf(network.owner),
    )
    const attribute = async (peer: Peer, local: LocalAddress): Promise<EgressTask | null> => {
      const proto = peer.proto === 'udp' ? 'udp' : 'tcp'
      let found = await attributor.find(proto, peer, local)
      if (found === null && this.options.networks.tasksOf(network.owner).some((task) => task.pid === null)) {
        // A task may connect before the daemon has heard that it started: once it has, look again.
        await this.options.networks.launched(network.owner, LAUNCH_WAIT_MS)
        found = await attributor.find(proto, peer, local)
      }
      if (found === null) return null
      const socket = proto === 'tcp' ? byPeer.get(`${peer.address}:${peer.port}`) : undefined
      // The task ended while it was looked up (its processes may have handed the socket on): nothing more is its.
      if (this.ended.has(found.id) || !this.options.networks.tasksOf(network.owner).some((task) => task.id === found!.id)) {
        socket?.destroy()
        return null
      }
      if (socket && !socket.destroyed) {
        const sockets = this.connections.get(found.id) ?? new Set<Socket>()
        sockets.add(socket)
        this.connections.set(found.id, sockets)
      }
      return { id: found.id, network: found.network, allow: found.allow }
    }
    const record = (task: EgressTask, decision: NetworkDecision) => this.options.record(task.id, decision)
    const proxy = new EgressProxy({ hosts: this.options.hosts, attribute, record, ...(this.options.resolve ? { resolve: this.options.resolve } : {}) })
    const listeners = new Map<string, Server[]>()
    const addresses = new SyntheticAddresses(
      async (address, ports) => {
        for (const port of ports) {
          const server = await network.listenTcp(address, port)
          listeners.set(address, [...(listeners.get(address) ?? []), server])
          server.on(
            'connection',
            admitted((socket) => {
              const name = addresses.nameOf(address)
              if (name === undefined) return void socket.destroy()
              proxy.acceptTransparent(socket, name, port)
            }),
          )
        }
      },
      (address) => {
        for (const server of listeners.get(address) ?? []) server.close()
        listeners.delete(address)
      },
    )
    const stub = new DnsStub({ attribute, record, addresses })
    const proxyServer = await network.listenTcp(PROXY_ADDRESS, PROXY_PORT)
    proxyServer.on(
      'connection',
      admitted((socket) => proxy.acceptProxy(socket)),
    )
    const dnsTcp = await network.listenTcp(DNS_STUB_ADDRESS, DNS_STUB_PORT)
    dnsTcp.on(
      'connection',
      admitted((socket) => stub.acceptTcp(socket)),
    )
    const dnsUdp = await network.bindUdp(DNS_STUB_ADDRESS, DNS_STUB_PORT)
    dnsUdp.on('message', (message, from) => {
      const peer: Peer = { proto: 'udp', address: from.address, port: from.port }
      void stub.answerUdp(message, peer, { address: DNS_STUB_ADDRESS, port: DNS_STUB_PORT }).then((reply) => {
        if (reply !== null && network.alive) dnsUdp.send(reply, from.port, from.address)
      })
    })
    dnsUdp.on('error', () => {})
    network.onClose(() => proxy.close())
  }
}
