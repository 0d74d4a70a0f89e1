/**
 * How the daemon starts a task's process. Two implementations: the native spawner (a small C
 * helper process that forks from a tiny address space, see daemon/spawner/) and the Node spawner
 * (child_process behind a shell prelude), used where the helper could not be built.
 */

import type { TaskUsage } from '../../protocol/index.js'

export interface SpawnRequest {
  /** The program: a path (absolute, or relative to cwd), or a bare name searched on env.PATH. */
  file: string
  /** The whole argv, argv[0] included. */
  argv: string[]
  /** The complete environment (nothing is inherited). */
  env: Record<string, string>
  cwd: string
  /** Opened append-only (created 0600 if missing) as the child's stdout and stderr. */
  outputFile: string
  /**
   * The task's stdin: a FIFO at this absolute path (`<spool>/<id>/input.fifo`), made (0600) and held
   * open for reading and writing by the task's keeper until the task ends or the keeper gets
   * SIGUSR1 (end of input), opened read-only as the child's fd 0. Native spawner only (the node
   * spawner refuses it at stage `stdin`). Default: stdin from /dev/null.
   */
  stdinFifo?: string
  /**
   * Run the task on a pseudo-terminal of this size (needs stdinFifo; native spawner only, the node
   * spawner refuses it at stage `tty`). The keeper holds the terminal: the task gets its other side
   * as stdin, stdout, stderr and controlling terminal; the keeper copies what it shows, raw, into
   * outputFile (the file gets the file size limit), types what arrives in stdinFifo into it, and
   * applies the "<cols> <rows>\n" lines written into resizeFifo (a FIFO it makes and holds like
   * stdinFifo). The exit is reported once the terminal is drained, so outputFile is whole by then.
   */
  terminal?: { resizeFifo: string; cols: number; rows: number }
  /**
   * End the task when the daemon ends, however it ends (SIGKILL included), within milliseconds,
   * instead of leaving it to its keeper for the next daemon: its keeper watches the spawner's helper
   * (which dies with the daemon) and, once it is gone, SIGKILLs the task with everything it started
   * and records `"endedBy":"lifeline"` in the exit file (PROTOCOL.md). For tasks that must never run on unwatched (one
   * that may be run again elsewhere, under a fence: keeper-lease.ts). Native spawner only (the node spawner refuses it at stage
   * `lifeline`). Default: false.
   */
  endsWithDaemon?: boolean
  /**
   * Where the task's keeper writes how the task ended (`<spool>/<id>/exit.json`), so that a later
   * daemon learns it even when no spawner was left to hear it: an absolute path whose folder exists
   * (see readExitFile, daemon/spawn/exit-file.ts). Written atomically (an unnamed temporary file in
   * that folder, linked in as the exit file; 0600) once the task has ended, before the spawner is
   * told, so it is there when `exited` settles (unless that write failed: a full disk; the keeper
   * then retries for about a minute and exits only once it is written or given up); fsynced, and
   * its folder, when no spawner heard the exit. Never written when the task did not start. '' for
   * none (the exit is then known only to a listening spawner). The node spawner has no keeper and
   * ignores it.
   */
  exitFile: string
  /** Files opened read-only as the child's fd 3, 4, … (the seccomp program). */
  extraFiles: string[]
  /**
   * The cgroup folders the child joins before it execs, each as the daemon made it: the folder is
   * opened without following a symbolic link and must still be that directory (device, inode) with
   * that owner (uid), or the spawn fails at stage `cgroup` (ESTALE); then the child writes itself
   * into the group's v1 `tasks` file, opened from the folder's descriptor (the native child writes
   * 0, itself; the node prelude its pid, to a descriptor the daemon opened the same way).
   */
  cgroups: CgroupJoin[]
  /** Resource limits set (soft and hard) in the child; core dumps are always off. */
  limits: { openFiles: number; fileSizeBytes: number }
  /**
   * Contents handed to the child as read-only descriptors, in order after the extra files (see
   * descriptorLayout), each readable from its start to its end whatever its size. Never written to
   * disk: they carry secrets (bubblewrap's `--args FD`). Default: none.
   */
  dataFiles?: Buffer[]
  /**
   * Folders pinned when the task was accepted, opened O_PATH in the child on the descriptors after
   * the data files. Each must still resolve without any symbolic link and be the same directory
   * (device and inode), or the spawn fails at stage `pinned`. One with an `owner` (which it must
   * still have) is idmapped onto `user`, which must be set (native spawner only): its descriptor
   * names an idmapped mount of it, private to the child, in which that owner's files show as
   * `user`'s and what `user` creates belongs to the owner on disk; one the kernel or its file system
   * cannot idmap fails the spawn at stage `idmap` (daemon/spawner/idmap.c). Default: none.
   */
  pinnedDirs?: PinnedDir[]
  /**
   * Folders the child shows `user` read-only through an idmapped mount (as for a pinned folder with
   * an owner, which each must have), in its own mount namespace, on no descriptor: e.g. the
   * daemon's HOME, whose owner-only files (~/.gitconfig) the task may read. A failure reads as a
   * pinned folder's, with the index counted on after the pinned folders. Default: none.
   */
  idmappedViews?: PinnedDir[]
  /**
   * Places hidden from the child (absolute real paths: tend homes, secret paths): once its pinned
   * folders and views are mounted, the child, still root and in a mount namespace of its own, opens
   * each without following any symbolic link and mounts over what it opened an empty read-only
   * tmpfs (a folder) or a read-only bind of /dev/null (anything else), read-only, nosuid, nodev and
   * noexec; a path that is gone, holds a link (on its way or at its end) or that root may not enter
   * is skipped, never followed (daemon/spawner/hidden.c). Any other failure is stage `hidden`.
   * Only where Spawner.hidesPaths (the native spawner of a root daemon; the node spawner refuses it
   * at stage `hidden`). Default: none.
   */
  hiddenPaths?: string[]
  /**
   * Files the task sees with other contents (its account in /etc/passwd and /etc/group): after the
   * hidden places, the child opens each path as it opens those, and mounts over a regular file a
   * read-only file of its own (a tmpfs made for it) that holds `data`. A path that is gone or holds a
   * link is skipped; one replaced after the open keeps the cover on what was opened (the task then
   * reads the new file): a task never fails because a file was replaced as it started. Any other
   * failure is stage `hidden`, its index counted on after hiddenPaths. Only where
   * Spawner.hidesPaths, as hiddenPaths. Default: none.
   */
  coveredFiles?: Array<{ path: string; data: Buffer }>
  /**
   * The device and inode cwd had when the task was accepted: after the chdir, `.` must still be
   * that directory, or the spawn fails at stage `chdir` with ESTALE. Default: not checked.
   */
  cwdIdentity?: FileIdentity
  /**
   * The network namespace the child joins (its owner's private one, daemon/network/): opened by
   * path, it must be that very namespace (device and inode), or the spawn fails at stage `netns`
   * (ESTALE). The user namespace that owns it is joined first when it is not the spawner's (an
   * unprivileged daemon's namespaces). Joined after the cwd and before the keyring and the user.
   * Default: the spawner's own network.
   */
  netns?: FileIdentity & { path: string; userns?: FileIdentity & { path: string } }
  /**
   * The program says when its own setup is done, before it execs the task's command (bubblewrap,
   * through a shell in the sandbox: plan.ts): it gets the output file as fd 1 and, as fd 2, a pipe
   * to the spawner (the keeper's setup channel, for the native one), on which it writes SETUP_DONE
   * once set up, then points fd 2 at fd 1 as it execs the command. Until then nothing of the task
   * has run: what it writes there instead, and its end without SETUP_DONE, is a failure at stage
   * `setup` (the output file untouched: setupFailure), which the daemon may plan again and retry.
   * Only where Spawner.reportsSetup. Default: false.
   */
  reportsSetup?: boolean
  /**
   * With reportsSetup: how long the setup may take before the program is killed with its process
   * group and the spawn fails at stage `setup` with ETIMEDOUT (a bind over a file system that never
   * answers would otherwise hold the task's start, and every kill of it, for ever). 1 to
   * MAX_SETUP_WAIT_MS. Default: DEFAULT_SETUP_WAIT_MS.
   */
  setupWaitMs?: number
  /**
   * Run the child as this user, with no supplementary groups (and so, from root, no capabilities):
   * dropped after every descriptor is open and every cgroup joined, right before the exec; a
   * failure is stage `user`. Default: the daemon's own user.
   */
  user?: { uid: number; gid: number }
}

