import { readdirSync, readlinkSync, realpathSync, statSync, type Dirent } from 'node:fs'
import { dirname, join } from 'node:path'
import { DNS_STUB_ADDRESS, proxyEnvironment } from '../network/task-environment.js'
import type { NamespaceRef } from '../network/owner-network.js'
import type { RanAs, Task } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import { descriptorLayout, type SpawnRequest } from '../spawn/spawner.js'
import { setupReporting } from './setup-report.js'
import { TASK_ID_VARIABLE, TASK_RUN_VARIABLE } from '../spawn/run-name.js'
import type { SandboxCapabilities } from './capabilities.js'
import { TaskCgroups, type GroupRequest } from './cgroups.js'
import { sandboxEnvironment, taskDefaultEnvironment } from './environment.js'
import { trustingGivenRepositories } from './git-trust.js'
import { hostAccountFiles } from './account-files.js'
import { isWithin, needsMask, reachableBy, type IdmappedRoot, type TaskPaths } from './path-policy.js'
import { idmapOwner, taskRunAs, viewOf } from './task-identity.js'
import { PROFILE_FILTERS, seccompProgram } from './seccomp.js'
import { tmpfsSizes } from './tmpfs-sizes.js'
import { INPUT_FIFO, RESIZE_FIFO } from '../../spool/layout.js'

/** How to start one task (what the spawner gets), who it runs as, and what to release after it. */
export interface LaunchPlan {
  request: SpawnRequest
  cgroups: TaskCgroups | null
  ranAs: RanAs
  release: () => Promise<void>
}

export interface PlanRequest {
  task: Task
  /** The program as the spawner gets it: resolved on the task's PATH, or the bare name (see SpawnRequest.file). */
  programPath: string
  outputFile: string
  /** Where the task's keeper records how it ended (exit.json in its spool folder). */
  exitFile: string
  envAdditions: Record<string, string>
  /** The task's cwd and writable folders as pinned when it was accepted. */
  paths: TaskPaths
  /** Real paths hidden from the task: tend homes (empty tmpfs) and secrets (empty folder or file). */
  masks: readonly string[]
  /**
   * Whether the spawner hides them (SpawnRequest.hiddenPaths: its child, still root, mounts over
   * each by descriptor before bubblewrap starts); otherwise bubblewrap mounts them, by path.
   * Default: false.
   */
  hideByDescriptor?: boolean
  /**
   * Whether the spawner waits for bubblewrap's setup (SpawnRequest.reportsSetup): a shell in the
   * sandbox then says it is done, right before it execs the command. Default: false.
   */
  reportsSetup?: boolean
  config: Readonly<DaemonConfig>
  capabilities: SandboxCapabilities
  /** Its owner's ids, when sandboxed tasks run on their own identity (task-identity.ts, ownerIdsOf). */
  ownIds?: { uid: number; gid: number } | null
  /** The owner's private network the task joins (loopback and allow); absent: a namespace of its own, empty (or the host's, for host). */
  netns?: NamespaceRef | null
}

/**
 * bubblewrap runs on the host side with this environment and nothing else: the task's variables
 * (LD_PRELOAD, LD_AUDIT, GCONV_PATH, …) would otherwise act on bubblewrap itself, outside the
 * sandbox. They reach the task through `--args` on a descriptor, never a command line.
 */
const BWRAP_PATH = '/usr/sbin:/usr/bin:/sbin:/bin'

/**
 * Every task starts with its limits set (no core dumps, open files, file size) and, where it has
 * them, its cgroups joined, then execs either the command itself (`off`) or bubblewrap around it
 * (`workspace`, `strict`).
 */
