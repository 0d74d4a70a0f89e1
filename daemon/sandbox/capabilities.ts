import { execFile, spawn } from 'node:child_process'
import { promisify } from 'node:util'
import { accessSync, constants, existsSync, mkdirSync, rmdirSync, statSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { PROFILE_FILTERS, seccompProgram, seccompSupported } from './seccomp.js'
import type { TaskIdentity } from './task-identity.js'

/** What this machine can enforce, found once at daemon start. */
export interface SandboxCapabilities {
  bwrap: { path: string; version: string; flags: string[] } | null
  /** New user namespaces can be created (bubblewrap needs them when not run as root). */
  userNamespaces: boolean
  /** cgroup v1 controller folders tend can create per-task groups in, or null. */
  cgroups: { memory: string | null; pids: string | null }
  /** Profiles that can run here; `off` always can. */
  profiles: Array<'off' | 'workspace' | 'strict'>
  /** Why a profile cannot run, by profile. */
  missing: Partial<Record<'workspace' | 'strict', string>>
  /** Who tasks run as (task-identity.ts): decided at start, once the spawner is known. */
  identity: TaskIdentity
}

const NEEDED_BWRAP_FLAGS = ['--unshare-pid', '--die-with-parent', '--new-session', '--cap-drop', '--disable-userns', '--clearenv', '--size', '--seccomp', '--json-status-fd', '--args', '--bind-fd', '--ro-bind-try', '--remount-ro', '--perms']
const INSTALL_HINT = 'install it (Debian/Ubuntu: apt-get install bubblewrap), or run the task with --sandbox off'

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

/**
 * Asks bubblewrap (its version, its flags, and whether it can make a user namespace and load the
 * seccomp filter here) and the cgroup folders. The three bwrap runs go at once: a daemon's start
 * waits for the slowest only.
 */
export async function detectSandbox(path: string | undefined): Promise<Omit<SandboxCapabilities, 'identity'>> {
  const found = findOnPath('bwrap', path)
  const userNamespaceArgs = ['--unshare-user', '--disable-userns', '--ro-bind', '/', '/', '--', 'true']
  // One run proves both the user namespace and the filter (bubblewrap loads the workspace filter
  // from a descriptor, as for a task, and `true` runs under it); only a failure is asked again
  // without the filter, to tell which of the two is missing.
  const [bwrap, filterLoads] = await Promise.all([describeBwrap(found), found !== null && seccompSupported() && runsTrue(found, ['--seccomp', '3', ...userNamespaceArgs], seccompProgram(PROFILE_FILTERS.workspace))])
  const canUnshareUser = filterLoads || (found !== null && (await runsTrue(found, userNamespaceArgs)))
  const userNamespaces = bwrap !== null && canUnshareUser
  const cgroups = { memory: cgroupRoot('memory'), pids: cgroupRoot('pids') }
  const missing: SandboxCapabilities['missing'] = {}
  if (!bwrap) missing.workspace = `bubblewrap (bwrap) was not found on PATH: ${INSTALL_HINT}`
  else {
    const lacking = NEEDED_BWRAP_FLAGS.filter((flag) => !bwrap.flags.includes(flag))
    if (lacking.length > 0) missing.workspace = `bubblewrap ${bwrap.version} lacks ${lacking.join(', ')}: install bubblewrap 0.8 or newer`
    else if (!userNamespaces) missing.workspace = 'bubblewrap cannot create user namespaces here (kernel.unprivileged_userns_clone or a container policy forbids them)'
    else if (!seccompSupported()) missing.workspace = `tend has no seccomp filter for this architecture (${process.arch}; it has them for x64 and arm64)`
    else if (!filterLoads) missing.workspace = "bubblewrap could not load tend's seccomp filter here (the kernel needs CONFIG_SECCOMP_FILTER), or `true` did not run under it"
  }
  if (missing.workspace) missing.strict = missing.workspace
  else if (!cgroups.memory || !cgroups.pids) missing.strict = strictHint([!cgroups.memory && 'memory', !cgroups.pids && 'pids'].filter((each): each is 'memory' | 'pids' => Boolean(each)))
  const profiles: SandboxCapabilities['profiles'] = ['off']
  if (!missing.workspace) profiles.push('workspace')
  if (!missing.strict) profiles.push('strict')
  return { bwrap, userNamespaces, cgroups, profiles, missing }
}

const run = promisify(execFile)

async function describeBwrap(found: string | null): Promise<SandboxCapabilities['bwrap']> {
  if (!found) return null
  try {
    const [version, help] = await Promise.all([run(found, ['--version'], { encoding: 'utf8', timeout: 5000 }), run(found, ['--help'], { encoding: 'utf8', timeout: 5000 })])
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

/**
 * Why strict cannot run, and what would make it run on this machine: strict's limits are cgroup v1
 * memory and pids groups that the daemon creates per task.
 */
export function strictHint(lacking: Array<'memory' | 'pids'>, cgroupBase = '/sys/fs/cgroup'): string {
  const named = lacking.join(' and ')
  const unmounted = lacking.filter((controller) => !existsSync(`${cgroupBase}/${controller}/cgroup.procs`))
  if (unmounted.length > 0) {
    const mounts = unmounted.map((controller) => `mkdir -p ${cgroupBase}/${controller} && mount -t cgroup -o ${controller} cgroup ${cgroupBase}/${controller}`).join('; ')
    const unified = existsSync(`${cgroupBase}/cgroup.controllers`) ? ' This machine runs the unified cgroup v2 hierarchy: boot with systemd.unified_cgroup_hierarchy=0 (or mount the v1 controllers beside it, as root)' : ''
    return `strict needs the cgroup v1 ${named} controller${lacking.length > 1 ? 's' : ''}, and ${unmounted.join(' and ')} ${unmounted.length > 1 ? 'are' : 'is'} not mounted: as root, ${mounts}; then restart the daemon (tend stop, then any tend command starts a new one).${unified}`
  }
  const folders = lacking.map((controller) => `${cgroupBase}/${controller}/tend`).join(' ')
  return `strict needs per-task cgroups, and the daemon cannot create them under ${folders}: run the daemon as root, or as root create those folders and give them to the daemon's user (mkdir -p ${folders} && chown -R ${process.getuid?.() ?? 'USER'} ${folders}); then restart the daemon`
}

/** A folder under which tend may create per-task cgroups of one v1 controller. */
function cgroupRoot(controller: 'memory' | 'pids'): string | null {
  const root = `/sys/fs/cgroup/${controller}`
  if (!existsSync(join(root, 'cgroup.procs'))) return null
  const base = join(root, 'tend')
  try {
    mkdirSync(base, { recursive: true })
    const probeDir = join(base, `probe-${process.pid}`)
    mkdirSync(probeDir)
    rmdirSync(probeDir)
    return base
  } catch {
    return null
  }
}
