import { ADDON_PATH, loadAddon } from '../native/load-addon.js'

/** The namespaces the check compares: a bubblewrap sandbox has its own of each. */
export const CHECKED_NAMESPACES = ['user', 'pid', 'mnt'] as const
export type NamespaceName = (typeof CHECKED_NAMESPACES)[number]

/** Each namespace's identity as `st_dev:st_ino` of /proc/<pid>/ns/<name>; null where it could not be read. */
export type Namespaces = Record<NamespaceName, string | null>

/**
 * What any process may read about another, for when /proc/<pid>/ns is closed to the daemon (it is
 * not root and the caller is): each stands for one namespace.
 */
export interface VisibleFacts {
  /** pid: how many pid namespaces deep the process is (the entries of NSpid in /proc/<pid>/status). */
  pidDepth: number
  /** mnt: the id of the first mount in /proc/<pid>/mountinfo (a new mount namespace renumbers every mount). */
  mountId: number
  /** user: /proc/<pid>/uid_map as the daemon reads it. */
  uidMap: string
}

/** What the kernel recorded about a unix socket's peer at connect(). */
export interface PeerInspection {
  /** 0 when the peer's pid does not exist in the daemon's pid namespace (e.g. an outer one). */
  pid: number
  uid: number
  gid: number
  /** Null when the pid is 0 or the peer was gone before its namespaces were read. */
  namespaces: Namespaces | null
  /** Read only when its namespaces were closed to the daemon (EACCES), else null. */
  visible: VisibleFacts | null
  /** How the process was held while its namespaces were read: SO_PEERPIDFD is race-free. */
  pinning: 'SO_PEERPIDFD' | 'pidfd_open' | 'none'
  /** The same process still existed after its namespaces were read. */
  alive: boolean
  /** The first thing that could not be read, with its errno text. */
  unreadable: string | null
}

/** The C addon (daemon/peer/peer-credentials.c). Every function is synchronous and takes microseconds. */
export interface PeerCredentialsAddon {
  /** Credentials and namespaces of the peer; throws when SO_PEERCRED fails. */
  inspect(fd: number): PeerInspection
  /** The daemon's own namespaces; throws when /proc/self/ns cannot be read. */
  ownNamespaces(): Record<NamespaceName, string>
  /** The daemon's own visible facts; throws when /proc/self cannot be read. */
  ownVisible(): VisibleFacts
  /** Whether this kernel has SO_PEERPIDFD (Linux 6.5+). */
  peerPidfdSupported(): boolean
  /**
   * Which inode a listening unix socket's path was made as (sock_diag), whatever is at the path
   * now; null for a socket without a path. Throws when the kernel cannot be asked.
   */
  boundPath(fd: number): { dev: number; ino: number } | null
}

export type AddonLoad = { addon: PeerCredentialsAddon; reason?: undefined } | { addon: null; reason: string }

/** Loads the addon; a missing or broken build is a reason, not a throw (the daemon runs without the check). */
export function loadPeerAddon(path: string = ADDON_PATH): AddonLoad {
  if (process.platform !== 'linux') return { addon: null, reason: `peer credentials need Linux, this is ${process.platform}` }
  return loadAddon<PeerCredentialsAddon>('peerCredentials', 'peer-credentials', ['inspect', 'ownNamespaces', 'boundPath'], path)
}