export async function planLaunch(request: PlanRequest): Promise<LaunchPlan> {
  const { task, config, capabilities, paths } = request
  // The id is the task's to read; the run is what the daemon finds this run's processes by (run-name.ts).
  const marker = { [TASK_ID_VARIABLE]: task.id, ...(task.run === undefined ? {} : { [TASK_RUN_VARIABLE]: task.run }) }
  const baseEnv = task.tty ? withTerminalType(config.baseEnv) : config.baseEnv
  const runAs = taskRunAs(task.sandbox, capabilities.identity, request.ownIds ?? null)
  let cgroups: TaskCgroups | null = null
  const release = async () => {
    // Removal waits (briefly) for the last processes to leave: no group outlives its task's record.
    await cgroups?.remove()
  }
  // Every task where the machine has cgroups: `off` for its exact process list (it has no pid
  // namespace), sandboxes for their bounds (a pids limit, memory counted or limited).
  const { memory, pids, unified } = capabilities.cgroups
  if (pids || unified) cgroups = TaskCgroups.create({ memory, pids, unified }, task.id, groupsFor(task, config))
  const common = {
    cwd: paths.cwd.path,
    cwdIdentity: { dev: paths.cwd.dev, ino: paths.cwd.ino },
    outputFile: request.outputFile,
    exitFile: request.exitFile,
    // The FIFO (or the terminal) is the task's fd 0 before bubblewrap starts: the sandboxed command inherits it.
    ...(task.stdin === 'pipe' ? { stdinFifo: join(task.spool, INPUT_FIFO) } : {}),
    ...(task.tty ? { terminal: { resizeFifo: join(task.spool, RESIZE_FIFO), cols: task.tty.cols, rows: task.tty.rows } } : {}),
    extraFiles: [],
    cgroups: cgroups?.joinEntries() ?? [],
    limits: { openFiles: config.openFilesLimit, fileSizeBytes: Math.max(config.fileSizeLimitBytes, task.maxOutputBytes + 1) },
    ...(runAs.user ? { user: runAs.user } : {}),
  }
  const { ranAs } = runAs
  if (task.sandbox === 'off') {
    const env = { ...taskDefaultEnvironment(config), ...baseEnv, ...request.envAdditions, ...marker }
    return { request: { ...common, file: request.programPath, argv: task.command, env }, cgroups, ranAs, release }
  }
  // On its own identity the task writes its folders through idmapped mounts (each owner shows as
  // the task's user), and sees the daemon's HOME through a read-only one.
  const user = runAs.idmap ? runAs.user : null
  const pinnedDirs = paths.writable.map(({ path, dev, ino, uid }) => (user ? { path, dev, ino, owner: idmapOwner(uid, user) } : { path, dev, ino }))
  const home =
    user && capabilities.identity.home !== null && !paths.writable.some((entry) => isWithin(capabilities.identity.home!, entry.path))
      ? viewOf(capabilities.identity.home, user)
      : null
  const idmapped = user ? [...(home ? [{ path: home.path, ...home.owner! }] : []), ...pinnedDirs.map((entry) => ({ path: entry.path, ...entry.owner! }))] : []
  // The proxy variables may be overridden by the task's own (the proxy decides either way).
  const allowed = sandboxEnvironment(baseEnv, { ...taskDefaultEnvironment(config), ...proxyEnvironment(task.network), ...request.envAdditions }, marker)
  // A task on its own identity owns its idmapped folders: git trusts what it was given, nothing above (git-trust.ts).
  const environment = runAs.idmap ? trustingGivenRepositories(allowed, paths.writable) : allowed
  // In memory (sealed memfds), never in the spool: no write per task that a full disk could fail,
  // no file that anyone could swap between the write and bubblewrap's read. A task on its own
  // identity also gets account files that name its uid and gid.
  const accounts = runAs.idmap && runAs.user ? hostAccountFiles.filesFor(runAs.user, environment.HOME) : null
  // The account files cover the host's by descriptor where the spawner can (a user added as the task
  // starts replaces /etc/passwd: a mount by path would then fail the task); else bubblewrap binds them.
  const coveredFiles =
    accounts && request.hideByDescriptor
      ? [
          { path: '/etc/passwd', data: accounts.passwd },
          { path: '/etc/group', data: accounts.group },
        ]
      : []
  const bound = accounts && !request.hideByDescriptor ? accounts : null
  // Inside the owner's namespace, names are asked of tend's DNS stub there (the host's resolver is out of reach).
  const resolver = task.network === 'host' ? null : STUB_RESOLV_CONF
  // Where the setup is reported, the task's variables reach only its command (setup-report.ts).
  const reporting = request.reportsSetup ? setupReporting(environment) : null
  const dataFiles = [
    environmentArgs(reporting?.holders ?? environment),
    seccompProgram(PROFILE_FILTERS[task.sandbox]),
    ...(bound ? [bound.passwd, bound.group] : []),
    ...(resolver ? [resolver] : []),
  ]
  const layout = descriptorLayout({ extraFiles: [], dataFiles })
  const [argsFd, seccompFd] = layout.data as [number, number]
  const accountFds = bound ? { passwd: seccompFd + 1, group: seccompFd + 2 } : undefined
  const resolverFd = resolver ? seccompFd + 1 + (bound ? 2 : 0) : undefined
  const firstPinnedFd = seccompFd + 1 + (bound ? 2 : 0) + (resolver ? 1 : 0)
  // Each mask's owner may remove it, or put a link in its place, as the task starts: mounted by the
  // spawner, through a descriptor opened without following links, such a mask is skipped; mounted
  // by bubblewrap, by path, it fails bubblewrap's setup (the task is planned again where the
  // spawner reportsSetup: launch.ts) or lands where the link leads.
  const masks = masksFor(request.masks, runAs.user, idmapped)
  const hidden = request.hideByDescriptor ? masks : []
  const bwrap = capabilities.bwrap!.path
  const argv = [
    bwrap,
    ...bubblewrapArgs({
      task,
      config,
      paths,
      masks: request.hideByDescriptor ? [] : masks,
      seccompFd,
      argsFd,
      firstPinnedFd,
      user: runAs.user,
      idmapped,
      joinsNetwork: Boolean(request.netns),
      ...(accountFds ? { accountFds } : {}),
      ...(resolverFd !== undefined ? { resolverFd } : {}),
    }),
    '--',
    ...(reporting?.argv ?? []),
    ...task.command,
  ]
  return {
    request: {
      ...common,
      file: bwrap,
      argv,
      env: { PATH: BWRAP_PATH, ...marker },
      dataFiles,
      pinnedDirs,
      ...(request.reportsSetup ? { reportsSetup: true, setupWaitMs: config.setupWaitMs } : {}),
      ...(request.netns ? { netns: request.netns } : {}),
      ...(home ? { idmappedViews: [home] } : {}),
      ...(hidden.length > 0 ? { hiddenPaths: hidden } : {}),
      ...(coveredFiles.length > 0 ? { coveredFiles } : {}),
    },
    cgroups,
    ranAs,
    release,
  }
}