/** A file's identity as `statSync(path, { bigint: true })` gives it, in decimal. */
export interface FileIdentity {
  dev: string
  ino: string
}

/** A directory pinned by identity; `path` is a real path (no symbolic link in any component). */
export interface PinnedDir extends FileIdentity {
  path: string
  /**
   * Its owner's uid as pinned, and the group mapped with it (the owner's primary group: task-identity.ts,
   * idmapOwner): the folder is then idmapped so that these show as the request's user and group.
   */
  owner?: { uid: number; gid: number }
}

/** A cgroup folder as TaskCgroups made it: its real path, identity and owner. */
export interface CgroupJoin extends FileIdentity {
  path: string
  uid: number
}

/** The child's descriptor numbers: 0 stdin, 1 and 2 the output file, then these, in this order. */
export interface DescriptorLayout {
  extra: number[]
  data: number[]
  pinned: number[]
}

/** Where each extra file, data file and pinned folder lands in the child (callers build bubblewrap's fd arguments from it). */
export function descriptorLayout(request: Pick<SpawnRequest, 'extraFiles' | 'dataFiles' | 'pinnedDirs'>): DescriptorLayout {
  let next = 3
  const take = (count: number) => Array.from({ length: count }, () => next++)
  const extra = take(request.extraFiles.length)
  const data = take(request.dataFiles?.length ?? 0)
  const pinned = take(request.pinnedDirs?.length ?? 0)
  return { extra, data, pinned }
}

