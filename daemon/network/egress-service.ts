import type { Server, Socket } from 'node:net'
import type { Logger } from 'pino'
import type { NetworkDecision } from '../../protocol/index.js'
import { Attributor } from './attributor.js'
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
export const CONNECTIONS_PER_NAMESPACE = 256
/** A connection that sends or receives nothing for this long is closed (slow clients hold descriptors). */
const IDLE_MS = 120_000

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
  constructor(private readonly options: EgressServiceOptions) {
    options.networks.onOpen((network) => {
      this.attach(network).catch((error: unknown) => {
        options.log.warn({ owner: network.owner, err: error }, "the egress proxy could not listen in an owner's private network: its allow tasks reach no host")
      })
    })
  }

  private async attach(network: OwnerNetwork): Promise<void> {
    let open = 0
    /** Every connection the namespace's listeners accept, bounded and timed out, then handed on. */
    const admitted = (handle: (socket: Socket) => void) => (socket: Socket) => {
      if (open >= CONNECTIONS_PER_NAMESPACE) return void socket.destroy()
      open++
      socket.once('close', () => open--)
      socket.setTimeout(IDLE_MS, () => socket.destroy())
      handle(socket)
    }
    const attributor = new Attributor(() => network.pid, () => this.options.networks.tasksOf(network.owner))
    const attribute = async (peer: Peer, local: LocalAddress): Promise<EgressTask | null> => {
      const proto = peer.proto === 'udp' ? 'udp' : 'tcp'
      let found = await attributor.find(proto, peer, local)
      if (found === null && this.options.networks.tasksOf(network.owner).some((task) => task.pid === null)) {
        // A task may connect before the daemon has heard that it started: once it has, look again.
        await this.options.networks.launched(network.owner, LAUNCH_WAIT_MS)
        found = await attributor.find(proto, peer, local)
      }
      return found && { id: found.id, network: found.network, allow: found.allow }
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
    proxyServer.on('connection', admitted((socket) => proxy.acceptProxy(socket)))
    const dnsTcp = await network.listenTcp(DNS_STUB_ADDRESS, DNS_STUB_PORT)
    dnsTcp.on('connection', admitted((socket) => stub.acceptTcp(socket)))
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