/** The groups a task gets, and their limits as recorded on it (strict's defaults for an older record without them). */
function groupsFor(task: Task, config: Readonly<DaemonConfig>): GroupRequest {
  if (task.sandbox === 'off') return { memory: false, limits: { memoryBytes: null, pidsMax: null } }
  if (task.sandbox === 'strict')
    return { memory: true, limits: { memoryBytes: task.memoryBytes ?? config.strictMemoryBytes, pidsMax: task.pidsMax ?? config.strictPidsMax } }
  return { memory: true, limits: { memoryBytes: task.memoryBytes, pidsMax: task.pidsMax } }
}

/**
 * A terminal task's environment names a terminal type: full-screen programs (top, less, vim)
 * refuse to run without one, and a daemon started by a desktop app or a service manager has none.
 * The daemon's own, or the task's, wins.
 */
function withTerminalType(baseEnv: Record<string, string>): Record<string, string> {
  return baseEnv.TERM ? baseEnv : { ...baseEnv, TERM: DEFAULT_TERMINAL_TYPE }
}
const DEFAULT_TERMINAL_TYPE = 'xterm-256color'

/**
 * The masks a task on `user` needs (all of them on the daemon's own uid): those that user can reach
 * (the rest is protected by file modes, and bubblewrap, run as that user, could mount on none), and
 * of those another uid's only where its modes let the user see something (needsMask).
 */