/**
 * What is wrong with the cgroups and the optional fields of a request (dataFiles, pinnedDirs,
 * idmappedViews, hiddenPaths, cwdIdentity, endsWithDaemon, user), or null.
 */
export function spawnRequestProblem(request: SpawnRequest): string | null {
  if (request.setupWaitMs !== undefined) {
    if (!request.reportsSetup) return 'setupWaitMs is given without reportsSetup'
    if (!Number.isSafeInteger(request.setupWaitMs) || request.setupWaitMs < 1 || request.setupWaitMs > MAX_SETUP_WAIT_MS)
      return `setupWaitMs must be a whole number of milliseconds from 1 to ${MAX_SETUP_WAIT_MS}, got ${request.setupWaitMs}`
  }
  for (const [index, data] of (request.dataFiles ?? []).entries()) {
    if (!Buffer.isBuffer(data)) return `dataFiles[${index}] is not a Buffer`
  }
  for (const [field, folders] of [
    ['pinnedDirs', request.pinnedDirs ?? []],
    ['idmappedViews', request.idmappedViews ?? []],
  ] as const) {
    for (const [index, pinned] of folders.entries()) {
      const problem = folderProblem(`${field}[${index}]`, pinned) ?? (pinned.owner ? idsProblem(`${field}[${index}].owner`, pinned.owner) : null)
      if (problem) return problem
      if (field === 'idmappedViews' && !pinned.owner) return `${field}[${index}].owner is missing: a view is always idmapped`
      // The mapping is onto the request's user: without one there is none to map to.
      if (pinned.owner && !request.user) return `${field}[${index}] is idmapped to its owner, but the request has no user to map to`
    }
  }
  for (const [index, path] of (request.hiddenPaths ?? []).entries()) {
    if (typeof path !== 'string' || !path.startsWith('/')) return `hiddenPaths[${index}] must be an absolute path, got ${JSON.stringify(path)}`
    if (path.includes('\0')) return `hiddenPaths[${index}] contains a NUL byte`
  }
  for (const [index, cover] of (request.coveredFiles ?? []).entries()) {
    if (typeof cover.path !== 'string' || !cover.path.startsWith('/'))
      return `coveredFiles[${index}].path must be an absolute path, got ${JSON.stringify(cover.path)}`
    if (cover.path.includes('\0')) return `coveredFiles[${index}].path contains a NUL byte`
    if (!Buffer.isBuffer(cover.data)) return `coveredFiles[${index}].data is not a Buffer`
  }
  if ((request.coveredFiles?.length ?? 0) > 64) return `too many covered files: ${request.coveredFiles!.length} (at most 64)`
  for (const [index, group] of (request.cgroups ?? []).entries()) {
    const problem = folderProblem(`cgroups[${index}]`, group) ?? idsProblem(`cgroups[${index}]`, { uid: group.uid })
    if (problem) return problem
  }
  if (request.cwdIdentity) {
    const problem = identityProblem('cwdIdentity', request.cwdIdentity)
    if (problem) return problem
  }
  if (request.netns) {
    if (typeof request.netns.path !== 'string' || !request.netns.path.startsWith('/') || request.netns.path.includes('\0'))
      return `netns.path must be an absolute path, got ${JSON.stringify(request.netns.path)}`
    const problem = identityProblem('netns', request.netns) ?? (request.netns.userns ? identityProblem('netns.userns', request.netns.userns) : null)
    if (problem) return problem
    if (
      request.netns.userns &&
      (typeof request.netns.userns.path !== 'string' || !request.netns.userns.path.startsWith('/') || request.netns.userns.path.includes('\0'))
    )
      return `netns.userns.path must be an absolute path, got ${JSON.stringify(request.netns.userns.path)}`
  }
  if (request.endsWithDaemon !== undefined && typeof request.endsWithDaemon !== 'boolean')
    return `endsWithDaemon must be a boolean, got ${typeof request.endsWithDaemon}`
  if (request.user) return idsProblem('user', request.user)
  return null
}

