import { execFile, spawn } from 'node:child_process'
import { promisify } from 'node:util'
import { accessSync, constants, statSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { PROFILE_FILTERS, seccompProgram, seccompSupported } from './seccomp.js'
import type { TaskIdentity } from './task-identity.js'
import type { NetworkMode } from '../../protocol/index.js'
import { daemonCgroupFolder, defaultDaemonPidsMax } from './cgroup-parent.js'
import { findTaskCgroupRoots, type TaskCgroupRoots } from './cgroup-hierarchy.js'
import { daemonProgram } from '../daemon-programs.js'

/** What this machine can enforce, found once at daemon start. */
export interface SandboxCapabilities {
  bwrap: { path: string; version: string; flags: string[] } | null
  /** New user namespaces can be created (bubblewrap needs them when not run as root). */
  userNamespaces: boolean
  /** This daemon's own cgroup v1 folders, per controller, that it makes task groups in (null: none), and why not. */
  cgroups: TaskCgroupRoots
  /** Profiles that can run here; `off` always can. */
  profiles: Array<'off' | 'workspace' | 'strict'>
  /** Why a profile cannot run, by profile. */
  missing: Partial<Record<'workspace' | 'strict', string>>
  /** Who tasks run as (task-identity.ts): decided at start, once the spawner is known. */
  identity: TaskIdentity
  /** The network modes sandboxed tasks can be given here, and why the others cannot (daemon/network/). */
  network: NetworkCapabilities
}

export interface NetworkCapabilities {
  modes: NetworkMode[]
  missing: Partial<Record<NetworkMode, string>>
}

const NEEDED_BWRAP_FLAGS = [
  '--unshare-pid',
  '--die-with-parent',
  '--new-session',
  '--cap-drop',
  '--disable-userns',
  '--clearenv',
  '--size',
  '--seccomp',
  '--json-status-fd',
  '--args',
  '--bind-fd',
  '--ro-bind-try',
  '--remount-ro',
  '--perms',
]
const INSTALL_HINT = 'install it (Debian/Ubuntu: apt-get install bubblewrap), or run the task with --sandbox off'

/**
 * A task's program on the task's PATH (resolveProgram): the task runs it as itself, on the PATH it
 * was given. What the daemon runs itself is looked up by daemonProgram (daemon-programs.ts) instead.
 */
export function findOnPath(program: string, path: string | undefined): string | null {
  for (const dir of (path ?? '').split(delimiter)) {
    if (!dir) continue
    const candidate = join(dir, program)
    try {
      accessSync(candidate, constants.X_OK)
      if (statSync(candidate).isFile()) return candidate
    } catch {
      // not here
    }
  }
  return null
}

export interface DetectOptions {
  /** The daemon's PATH, to find bwrap on (in its safe folders only: daemon-programs.ts). */
  path: string | undefined
  /** tend's folder in each cgroup controller (setting cgroupName). */
  cgroupName: string
  /** The daemon's uid, whose own folder of task groups is looked for. */
  uid: number
  /** The daemon's home: its task groups have a folder of their own, named after it. */
  home: string
  /** The process-count limit of all its tasks together (setting daemonPidsMax); null: the default. */
  pidsMax?: number | null
  /** The cgroup v2 subtree it was given (setting cgroupRoot); null or absent: none. */
  cgroupRoot?: string | null
}

/**
 * Asks bubblewrap (its version, its flags, and whether it can make a user namespace and load the
 * seccomp filter here) and the cgroup folders. The three bwrap runs go at once: a daemon's start
 * waits for the slowest only.
 */
export async function detectSandbox(options: DetectOptions): Promise<Omit<SandboxCapabilities, 'identity' | 'network'>> {
  const { path } = options
  // First, before this function or the daemon starts any child: with `cgroupRoot: own` the daemon
  // moves to its cgroup's leaf, and a process left beside it would keep controllers from its task groups.
  const pidsMax = options.pidsMax ?? defaultDaemonPidsMax()
  const cgroups = findTaskCgroupRoots({
    unifiedSetting: options.cgroupRoot ?? null,
    name: options.cgroupName,
    uid: options.uid,
    daemon: daemonCgroupFolder(options.home),
    ...(pidsMax !== undefined ? { pidsMax } : {}),
  })
  const found = daemonProgram('bwrap', path)
  const userNamespaceArgs = ['--unshare-user', '--disable-userns', '--ro-bind', '/', '/', '--', 'true']
  // One run proves both the user namespace and the filter (bubblewrap loads the workspace filter
  // from a descriptor, as for a task, and `true` runs under it); only a failure is asked again
  // without the filter, to tell which of the two is missing.
  const [bwrap, filterLoads] = await Promise.all([
    describeBwrap(found),
    found !== null && seccompSupported() && runsTrue(found, ['--seccomp', '3', ...userNamespaceArgs], seccompProgram(PROFILE_FILTERS.workspace)),
  ])
  const canUnshareUser = filterLoads || (found !== null && (await runsTrue(found, userNamespaceArgs)))
  const userNamespaces = bwrap !== null && canUnshareUser
  const missing: SandboxCapabilities['missing'] = {}
  if (!bwrap) missing.workspace = `bubblewrap (bwrap) was not found on PATH: ${INSTALL_HINT}`
  else {
    const lacking = NEEDED_BWRAP_FLAGS.filter((flag) => !bwrap.flags.includes(flag))
    if (lacking.length > 0) missing.workspace = `bubblewrap ${bwrap.version} lacks ${lacking.join(', ')}: install bubblewrap 0.8 or newer`
    else if (!userNamespaces)
      missing.workspace = 'bubblewrap cannot create user namespaces here (kernel.unprivileged_userns_clone or a container policy forbids them)'
    else if (!seccompSupported()) missing.workspace = `tend has no seccomp filter for this architecture (${process.arch}; it has them for x64 and arm64)`
    else if (!filterLoads)
      missing.workspace = "bubblewrap could not load tend's seccomp filter here (the kernel needs CONFIG_SECCOMP_FILTER), or `true` did not run under it"
  }
  if (missing.workspace) missing.strict = missing.workspace
  else if (!cgroups.memory || !cgroups.pids) missing.strict = `strict needs per-task memory and pids cgroups, and ${cgroups.problem}`
  const profiles: SandboxCapabilities['profiles'] = ['off']
  if (!missing.workspace) profiles.push('workspace')
  if (!missing.strict) profiles.push('strict')
  return { bwrap, userNamespaces, cgroups, profiles, missing }
}

const run = promisify(execFile)

async function describeBwrap(found: string | null): Promise<SandboxCapabilities['bwrap']> {
  if (!found) return null
  try {
    const [version, help] = await Promise.all([
      run(found, ['--version'], { encoding: 'utf8', timeout: 5000 }),
      run(found, ['--help'], { encoding: 'utf8', timeout: 5000 }),
    ])
    const flags = [...new Set(help.stdout.match(/--[a-z][a-z-]+/g) ?? [])]
    return { path: found, version: version.stdout.trim().replace(/^bubblewrap\s+/, ''), flags }
  } catch {
    return null
  }
}

/** Whether bubblewrap with these arguments exits 0; `fd3` is written to its descriptor 3. */
function runsTrue(file: string, args: string[], fd3?: Buffer): Promise<boolean> {
  return new Promise((resolveRuns) => {
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'ignore', fd3 ? 'pipe' : 'ignore'], env: { PATH: '/usr/bin:/bin' }, timeout: 5000 })
    if (fd3) {
      const input = child.stdio[3] as NodeJS.WritableStream
      // bubblewrap may exit before it reads (a flag it lacks): the write then fails, and the exit says so.
      input.on('error', () => {})
      input.end(fd3)
    }
    child.once('error', () => resolveRuns(false))
    child.once('exit', (code) => resolveRuns(code === 0))
  })
}