function masksFor(masks: readonly string[], user: { uid: number; gid: number } | null | undefined, idmapped: readonly IdmappedRoot[]): string[] {
  if (!user) return [...masks]
  return masks.filter((path) => reachableBy(path, user, idmapped) && needsMask(path, user, idmapped))
}

export interface BubblewrapOptions {
  task: Task
  config: Readonly<DaemonConfig>
  paths: TaskPaths
  /** Masks bubblewrap mounts by path (those the spawner does not hide): each one needed (see masksFor). */
  masks: readonly string[]
  /** Descriptor holding the profile's seccomp program. */
  seccompFd: number
  /** Descriptor holding `--clearenv --setenv K V …` (NUL-separated). */
  argsFd: number
  /** Descriptor of paths.writable[0]; the others follow. */
  firstPinnedFd: number
  /** Who bubblewrap runs as when not the daemon (null): it reaches only what that user can. */
  user?: { uid: number; gid: number } | null
  /** Folders that user sees through idmapped mounts (their owners show as it). */
  idmapped?: readonly IdmappedRoot[]
  /** Descriptors holding the /etc/passwd and /etc/group shown instead of the host's (account-files.ts). */
  accountFds?: { passwd: number; group: number }
  /** The task runs in its owner's namespace, which the spawner joins: bubblewrap makes none. */
  joinsNetwork?: boolean
  /** Descriptor holding the resolv.conf shown instead of the host's (the DNS stub in the owner's namespace). */
  resolverFd?: number
}

/** The bubblewrap command line of a sandboxed profile (each loads its own seccomp program). */
export function bubblewrapArgs(options: BubblewrapOptions): string[] {
  const { task, config, paths } = options
  const sizes = tmpfsSizes(config.tmpSizeBytes)
  const args = [
    // A user namespace lets --disable-userns forbid new ones; as root it maps root to root.
    '--unshare-user',
    '--disable-userns',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    ...(task.network === 'host' || options.joinsNetwork ? [] : ['--unshare-net']),
    // A new session keeps a task from typing into the terminal of whoever started tend (TIOCSTI). A
    // task on a terminal of its own keeps it as its controlling terminal (job control, SIGWINCH,
    // /dev/tty): the only input it can fake there is its own, and the only reader is its keeper.
    '--die-with-parent',
    ...(task.tty ? [] : ['--new-session']),
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    // /dev: memory-backed like /tmp, so /dev/shm gets its share of the cap and the rest of /dev is read-only.
    '--dev',
    '/dev',
    '--perms',
    '1777',
    '--size',
    String(sizes.shm),
    '--tmpfs',
    '/dev/shm',
    '--remount-ro',
    '/dev',
    // A fresh proc mount leaves the kernel's knobs writable to a uid-0 task without capabilities
    // (core_pattern alone runs a program as root on the host). The whole mount is read-only: every
    // knob this kernel has or will add, in one remount (binding each knob costs a mount apiece).
    '--proc',
    '/proc',
    '--remount-ro',
    '/proc',
    '--perms',
    '1777',
    '--size',
    String(sizes.tmp),
    '--tmpfs',
    '/tmp',
  ]
  // Run as another user (taskUser, the tasks' own identity), bubblewrap sees only what that user can
  // reach: the rest is protected by file modes, and a mount on it would fail.
  const { user } = options
  const reachable = (path: string) => !user || reachableBy(path, user, options.idmapped)
  const home = config.baseEnv.HOME
  if (home && reachable(join(home, '.cache'))) args.push(...privateCache(home, paths, String(sizes.cache)))
  // Bound by descriptor: the folder pinned at acceptance, whatever its path has become since.
  paths.writable.forEach((entry, index) => args.push('--bind-fd', String(options.firstPinnedFd + index), entry.path))
  if (options.accountFds)
    args.push('--ro-bind-data', String(options.accountFds.passwd), '/etc/passwd', '--ro-bind-data', String(options.accountFds.group), '/etc/group')
  // Masks come after the binds, so a writable path that contains them cannot uncover them (those the
  // spawner hides are there before bubblewrap starts, and its recursive binds carry them). They are
  // read-only: a writable tmpfs would be neither capped (like /tmp) nor seen by the operator.
  for (const path of options.masks) {
    const kind = pathKind(path)
    if (kind === 'directory') args.push('--tmpfs', path, '--remount-ro', path)
    else if (kind === 'file') args.push('--ro-bind', '/dev/null', path)
  }
  // Service sockets live under /run (docker, D-Bus, containerd): a read-only mount does not stop
  // connect(), an empty /run does. With network access, DNS keeps its resolver folder.
  args.push('--tmpfs', '/run')
  if (task.network === 'host') args.push('--ro-bind-try', '/run/systemd/resolve', '/run/systemd/resolve')
  if (options.resolverFd !== undefined) args.push(...resolverArgs(options.resolverFd))
  args.push('--remount-ro', '/run')
  args.push('--chdir', paths.cwd.path, '--args', String(options.argsFd), '--seccomp', String(options.seccompFd))
  return args
}