function folderProblem(field: string, folder: { path: string } & FileIdentity): string | null {
  if (typeof folder.path !== 'string' || !folder.path.startsWith('/') || folder.path.includes('\0'))
    return `${field}.path must be an absolute path, got ${JSON.stringify(folder.path)}`
  return identityProblem(field, folder)
}

function idsProblem(field: string, ids: { uid?: number; gid?: number }): string | null {
  for (const key of ['uid', 'gid'] as const) {
    if (!(key in ids)) continue
    const id = ids[key]
    // (uid_t)-1 means "unchanged" to the kernel: never a user to run as.
    if (!Number.isSafeInteger(id) || id! < 0 || id! >= 0xffffffff) return `${field}.${key} must be an integer from 0 to 4294967294, got ${id}`
  }
  return null
}

function identityProblem(field: string, identity: FileIdentity): string | null {
  for (const key of ['dev', 'ino'] as const) {
    const value = identity[key]
    if (typeof value !== 'string' || !/^\d{1,20}$/.test(value) || BigInt(value) > 0xffffffffffffffffn)
      return `${field}.${key} must be a decimal string (a 64-bit unsigned number), got ${JSON.stringify(value)}`
  }
  return null
}

// Failure messages both spawners give, so that a task reads the same whichever started it.

/** A pinned folder that could not be opened as it was (code: ESTALE for another directory, else the errno). */
export function pinnedDirFailure(path: string, code: string): string {
  const changed = `folder changed since the task was accepted: ${path}`
  switch (code) {
    case 'ESTALE':
      return `${changed} (it is no longer the same directory)`
    case 'ELOOP':
      return `${changed} (a symbolic link is now in its path)`
    case 'ENOENT':
      return `${changed} (it no longer exists)`
    case 'ENOTDIR':
      return `${changed} (it, or a folder above it, is no longer a directory)`
    default:
      return `could not open the folder the task was accepted with: ${path} (${code})`
  }
}

export function cwdChangedFailure(cwd: string): string {
  return `cwd changed since the task was accepted: ${cwd} (it is no longer the same directory)`
}

export function userFailure(user: { uid: number; gid: number }, reason: string): string {
  return `could not run the task as uid ${user.uid} gid ${user.gid}: ${reason}`
}

/** A cgroup folder that could not be joined (code: ESTALE for another folder, or another owner). */
export function cgroupFailure(path: string, code: string): string {
  if (code === 'ESTALE')
    return `could not join cgroup ${path}: it is no longer the folder the daemon made (another folder, or another owner, is at its path) (ESTALE)`
  if (code === 'ELOOP') return `could not join cgroup ${path}: a symbolic link is in its path (ELOOP)`
  return `could not join cgroup ${path}: ${code}`
}

