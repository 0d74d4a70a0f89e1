import { lstatSync } from 'node:fs'
import type { Server as NetServer } from 'node:net'
import { loadPeerAddon, type PeerCredentialsAddon } from '../peer/index.js'

/** A socket file by (dev, ino); the inode number's low 32 bits, all the kernel's answer carries. */
export interface SocketIdentity {
  dev: number
  ino: number
}

/** Which socket file a listener's path was made as; null when it has none. */
export interface ListenerIdentity {
  of(listener: NetServer, path: string): SocketIdentity | null
  /** Why the answer comes from the path rather than from the kernel, when it does. */
  readonly weakness?: string
}

/**
 * Asks the kernel which inode each listener's socket was bound to (sock_diag, by the listener's own
 * descriptor): what sits at the path afterwards (another process's socket, put there between bind
 * and a look at the path) cannot pass for the daemon's. Without the addon, or a kernel that
 * answers sock_diag, the path is looked at right after the bind, and `weakness` says so.
 */
export function listenerIdentity(load: { addon: PeerCredentialsAddon | null; reason?: string } = loadPeerAddon()): ListenerIdentity {
  const { addon } = load
  if (addon === null) return { of: (_listener, path) => pathIdentity(path), weakness: load.reason }
  const identity: { -readonly [K in keyof ListenerIdentity]: ListenerIdentity[K] } = {
    of(listener, path) {
      const fd = descriptorOf(listener)
      if (fd === null || identity.weakness !== undefined) return pathIdentity(path)
      try {
        return addon.boundPath(fd)
      } catch (error) {
        identity.weakness = `the kernel did not say which file the socket was bound to (${(error as Error).message})`
        return pathIdentity(path)
      }
    },
  }
  return identity
}

/** Whether the socket file at path (lstat, never followed) is the one identified. */
export function isSocketAt(path: string, identity: SocketIdentity | null): boolean {
  const now = pathIdentity(path)
  return now !== null && identity !== null && now.dev === identity.dev && now.ino === identity.ino
}

/** The (dev, ino) of a socket file at path; null when nothing, or no socket, is there. */
function pathIdentity(path: string): SocketIdentity | null {
  try {
    const info = lstatSync(path)
    return info.isSocket() ? { dev: info.dev, ino: info.ino >>> 0 } : null
  } catch {
    return null
  }
}

/** The listening descriptor libuv holds for a net.Server (Node keeps it on the server's handle). */
function descriptorOf(listener: NetServer): number | null {
  const fd = (listener as unknown as { _handle?: { fd?: unknown } | null })._handle?.fd
  return typeof fd === 'number' && fd >= 0 ? fd : null
}
