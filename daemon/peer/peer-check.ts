import { CHECKED_NAMESPACES, loadPeerAddon, type AddonLoad, type NamespaceName, type PeerInspection, type VisibleFacts } from './peer-addon.js'

/** What `GET /v1/status` reports as `peerCheck`. */
export interface PeerCheckStatus {
  /** Connections from processes in other user, pid or mount namespaces are refused. */
  enforced: boolean
  /** Why the check is off, or what weakens it (no SO_PEERPIDFD in this kernel). */
  reason?: string
}

export type PeerVerdict =
  /** `uid` is absent when the check is off (nothing was asked of the kernel). */
  | { allowed: true; pid: number; uid?: number }
  /** `detail` completes TEND_ERR_SANDBOXED_CALLER's message: "pid 42 in another user/pid/mount namespace". */
  | { allowed: false; pid: number; uid: number | null; detail: string }

export interface PeerCheck {
  readonly status: PeerCheckStatus
  /** The verdict on a connected unix socket's peer. Never throws: anything unreadable is a refusal. */
  check(fd: number): PeerVerdict
}

/** The daemon's own side of the comparison, read once. */
export interface OwnIdentity {
  namespaces: Record<NamespaceName, string>
  /** Null when /proc/self could not give them: a caller whose namespaces are closed is then refused. */
  visible: VisibleFacts | null
}

/** How namespaces are named in messages ("mnt" is "mount" there). */
const NAMESPACE_WORDS: Record<NamespaceName, string> = { user: 'user', pid: 'pid', mnt: 'mount' }

/** Which visible fact stands for which namespace. */
const VISIBLE_FACT: Record<NamespaceName, keyof VisibleFacts> = { user: 'uidMap', pid: 'pidDepth', mnt: 'mountId' }

const UNCHECKED = (): PeerVerdict => ({ allowed: true, pid: 0 })

/**
 * The check on callers of the daemon's socket: the caller must live in the daemon's own user, pid
 * and mount namespaces, as the kernel says (SO_PEERCRED, the pid pinned by a pidfd), never as the
 * caller says. A bubblewrap sandbox, this daemon's or another's, has its own of each. Without the
 * addon (or /proc) the check is off, and its status says why.
 */
export function createPeerCheck(load: AddonLoad = loadPeerAddon()): PeerCheck {
  if (load.addon === null) return { status: { enforced: false, reason: load.reason }, check: UNCHECKED }
  const { addon } = load
  let own: OwnIdentity
  try {
    own = { namespaces: addon.ownNamespaces(), visible: readOrNull(() => addon.ownVisible()) }
  } catch (error) {
    const reason = `the daemon cannot read its own namespaces (${(error as Error).message}), so it cannot compare a caller's`
    return { status: { enforced: false, reason }, check: UNCHECKED }
  }
  const status: PeerCheckStatus = addon.peerPidfdSupported()
    ? { enforced: true }
    : {
        enforced: true,
        reason:
          'this kernel has no SO_PEERPIDFD (Linux 6.5+): a caller is pinned by pidfd_open(pid) after it connected, so a pid reused in between goes unnoticed',
      }
  return {
    status,
    check(fd) {
      let inspection: PeerInspection
      try {
        inspection = addon.inspect(fd)
      } catch (error) {
        return { allowed: false, pid: 0, uid: null, detail: `its credentials could not be read: ${(error as Error).message}` }
      }
      return decidePeer(own, inspection)
    },
  }
}

/**
 * The pure decision: allowed only for a live, known pid whose namespaces all equal the daemon's.
 * Where the daemon may not read a caller's namespaces (a more privileged caller), the facts every
 * process may read stand in: pid-namespace depth, first mount id, uid_map.
 */
export function decidePeer(own: OwnIdentity, peer: PeerInspection): PeerVerdict {
  const refuse = (detail: string): PeerVerdict => ({ allowed: false, pid: peer.pid, uid: peer.uid, detail })
  const unchecked = (why: string) => refuse(`pid ${peer.pid} could not be checked, so it counts as sandboxed: ${why}`)
  if (peer.pid <= 0) return refuse("pid 0: the caller's process is not visible from the daemon's pid namespace")
  if (peer.unreadable !== null) return unchecked(peer.unreadable)
  if (peer.namespaces === null) return unchecked('its namespaces are unknown')
  const differing = new Set<NamespaceName>()
  for (const name of CHECKED_NAMESPACES) {
    const identity = peer.namespaces[name]
    if (identity !== null && identity !== own.namespaces[name]) differing.add(name)
  }
  if (CHECKED_NAMESPACES.some((name) => peer.namespaces![name] === null)) {
    if (peer.visible === null || own.visible === null) return unchecked('its namespaces are closed to the daemon')
    for (const name of CHECKED_NAMESPACES) {
      const fact = VISIBLE_FACT[name]
      if (peer.visible[fact] !== own.visible[fact]) differing.add(name)
    }
  }
  if (differing.size > 0) {
    const names = CHECKED_NAMESPACES.filter((name) => differing.has(name)).map((name) => NAMESPACE_WORDS[name])
    return refuse(`pid ${peer.pid} in another ${names.join('/')} namespace`)
  }
  if (!peer.alive) return refuse(`pid ${peer.pid} exited before it could be checked, so it counts as sandboxed`)
  return { allowed: true, pid: peer.pid, uid: peer.uid }
}

function readOrNull<T>(read: () => T): T | null {
  try {
    return read()
  } catch {
    return null
  }
}