/** A folder the child could not idmap (index undefined: its mount namespace). */
export function idmapFailure(path: string | undefined, code: string): string {
  if (path === undefined) return `could not give the task a mount namespace of its own for its idmapped folders: ${code}`
  const why =
    code === 'EINVAL'
      ? ' (its file system, or one mounted inside it, does not support idmapped mounts)'
      : code === 'ENOSYS'
        ? ' (this kernel has no idmapped mounts: Linux 5.12 or later is needed)'
        : ''
  return `could not idmap ${path} for the task's user: ${code}${why}`
}

/** A place the child could not hide (index undefined: its mount namespace). */
export function hiddenFailure(path: string | undefined, code: string): string {
  if (path === undefined) return `could not give the task a mount namespace of its own to hide places in: ${code}`
  return `could not hide ${path} from the task: ${code}`
}

export function keyringFailure(code: string): string {
  // Every task's keyring counts against its daemon user's key quota (root's is a million keys).
  const why =
    code === 'EDQUOT'
      ? ": the daemon's user has used up its kernel key quota (sysctl kernel.keys.maxkeys and " +
        'kernel.keys.maxbytes; one key per running task): raise them, or run fewer tasks at once'
      : ''
  return `could not give the task a session keyring of its own: ${code}${why}`
}

export function dataFileFailure(index: number, code: string): string {
  return `could not hand the task its in-memory file ${index}: ${code}`
}

export interface SpawnExit {
  /** Exit code, or null when a signal ended it (or when the ending is unknown). */
  exitCode: number | null
  signal: NodeJS.Signals | null
  /**
   * Set when nobody knows how the task ended (exitCode and signal are then null): its keeper was
   * killed (SIGKILL) before it could record the exit, or its exit file is missing or invalid. The
   * daemon records such a task `lost`.
   */
  unknown?: true
  /**
   * Set when the task was ended by its keeper because the spawner's helper was gone (a task started
   * with endsWithDaemon): the helper died, or the daemon with it.
   */
  lifelineBroke?: true
  /**
   * Set when the task was ended by its keeper because the lease the daemon keeps writing into the
   * task's folder (`lease`, daemon/spawn/keeper-lease.ts) ran out: the daemon stopped renewing it
   * (frozen, or too slow) while its helper still ran.
   */
  leaseRanOut?: true
  /** Bytes of a terminal task's output that its keeper could not write into output.log (the disk refused them). */
  outputLostBytes?: number
  /** What the task used, as its keeper counted it (its exit file); absent when no keeper counted (node spawner, older keepers). */
  usage?: KeeperUsage
}

/** A keeper's account of what its task used: the rusage of every process it reaped (protocol/usage.ts's figures without `source`). */
export type KeeperUsage = Omit<TaskUsage, 'source'>

/**
 * The process that is a task's parent instead of the spawner (native spawner only): it outlives the
 * spawner and the daemon, records the task's exit in its exit file, and can be attached to by a
 * later spawner. startTicks is field 22 of /proc/<pid>/stat (start time in clock ticks after boot):
 * with the pid, it names the keeper without mistaking a later process that got the same pid.
 */
export interface KeeperRef {
  pid: number
  startTicks: number
}

export interface AttachRequest {
  keeper: KeeperRef
  /** The task's pid, as `started` gave it (its exit file must name it). */
  taskPid: number
  /** The task's exit file, as it was given to spawn() (absolute). */
  exitFile: string
}

export type AttachOutcome =
  /** The keeper is watched; `exited` settles when it has exited (unknown when it left no exit file). */
  | { attached: true; exited: Promise<SpawnExit> }
  /**
   * ESRCH: no such keeper (gone, or its pid belongs to another process now): the exit file, if any,
   * says how the task ended (readExitFile). ENOTSUP: this spawner has no keepers (node). EINVAL:
   * a bad request. ESPAWNER: the helper died or was closed. Otherwise the errno of pidfd_open.
   */
  | { attached: false; code: string; message: string }

export type SpawnOutcome =
  /** keeper: null when the spawner has none (node): the task's exit is then lost with the daemon. */
  | { started: true; pid: number; keeper: KeeperRef | null; exited: Promise<SpawnExit> }
  /**
   * Nothing is left running. `stage` says which step failed: request, output, stdin, tty, lifeline,
   * extra, data, pinned, idmap, hidden, cgroup, limits, setsid, chdir, user, keyring, exec, setup,
   * fork, spawner.
   */
  | { started: false; stage: string; code: string; message: string }