/**
 * Tools that cache (go, pip, npm's helpers) need a writable ~/.cache; the host's must stay as it
 * is (a poisoned cache would run later outside the sandbox). So the task gets a private, capped
 * ~/.cache with the host's entries visible read-only in it, unless it was given ~/.cache (or a
 * folder around it) to write.
 */
function privateCache(home: string, paths: TaskPaths, size: string): string[] {
  const cache = join(home, '.cache')
  let entries: Dirent[]
  try {
    if (!statSync(cache).isDirectory()) return []
    entries = readdirSync(cache, { withFileTypes: true })
  } catch {
    return []
  }
  if (paths.writable.some((entry) => isWithin(cache, entry.path))) return []
  const args = ['--perms', '0755', '--size', size, '--tmpfs', cache]
  for (const entry of entries) {
    const path = join(cache, entry.name)
    // A link is recreated, not bound: bound, it would be followed on the host, past the masks.
    if (entry.isSymbolicLink()) {
      const target = readLink(path)
      if (target !== null) args.push('--symlink', target, path)
    } else args.push('--ro-bind-try', path, path)
  }
  return args
}

/**
 * resolv.conf naming the owner's DNS stub, where the task reads it: /etc/resolv.conf, or where it
 * leads when it is a link (into /run, made empty above, on systemd-resolved hosts).
 */
function resolverArgs(fd: number): string[] {
  let target = RESOLV_CONF
  try {
    target = realpathSync(RESOLV_CONF)
  } catch {
    // missing: bubblewrap makes the file
  }
  const folder = dirname(target)
  return [...(target.startsWith('/run/') ? ['--dir', folder] : []), '--ro-bind-data', String(fd), target]
}
const RESOLV_CONF = '/etc/resolv.conf'
const STUB_RESOLV_CONF = Buffer.from(
  `# tend: names are answered by the DNS stub of this owner's private network\nnameserver ${DNS_STUB_ADDRESS}\noptions attempts:1 timeout:2\n`,
)

/** The task's environment as bubblewrap arguments, NUL-separated, for `--args FD`. */
function environmentArgs(environment: Record<string, string>): Buffer {
  const parts = ['--clearenv']
  for (const [key, value] of Object.entries(environment)) parts.push('--setenv', key, value)
  return Buffer.from(`${parts.join('\0')}\0`)
}

function readLink(path: string): string | null {
  try {
    return readlinkSync(path)
  } catch {
    return null
  }
}

function pathKind(path: string): 'directory' | 'file' | null {
  try {
    return statSync(path).isDirectory() ? 'directory' : 'file'
  } catch {
    return null
  }
}
