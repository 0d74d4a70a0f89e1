import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, statSync } from 'node:fs'
import { createSocket, type Socket as UdpSocket } from 'node:dgram'
import { createServer, isIP, Socket, type Server } from 'node:net'
import { holderControl, HOLDER_PATH, type HolderControl } from './holder/holder-addon.js'

/** A network namespace as the spawner joins it: a path that opens it, and the identity it must have there. */
export interface NamespaceRef {
  path: string
  /** As `statSync(path, { bigint: true })` gives them, in decimal. */
  dev: string
  ino: string
  /**
   * The user namespace that owns it, when that is not the daemon's (an unprivileged daemon's):
   * joined first. The native spawner's child finds it from the namespace itself; the node spawner
   * is handed it (nsenter --user).
   */
  userns?: { path: string; dev: string; ino: string }
}

/** How long the holder may take to come up, or to make one socket (it answers in microseconds). */
const HOLDER_ANSWER_MS = 5000

/**
 * One owner's private network namespace, only `lo`, held by its holder process (tend-netns) while
 * the owner's sandboxed tasks run in it. The holder makes sockets in it for the daemon: the egress
 * proxy's and the DNS stub's listeners, bound to ports below 1024 that no task can take first.
 */
export class OwnerNetwork {
  private closed = false
  private readonly servers: Array<Server | UdpSocket> = []
  private readonly closing: Array<() => void> = []

  private constructor(
    readonly owner: string,
    private readonly holder: ChildProcess,
    private readonly control: number,
    private readonly addon: HolderControl,
    readonly namespace: NamespaceRef,
  ) {
    holder.once('exit', () => this.close())
  }

  /**
   * Makes the owner's namespace (`join` absent) or holds the one `join` names (a running task's,
   * after a daemon restart): it must be that very namespace, never the host's.
   */
  static open(owner: string, join?: NamespaceRef): OwnerNetwork {
    const loaded = holderControl()
    if (!loaded.addon) throw new Error(loaded.reason)
    const addon = loaded.addon
    const [mine, theirs] = addon.pair()
    let holder: ChildProcess
    try {
      holder = spawn(HOLDER_PATH, [String(process.pid), ...(join ? ['join', join.path, join.dev, join.ino] : ['new'])], {
        stdio: ['ignore', 'ignore', 'pipe', theirs],
      })
    } finally {
      closeSync(theirs)
    }
    let stderr = ''
    holder.stderr?.setEncoding('utf8').on('data', (text: string) => (stderr += text))
    holder.once('error', () => {})
    try {
      const { reply } = addon.exchange(mine, '', HOLDER_ANSWER_MS)
      if (reply !== 'ready') throw new Error(holderFailure(reply))
      const path = `/proc/${holder.pid}/ns/net`
      const info = statSync(path, { bigint: true })
      if (info.ino === statSync('/proc/self/ns/net', { bigint: true }).ino) throw new Error("the holder is in the daemon's own network namespace")
      const usernsPath = `/proc/${holder.pid}/ns/user`
      const userns = statSync(usernsPath, { bigint: true })
      const own = userns.ino === statSync('/proc/self/ns/user', { bigint: true }).ino
      const namespace: NamespaceRef = {
        path,
        dev: String(info.dev),
        ino: String(info.ino),
        ...(own ? {} : { userns: { path: usernsPath, dev: String(userns.dev), ino: String(userns.ino) } }),
      }
      return new OwnerNetwork(owner, holder, mine, addon, namespace)
    } catch (error) {
      holder.kill('SIGKILL')
      closeSync(mine)
      throw new Error(`the private network of ${owner} could not be made: ${(error as Error).message}${stderr ? ` (${stderr.trim()})` : ''}`)
    }
  }

  /** False once its holder is gone or it was closed: no task may join it any more. */
  get alive(): boolean {
    return !this.closed
  }

  /** The holder's pid: /proc/<pid>/net/* describe the namespace's sockets. */
  get pid(): number {
    return this.holder.pid!
  }

  /** A TCP server listening on address:port inside the namespace; closed with the network. */
  listenTcp(address: string, port: number): Promise<Server> {
    const fd = this.socket('tcp', address, port)
    const server = createServer({ pauseOnConnect: false })
    this.servers.push(server)
    server.once('close', () => {
      const at = this.servers.indexOf(server)
      if (at !== -1) this.servers.splice(at, 1)
    })
    return new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen({ fd }, () => {
        server.off('error', reject)
        // A failed accept (EMFILE under load) is the server's error event: with no listener it
        // would end the daemon. The connection it could not take is simply not served.
        server.on('error', () => {})
        resolve(server)
      })
    })
  }

  /** A UDP socket bound to address:port inside the namespace; closed with the network. */
  bindUdp(address: string, port: number): Promise<UdpSocket> {
    const fd = this.socket('udp', address, port)
    const socket = createSocket(isIP(address) === 6 ? 'udp6' : 'udp4')
    this.servers.push(socket)
    return new Promise((resolve, reject) => {
      socket.once('error', reject)
      socket.bind({ fd }, () => {
        socket.off('error', reject)
        resolve(socket)
      })
    })
  }

  /**
   * A TCP connection to address:port made inside the namespace (a readiness URL's try): only what
   * listens there is reached (the namespace has only `lo`). The holder starts it and does not wait:
   * the socket completes it, and what is written waits for it (a refusal is the socket's error).
   */
  connectTcp(address: string, port: number): Socket {
    return new Socket({ fd: this.socket('connect', address, port), readable: true, writable: true })
  }

  /** Called once when the network closes (its holder gone, or closed). */
  onClose(listener: () => void): void {
    if (this.closed) listener()
    else this.closing.push(listener)
  }

  /** Ends the holder and every socket made in the namespace; tasks still in it keep it. */
  close(): void {
    if (this.closed) return
    this.closed = true
    for (const listener of this.closing.splice(0)) listener()
    for (const server of this.servers) {
      try {
        server.close()
      } catch {
        // already closed
      }
    }
    try {
      closeSync(this.control)
    } catch {
      // already closed
    }
    this.holder.kill('SIGKILL')
  }

  private socket(kind: 'tcp' | 'udp' | 'connect', address: string, port: number): number {
    if (this.closed) throw new Error(`the private network of ${this.owner} is closed`)
    const { reply, fd } = this.addon.exchange(this.control, `${kind} ${address} ${port}`, HOLDER_ANSWER_MS)
    if (reply !== 'ok' || fd < 0)
      throw Object.assign(new Error(`${kind} ${address}:${port} in the private network of ${this.owner}: ${holderFailure(reply)}`), { code: errnoName(reply) })
    return fd
  }
}

/** `err ERRNO STEP` as a sentence. */
function holderFailure(reply: string): string {
  const match = /^err (\d+) (.*)$/.exec(reply)
  if (!match) return `unexpected answer ${JSON.stringify(reply)}`
  return `${match[2]} failed (${errnoName(reply) ?? `errno ${match[1]}`})`
}

const ERRNO_NAMES: Record<number, string> = {
  1: 'EPERM',
  2: 'ENOENT',
  13: 'EACCES',
  16: 'EBUSY',
  22: 'EINVAL',
  24: 'EMFILE',
  28: 'ENOSPC',
  98: 'EADDRINUSE',
  101: 'ENETUNREACH',
  110: 'ETIMEDOUT',
  111: 'ECONNREFUSED',
  99: 'EADDRNOTAVAIL',
  116: 'ESTALE',
}

function errnoName(reply: string): string | undefined {
  const match = /^err (\d+)/.exec(reply)
  return match ? ERRNO_NAMES[Number(match[1])] : undefined
}
