import { lstatSync, statSync, unlinkSync, type Stats } from 'node:fs'
import { createServer as createNetServer, type Server as NetServer } from 'node:net'
import type { Server } from 'node:http'
import type { Logger } from 'pino'
import { displaceSync } from '../../protocol/home-file.js'
import { isSocketAt, listenerIdentity, type ListenerIdentity, type SocketIdentity } from './socket-identity.js'

/** How often the daemon looks whether its socket is still its own, in milliseconds. */
export const SOCKET_CHECK_MS = 1000

/**
 * Makes the socket's path free for the daemon to bind, which holds the instance lock (so no live
 * daemon of this home uses it): an old socket is removed; anything else there (a folder, a FIFO, a
 * link a task made) is moved aside as `tend.sock.<random>.displaced`, never followed or emptied.
 */
export function clearSocketPath(path: string): void {
  let info: Stats
  try {
    info = lstatSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw error
  }
  if (info.isSocket()) unlinkSync(path)
  else displaceSync(path)
}

/**
 * Keeps the daemon reachable at its socket's path. A process of the daemon's uid (an `off` task)
 * can remove the socket, or put a folder or its own socket there: clients would then find no
 * daemon, or another program, while this one runs on. Every SOCKET_CHECK_MS the path is compared
 * (dev, ino) with the socket the daemon bound, as the kernel says it bound it (never as the path
 * looked just after: that can already be another process's socket); when it differs, whatever is
 * there is moved aside and the path bound again, its connections served by the same HTTP server
 * (and its peer check).
 */
export class SocketWatch {
  private identity: SocketIdentity | null
  /** The listener the last bind made (the HTTP server's own first listener is left to it: closing that would end its idle connections). */
  private current: NetServer | null = null
  private readonly timer: NodeJS.Timeout
  /** The lock file this daemon holds locked now (dev, ino of its descriptor). */
  private held: { dev: number; ino: number }
  /** Its home folder is not at its path (moved aside): said once, until it is back. */
  private away = false

  constructor(
    private readonly path: string,
    private readonly server: Server,
    private readonly log: Logger,
    private readonly lock: HomeLock,
    private readonly identify: ListenerIdentity = listenerIdentity(),
  ) {
    this.identity = identify.of(server, path)
    this.held = { dev: lock.dev, ino: lock.ino }
    if (identify.weakness)
      log.warn(
        { socket: path, reason: identify.weakness },
        'the daemon socket is identified by its path after each bind: a process that replaces it in between goes unnoticed',
      )
    this.timer = setInterval(() => this.check(), SOCKET_CHECK_MS)
    this.timer.unref()
  }

  /** Binds the path again if it is not the daemon's socket any more. */
  check(): void {
    if (!this.stillHome()) return
    if (isSocketAt(this.path, this.identity)) return
    try {
      clearSocketPath(this.path)
      this.closeCurrent()
      this.bind()
    } catch (error) {
      this.log.error({ err: error, socket: this.path }, 'the daemon socket is gone and could not be bound again; trying again')
    }
  }

  /**
   * Whether this daemon is still its home's, looked at every SOCKET_CHECK_MS: whether the folder at
   * the home's path is the one it holds locked (instance-lock.ts). Not while the home is moved
   * aside (maybe a new one made at its name, with its own daemon): the path is not this daemon's
   * to take back then (binding it would fight that daemon for it every second), and it serves on
   * the listener it has, reached at its home's new name, until its home is back. A lock file a
   * process of the daemon's uid removed or replaced is locked again at its name, for daemons and
   * clients of versions that look only at it (the folder's lock keeps a new daemon out either way).
   */
  private stillHome(): boolean {
    if (!isFolderAt(this.lock.home.path, this.lock.home)) {
      if (!this.away)
        this.log.warn(
          { socket: this.path, home: this.lock.home.path },
          'its home was moved: the daemon no longer binds the socket at its old path while another folder (or none) is there, and serves on the one it has',
        )
      this.away = true
      return false
    }
    if (this.away) this.log.warn({ socket: this.path, home: this.lock.home.path }, 'its home is back at its path: the daemon watches its socket there again')
    this.away = false
    if (!isFileAt(this.lock.path, this.held)) {
      const retaken = this.lock.retake()
      if (retaken) {
        this.held = retaken
        this.log.warn({ lock: this.lock.path }, 'the lock file was removed or replaced: the daemon locked the one at its name again')
      }
    }
    return true
  }

  private bind(): void {
    const listener = createNetServer((socket) => this.server.emit('connection', socket))
    listener.on('error', (error) => {
      this.log.error({ err: error, socket: this.path }, 'the daemon socket could not be bound again')
      listener.close()
    })
    // A pipe binds within listen(): the mask covers exactly the socket's creation, and makes it
    // 0600 from the start (a chmod by path afterwards could reach another process's file).
    const previousMask = process.umask(0o177)
    try {
      listener.listen(this.path)
    } finally {
      process.umask(previousMask)
    }
    listener.once('listening', () => {
      this.identity = this.identify.of(listener, this.path)
      this.current = listener
      this.log.warn({ socket: this.path }, 'the daemon socket was removed or replaced: bound again')
    })
  }

  /**
   * Closes the last bind's listener, superseded: nobody can reach it any more. Only once its path
   * is free: closing a Unix socket's listener unlinks whatever is at its path then (libuv does).
   */
  private closeCurrent(): void {
    this.current?.close()
    this.current = null
  }

  /** Stops watching and listening, and removes the socket if the path still is the daemon's. */
  close(): void {
    clearInterval(this.timer)
    this.closeCurrent()
    if (isSocketAt(this.path, this.identity)) {
      try {
        unlinkSync(this.path)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      }
    }
  }
}

/** The home's instance lock as the daemon took it, and how it takes it again at the same name. */
export interface HomeLock {
  path: string
  dev: number
  ino: number
  /** The home folder the lock was taken in (stat: a home named through a link is that link's folder). */
  home: { path: string; dev: number; ino: number }
  /**
   * Locks the file at `path` again (made anew if gone): its identity, or null when another process
   * holds it (that process cannot start a daemon here: the folder's lock is held).
   */
  retake(): { dev: number; ino: number } | null
}

/** Whether the file at path (lstat, never followed) is the one identified. */
function isFileAt(path: string, identity: { dev: number; ino: number }): boolean {
  let info: Stats
  try {
    info = lstatSync(path)
  } catch {
    return false
  }
  return info.dev === identity.dev && info.ino === identity.ino
}

/** Whether the folder at path (followed, as the daemon's home was) is the one identified. */
function isFolderAt(path: string, identity: { dev: number; ino: number }): boolean {
  try {
    const info = statSync(path)
    return info.isDirectory() && info.dev === identity.dev && info.ino === identity.ino
  } catch {
    return false
  }
}
