import type { Socket } from 'node:net'
import { Engine } from './engine.js'
import { HttpFront } from './http-front.js'
import { readSocksRequest, SOCKS_REPLY, socksReply } from './socks5.js'
import type { EgressOptions, EgressTask } from './types.js'

/**
 * tend's egress proxy: takes connections accepted inside a task's namespace (on the proxy port, or
 * on a synthetic address standing for a name), finds the task by `attribute`, and carries what
 * its policy allows to addresses the engine resolved and checked itself, recording each decision.
 */
export class EgressProxy {
  private readonly engine: Engine
  private readonly http: HttpFront

  constructor(private readonly options: EgressOptions) {
    this.engine = new Engine(options)
    this.http = new HttpFront(this.engine)
  }

  /** A connection to the proxy port: SOCKS5 when its first byte is 5, HTTP (absolute URIs, CONNECT) otherwise. */
  acceptProxy(socket: Socket): void {
    void this.attributed(socket).then((task) => {
      if (task === null) return
      socket.once('data', (first: Buffer) => {
        socket.pause()
        if (first[0] === 0x05) {
          socket.unshift(first)
          return void this.socks(socket, task)
        }
        this.http.accept(socket, first, { task, via: 'http' })
      })
    })
  }

  /** A connection to a synthetic address: `name` is what it stands for, `port` where it was made. */
  acceptTransparent(socket: Socket, name: string, port: number): void {
    void this.attributed(socket).then(async (task) => {
      if (task === null) return
      const request = { task, name, port, via: 'transparent' as const }
      const reached = await this.engine.reach(request)
      if (reached.kind !== 'connected') return void socket.destroy()
      this.http.carry(socket, reached.upstream, request, reached.time, Buffer.alloc(0))
    })
  }

  /** Ends every connection the proxy holds; connections handed over later are ended at once. */
  close(): void {
    this.engine.close()
  }

  /** The task a socket comes from, once the socket is held; null (the socket destroyed) when none is. */
  private async attributed(socket: Socket): Promise<EgressTask | null> {
    socket.on('error', () => socket.destroy())
    this.engine.hold(socket)
    let task: EgressTask | null = null
    try {
      task = await this.options.attribute(
        { proto: 'tcp', address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 },
        { address: socket.localAddress ?? '', port: socket.localPort ?? 0 },
      )
    } catch {
      task = null
    }
    if (task === null || socket.destroyed) {
      socket.destroy()
      return null
    }
    return task
  }

  private async socks(socket: Socket, task: EgressTask): Promise<void> {
    const asked = await readSocksRequest(socket)
    if ('refused' in asked) return
    const request = { task, name: asked.target.name, port: asked.target.port, via: 'socks' as const }
    const reached = await this.engine.reach(request)
    if (reached.kind === 'blocked') return void socket.end(socksReply(SOCKS_REPLY.notAllowed))
    if (reached.kind === 'unreachable') return void socket.end(socksReply(replyFor(reached.error)))
    socket.write(socksReply(SOCKS_REPLY.succeeded))
    this.http.carry(socket, reached.upstream, request, reached.time, asked.head)
  }
}

function replyFor(error: string): number {
  if (error === 'ECONNREFUSED') return SOCKS_REPLY.connectionRefused
  if (error === 'ETIMEDOUT') return SOCKS_REPLY.ttlExpired
  if (error === 'ENOTFOUND' || error === 'EHOSTUNREACH' || error === 'ENETUNREACH' || error === 'EAI_AGAIN') return SOCKS_REPLY.hostUnreachable
  return SOCKS_REPLY.generalFailure
}
