import type { Socket } from 'node:net'
import { decideDestination, defaultResolve, type Resolve } from './destination.js'
import type { RelayBytes } from './relay.js'
import type { EgressOptions, EgressTask, Via } from './types.js'
import { connectUpstream, UpstreamError, type Upstream } from './upstream.js'

/** What reaching a destination came to; blocked and unreachable ones are already recorded. */
export type Reached = { kind: 'connected'; upstream: Upstream; time: string } | { kind: 'blocked'; reason: string } | { kind: 'unreachable'; error: string }

/** One destination a task asked for, and how. */
export interface Request {
  task: EgressTask
  name: string
  port: number
  via: Via
}

/** What every front (HTTP, SOCKS5, transparent) shares: the policy, the upstream connects, the records, the sockets held. */
export class Engine {
  readonly hosts: Readonly<Record<string, string>>
  readonly resolve: Resolve
  readonly connectTimeoutMs: number
  private readonly held = new Set<Socket>()
  private closed = false

  constructor(private readonly options: EgressOptions) {
    this.hosts = options.hosts
    this.resolve = options.resolve ?? defaultResolve
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000
  }

  /** Keeps a socket to end on close(); one handed over after close() is ended at once. */
  hold(socket: Socket): void {
    if (this.closed) {
      socket.destroy()
      return
    }
    this.held.add(socket)
    socket.once('close', () => this.held.delete(socket))
  }

  get isClosed(): boolean {
    return this.closed
  }

  /** Decides, then connects to an address it checked (`spare`: an open connection to one, used first). */
  async reach(request: Request, spare?: Upstream): Promise<Reached> {
    const time = new Date().toISOString()
    const verdict = await decideDestination(request.task, request.name, request.port, this.hosts, this.resolve)
    if (!verdict.allowed) {
      this.blocked(request, verdict.reason, time)
      return { kind: 'blocked', reason: verdict.reason }
    }
    if (verdict.error !== undefined) return this.unreachable(request, verdict.error, time)
    if (spare !== undefined && verdict.addresses.includes(spare.address) && !spare.socket.destroyed) {
      return { kind: 'connected', upstream: spare, time }
    }
    try {
      const upstream = await connectUpstream(verdict.addresses, request.port, this.connectTimeoutMs)
      this.hold(upstream.socket)
      return { kind: 'connected', upstream, time }
    } catch (error) {
      return this.unreachable(request, error instanceof UpstreamError ? error.code : String(error), time)
    }
  }

  blocked(request: Request, reason: string, time = new Date().toISOString()): void {
    this.options.record(request.task, {
      time,
      name: request.name,
      port: request.port,
      via: request.via,
      decision: 'blocked',
      reason,
      sentBytes: 0,
      receivedBytes: 0,
    })
  }

  allowed(request: Request, time: string, address: string, bytes: RelayBytes): void {
    this.options.record(request.task, { time, name: request.name, port: request.port, via: request.via, decision: 'allowed', address, ...bytes })
  }

  private unreachable(request: Request, error: string, time: string): Reached {
    this.options.record(request.task, {
      time,
      name: request.name,
      port: request.port,
      via: request.via,
      decision: 'allowed',
      error,
      sentBytes: 0,
      receivedBytes: 0,
    })
    return { kind: 'unreachable', error }
  }

  /** Ends every connection held, on both sides. */
  close(): void {
    this.closed = true
    for (const socket of this.held) socket.destroy()
    this.held.clear()
  }
}