export interface Spawner {
  readonly kind: 'native' | 'node'
  /**
   * Whether spawn() takes hiddenPaths: only a child that is still root, and may make a mount
   * namespace, can mount over them (the native spawner of a root daemon, once proved: NativeSpawner.checkHiding).
   */
  readonly hidesPaths: boolean
  /**
   * Whether the daemon asks for reportsSetup: wherever bubblewrap mounts masks by path (every spawner
   * but the one that hides them by descriptor), so that a place that changed as the task started
   * fails bubblewrap's setup, told apart from the task's own failure, and the task is planned again.
   */
  readonly reportsSetup: boolean
  /** Starts the child in a new session (its own process group). Never throws for a child that fails to start. */
  spawn(request: SpawnRequest): Promise<SpawnOutcome>
  /**
   * Watches a keeper this spawner did not start (one of an earlier daemon's tasks). Never throws.
   * A keeper whose exit file is already there is reported at once.
   */
  attach(request: AttachRequest): Promise<AttachOutcome>
  /** Stops the helper (if any); running children (and their keepers) are not touched. */
  close(): Promise<void>
  /** Checks that a helper between the daemon and the keepers still answers, and replaces one that does not (absent: there is none). */
  prod?(): void
}

/** The line a program that reportsSetup writes once set up, right before it execs the task's command. */
export const SETUP_DONE = 'tend: set up'

/** How long a setup may take (SpawnRequest.setupWaitMs) unless the daemon's setting says otherwise. */
export const DEFAULT_SETUP_WAIT_MS = 30_000
/** The longest setupWaitMs the native spawner takes (MAX_SETUP_WAIT_MS in spawner.h). */
export const MAX_SETUP_WAIT_MS = 3_600_000

/** How long the spawner waits for this request's setup (it reportsSetup). */
export function setupWaitOf(request: SpawnRequest): number {
  return request.setupWaitMs ?? DEFAULT_SETUP_WAIT_MS
}

/**
 * A program that reportsSetup did not say SETUP_DONE: it ended first, how, or (timedOutMs) it was
 * still setting up after that long and was killed; and the last of what it said.
 */
export function setupFailure(file: string, exit: SpawnExit, said: string, timedOutMs?: number): SpawnOutcome {
  const words = said ? `: ${said}` : ''
  if (timedOutMs !== undefined)
    return { started: false, stage: 'setup', code: 'ETIMEDOUT', message: `${file} was still setting up after ${timedOutMs} ms and was stopped${words}` }
  const ended = exit.signal ?? `exit code ${exit.exitCode}`
  return { started: false, stage: 'setup', code: 'EIO', message: `${file} ended before the task's command ran (${ended})${words}` }
}

/** Why the node spawner starts no task on a terminal (the daemon refuses such tasks at admission). */
export const TTY_UNSUPPORTED =
  'a terminal needs the native spawner (its keeper holds the terminal and copies its output); this daemon runs the node fallback spawner'
/** Why the node spawner starts no task with a stdin pipe (the daemon refuses such tasks at admission). */
export const STDIN_PIPE_UNSUPPORTED = 'a stdin pipe needs the native spawner (its keeper holds the pipe); this daemon runs the node fallback spawner'
/** Why the node spawner gives a task no idmapped folder (the daemon then plans without). */
export const IDMAP_UNSUPPORTED = 'idmapped folders need the native spawner (its child mounts them while still root); this daemon runs the node fallback spawner'
/** Why the node spawner hides no place by descriptor (the daemon then has bubblewrap mount its masks by path). */
export const HIDDEN_UNSUPPORTED =
  'places hidden by descriptor need the native spawner (its child mounts over them while still root); this daemon runs the node fallback spawner'
/** Why the node spawner's tasks keep the daemon's session keyring. */
export const KEYRING_UNSUPPORTED = "the node fallback spawner cannot give a task a session keyring of its own: its tasks share the daemon's"
/** Why the node spawner starts no task that is to end with its daemon. */
export const LIFELINE_UNSUPPORTED =
  'a task that is to end with its daemon needs the native spawner (its keeper kills it once the daemon is gone); this daemon runs the node fallback spawner'
