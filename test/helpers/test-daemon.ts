import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { TendClient } from '../../client/index.js'
import { socketAnswers } from '../../client/ensure-daemon.js'
import { isAlive, processesWithEnv } from './processes.js'
import { waitFor } from './wait-for.js'
import { daemonCgroupFolder } from '../../daemon/sandbox/cgroup-parent.js'

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..')
export const TEND_BIN = join(REPO_ROOT, 'bin', 'tend.js')
export const FIXTURES = join(REPO_ROOT, 'test', 'fixtures')

/** A fresh TEND_HOME in the temp folder. */
export function createTempHome(): string {
  return mkdtempSync(join(tmpdir(), 'tend-test-'))
}

export interface TestDaemon {
  home: string
  /** The uid the daemon runs as (the test's own uid unless `user: 'unprivileged'`). */
  uid: number
  /** The gid the daemon runs as. */
  gid: number
  client: TendClient
  process: ChildProcess
  env: Record<string, string>
  /** Starts another client on the same home (for independent readers, races, ...). */
  newClient: () => TendClient
  /** Stops the daemon (SIGTERM), then asserts nothing of this home is left running, then deletes it. */
  stop: () => Promise<void>
  /** Kills the daemon with SIGKILL (a crash), leaving its tasks and its TEND_HOME behind; the temp HOME made for an unprivileged daemon goes. */
  crash: () => Promise<void>
}

export interface TestDaemonOptions {
  /** Extra TEND_* settings for the daemon. */
  env?: Record<string, string>
  home?: string
  /**
   * `'unprivileged'`: run the daemon as the dedicated non-root user UNPRIVILEGED_USER (its own
   * uid and gid, no supplementary groups, no capabilities), with TEND_HOME and HOME in temp
   * folders that user owns. Needs root; fails (never skips) when the user is missing, cannot
   * read the repository or run node, or cannot run bubblewrap. A user given as such (its name,
   * uid and gid; in the user database or not) runs it the same way, unchecked. Default: the
   * test's own user.
   */
  user?: 'unprivileged' | UnprivilegedUser
  /** What tend runs: `['daemon']` (the default), or e.g. `['worker', '--redis-url-file', F]`. */
  command?: string[]
  /**
   * A program (and its arguments) that runs first and execs the daemon, whose argv is appended:
   * e.g. one that gives the daemon a session keyring of its own. It runs as the daemon's user.
   * Default: none.
   */
  launcher?: string[]
}

/** The dedicated non-root user for tests (`bash .ci/run` creates it). */
export const UNPRIVILEGED_USER = 'tend-test'
const CREATE_USER_HINT = `create it as root with \`useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ${UNPRIVILEGED_USER}\` (npm test does this first: bin/system-setup.sh --tests)`

export interface UnprivilegedUser {
  name: string
  uid: number
  gid: number
}

/**
 * Environment for a daemon or CLI process on `home`, with fast test settings. Tasks run with
 * sandbox `off` unless a test asks for a profile: most tests exercise the daemon's own machinery
 * (and write to files outside their cwd); test/sandbox/ covers the profiles, and the CLI's
 * autostart test runs with the real default.
 */
export function daemonEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('TEND_')) env[key] = value
  return { ...env, TEND_HOME: home, TEND_KILL_GRACE: '1s', TEND_LOG_LEVEL: 'debug', TEND_SANDBOX: 'off', ...extra }
}

/** How long a test waits for a daemon's socket to answer. */
const DAEMON_START_TIMEOUT_MS = 30_000

/** Starts `tend daemon` in the foreground on a temp home and waits for its socket. */
export async function startTestDaemon(options: TestDaemonOptions = {}): Promise<TestDaemon> {
  const user = options.user === 'unprivileged' ? checkUnprivilegedUser() : options.user
  const home = options.home ?? createTempHome()
  const launcher = options.launcher ?? []
  let env = daemonEnv(home, options.env)
  if (env.TEND_CGROUP_ROOT?.startsWith('/')) unifiedRoots.set(home, env.TEND_CGROUP_ROOT)
  const command = options.command ?? ['daemon']
  let child: ChildProcess
  let userHome: string | undefined
  if (user) {
    chownSync(home, user.uid, user.gid)
    chmodSync(home, 0o700)
    userHome = mkdtempSync(join(tmpdir(), 'tend-test-userhome-'))
    chownSync(userHome, user.uid, user.gid)
    chmodSync(userHome, 0o700)
    // A HOME the test gives (a planted one) wins over the temp one.
    env = { ...unprivilegedEnv(env, user, userHome), ...(options.env?.HOME ? { HOME: options.env.HOME } : {}) }
    child = spawn('setpriv', [...setprivArgs(user), '--', ...launcher, process.execPath, TEND_BIN, ...command], {
      env,
      cwd: userHome,
      stdio: ['ignore', 'ignore', 'pipe'],
    })
  } else {
    const [file, ...args] = [...launcher, process.execPath, TEND_BIN, ...command]
    child = spawn(file!, args, { env, stdio: ['ignore', 'ignore', 'pipe'] })
  }
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const socket = join(home, 'tend.sock')
  try {
    // A daemon starts in about a second; a machine busy with other suites can make it many more.
    await waitFor(
      `daemon socket ${socket} (daemon stderr: ${stderr})`,
      async () => {
        if (child.exitCode !== null) throw new Error(`daemon exited with ${child.exitCode}: ${stderr}`)
        return socketAnswers(socket)
      },
      DAEMON_START_TIMEOUT_MS,
    )
  } catch (error) {
    // A daemon that did not come up in time must not come up later and stay.
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()))
    }
    if (user) {
      // Leave nothing behind when the non-root daemon did not come up.
      await assertNothingLeft(home).catch(() => {})
      rmSync(home, { recursive: true, force: true })
      rmSync(userHome!, { recursive: true, force: true })
      throw new Error(`the daemon as ${user.name} (uid ${user.uid}) did not start: ${(error as Error).message}; its stderr: ${stderr}`)
    }
    throw error
  }
  const clients: TendClient[] = []
  const newClient = () => {
    const client = new TendClient({ home, autoStart: false })
    clients.push(client)
    return client
  }
  const client = newClient()
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()))
  const cleanup = async () => {
    for (const each of clients) each.close()
    await assertNothingLeft(home)
    rmSync(home, { recursive: true, force: true })
    if (userHome) rmSync(userHome, { recursive: true, force: true })
  }
  return {
    home,
    uid: user?.uid ?? process.getuid!(),
    gid: user?.gid ?? process.getgid!(),
    client,
    process: child,
    env,
    newClient,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        await exited
      }
      await cleanup()
    },
    crash: async () => {
      child.kill('SIGKILL')
      await exited
      // The temp HOME made for an unprivileged daemon is this daemon's alone: the next one on the
      // same TEND_HOME gets its own. (TEND_HOME stays, with what the crash left, for the test.)
      if (userHome) rmSync(userHome, { recursive: true, force: true })
    },
  }
}

/** setpriv's arguments that switch to `user`: its uid and gid, no supplementary groups, no inheritable capabilities. */
export function setprivArgs(user: UnprivilegedUser): string[] {
  return ['--reuid', String(user.uid), '--regid', String(user.gid), '--clear-groups', '--inh-caps=-all']
}

/** `env` (from daemonEnv) adjusted for `user`: its HOME, USER and LOGNAME; none of root's XDG_* folders. */
export function unprivilegedEnv(env: Record<string, string>, user: UnprivilegedUser, userHome: string): Record<string, string> {
  const adjusted: Record<string, string> = {}
  for (const [key, value] of Object.entries(env)) if (!key.startsWith('XDG_')) adjusted[key] = value
  return { ...adjusted, HOME: userHome, USER: user.name, LOGNAME: user.name }
}

let checkedUser: UnprivilegedUser | undefined

/**
 * Resolves UNPRIVILEGED_USER and proves, once per test file, that a daemon can run as it: we are
 * root, setpriv exists, the user exists, it can run node and read the repository (the built
 * daemon, its dependencies, the spawner), and it can run bubblewrap (unprivileged user
 * namespaces). Throws a message naming what to install or configure otherwise.
 */
export function checkUnprivilegedUser(): UnprivilegedUser {
  if (checkedUser) return checkedUser
  const fail = (what: string): never => {
    throw new Error(`startTestDaemon({ user: 'unprivileged' }): ${what}`)
  }
  if (process.getuid?.() !== 0) fail(`needs root to switch to the user ${UNPRIVILEGED_USER} (running as uid ${process.getuid?.()})`)
  if (spawnSync('setpriv', ['--version']).error) fail('setpriv is not installed: install util-linux (`apt-get install util-linux`)')
  const entry = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((line) => line.startsWith(`${UNPRIVILEGED_USER}:`))
  const passwd = entry ? entry : lookUpUser()
  if (!passwd) fail(`the user ${UNPRIVILEGED_USER} does not exist: ${CREATE_USER_HINT}`)
  const [, , uidText, gidText] = passwd!.split(':')
  const user: UnprivilegedUser = { name: UNPRIVILEGED_USER, uid: Number(uidText), gid: Number(gidText) }
  if (!(user.uid > 0) || !(user.gid > 0))
    fail(`the user ${UNPRIVILEGED_USER} has uid ${uidText} and gid ${gidText}; it must be a non-root user with a non-root group: ${CREATE_USER_HINT}`)

  const asUser = (command: string[]) => spawnSync('setpriv', [...setprivArgs(user), '--', ...command], { cwd: '/', encoding: 'utf8', timeout: 30_000 })

  // What the daemon needs to read or run. The shell prints each path the user cannot use, and the
  // first folder on its way that the user cannot enter.
  const needed = [
    `x ${process.execPath}`,
    `r ${TEND_BIN}`,
    `r ${join(REPO_ROOT, 'package.json')}`,
    `r ${join(REPO_ROOT, 'dist', 'daemon')}`,
    `r ${join(REPO_ROOT, 'dist', 'daemon', 'index.js')}`,
    `x ${join(REPO_ROOT, 'dist', 'native', 'tend-spawner')}`,
    `r ${join(REPO_ROOT, 'node_modules')}`,
    `r ${join(REPO_ROOT, 'node_modules', 'fastify', 'package.json')}`,
    // The temp folder that holds TEND_HOME and HOME (only entered, so 'x').
    `x ${tmpdir()}`,
  ].filter((line) => existsSync(line.slice(line.indexOf(' ') + 1)))
  const script = `
    for item in "$@"; do
      mode=\${item%% *}; path=\${item#* }
      if ! [ -e "$path" ]; then ok=0; what="reach"
      elif [ -d "$path" ] && [ "$mode" = x ]; then ok=1; [ -x "$path" ] || ok=0; what="enter"
      elif [ -d "$path" ]; then ok=1; [ -r "$path" ] && [ -x "$path" ] || ok=0; what="list and enter"
      elif [ "$mode" = x ]; then ok=1; [ -x "$path" ] || ok=0; what="execute"
      else ok=1; [ -r "$path" ] || ok=0; what="read"
      fi
      if [ $ok = 0 ]; then
        blocked=""; dir=$(dirname "$path")
        while :; do [ -x "$dir" ] || blocked="$dir"; [ "$dir" = / ] && break; dir=$(dirname "$dir"); done
        if [ -n "$blocked" ]; then echo "cannot $what $path: cannot enter the folder $blocked"; else echo "cannot $what $path"; fi
      fi
    done`
  const access = asUser(['/bin/sh', '-c', script, 'sh', ...needed])
  if (access.error) fail(`setpriv could not run /bin/sh as ${UNPRIVILEGED_USER}: ${access.error.message}`)
  if (access.status !== 0 || access.stdout.trim()) {
    fail(
      `the user ${UNPRIVILEGED_USER} (uid ${user.uid}) cannot use the repository or node:\n  ${access.stdout.trim().split('\n').join('\n  ')}${access.stderr ? `\n  ${access.stderr.trim()}` : ''}\n` +
        `  Make the checkout and node world-readable (files o+r, folders and node o+rx, e.g. \`chmod -R o+rX ${REPO_ROOT}\` and o+x on every parent folder), or clone into a folder such as /var/tmp.`,
    )
  }

  // bubblewrap as that user: needs unprivileged user namespaces.
  const reasons: string[] = []
  const sysctl = (path: string) => (existsSync(path) ? readFileSync(path, 'utf8').trim() : undefined)
  const clone = sysctl('/proc/sys/kernel/unprivileged_userns_clone')
  if (clone !== undefined && clone !== '1')
    reasons.push(`/proc/sys/kernel/unprivileged_userns_clone is ${clone}: enable with \`sysctl -w kernel.unprivileged_userns_clone=1\``)
  const maxNamespaces = sysctl('/proc/sys/user/max_user_namespaces')
  if (maxNamespaces !== undefined && Number(maxNamespaces) <= 0)
    reasons.push(`/proc/sys/user/max_user_namespaces is ${maxNamespaces}: raise it with \`sysctl -w user.max_user_namespaces=15000\``)
  const apparmor = sysctl('/proc/sys/kernel/apparmor_restrict_unprivileged_userns')
  if (apparmor !== undefined && apparmor !== '0')
    reasons.push(
      `/proc/sys/kernel/apparmor_restrict_unprivileged_userns is ${apparmor}: set it to 0 (\`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0\`) or give bwrap an AppArmor profile that allows userns`,
    )
  const bwrap = asUser(['bwrap', '--unshare-all', '--die-with-parent', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '/bin/true'])
  if (bwrap.error || bwrap.status !== 0) {
    const notInstalled = /cannot execute|No such file/.test(bwrap.stderr ?? '') && spawnSync('bwrap', ['--version']).error !== undefined
    const why = notInstalled
      ? 'bwrap is not installed (install bubblewrap: `apt-get install bubblewrap`)'
      : bwrap.error
        ? bwrap.error.message
        : `bwrap exited with ${bwrap.status}: ${bwrap.stderr.trim()}`
    fail(`the user ${UNPRIVILEGED_USER} cannot run bubblewrap: ${why}${reasons.length ? `\n  ${reasons.join('\n  ')}` : ''}`)
  }
  checkedUser = user
  return user
}

function lookUpUser(): string | undefined {
  const result = spawnSync('getent', ['passwd', UNPRIVILEGED_USER], { encoding: 'utf8' })
  return result.status === 0 ? result.stdout.trim() : undefined
}

/**
 * Every process of a home: its daemon and anything else run with its TEND_HOME, and every
 * process marked with one of its tasks' ids (a sandboxed task does not carry TEND_HOME, and it
 * runs on under its keeper when its daemon dies).
 */
export function processesOfHome(home: string): number[] {
  const marked = taskIdsOf(home).flatMap((id) => processesWithEnv(`TEND_TASK_ID=${id}`))
  return [...new Set([...processesWithEnv(`TEND_HOME=${home}`), ...marked])].filter(isAlive)
}

/** Kills every process of a home (see processesOfHome) and removes its tasks' cgroups; for cleanups after a test that crashed daemons. */
export async function killEverythingOf(home: string): Promise<void> {
  for (const pid of processesOfHome(home)) {
    try {
      process.kill(pid, 'SIGKILL')
    } catch {
      // already gone
    }
  }
  await waitFor(`no process of ${home} left`, () => processesOfHome(home).length === 0)
  removeTaskCgroups(home)
}

/** Fails when any process that belongs to this home (daemon or task) is still running; its tasks' cgroups go either way. */
export async function assertNothingLeft(home: string): Promise<void> {
  const leftovers = () => processesOfHome(home)
  try {
    await waitFor(`no process of ${home} left running`, () => leftovers().length === 0, 5000)
  } catch (error) {
    const pids = leftovers()
    const described = pids.map((pid) => `${pid} (${commandLine(pid)})`)
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    throw new Error(`${(error as Error).message}: leftover pids ${described.join(', ')}`)
  } finally {
    removeTaskCgroups(home)
  }
}

function taskIdsOf(home: string): string[] {
  try {
    return readdirSync(join(home, 'spool')).filter((name) => /^[0-9a-z]{12}$/.test(name))
  } catch {
    return []
  }
}

/** The cgroup v2 subtree each home's daemon was given (TEND_CGROUP_ROOT), whose task groups go as v1's do. */
const unifiedRoots = new Map<string, string>()

/**
 * A task's cgroups outlive a daemon that died before it could remove them
 * (tend/<daemon uid>/<daemon's folder>/<task id>), and so does the daemon's folder.
 */
function removeTaskCgroups(home: string): void {
  const ids = taskIdsOf(home)
  const daemonFolder = daemonCgroupFolder(home)
  const unified = unifiedRoots.get(home)
  if (unified) {
    for (const folder of [...ids.map((id) => join(unified, daemonFolder, id)), join(unified, daemonFolder)]) {
      try {
        rmdirSync(folder)
      } catch {
        // none, or not empty (its processes are reported above)
      }
    }
  }
  for (const controller of ['pids', 'memory']) {
    const top = join('/sys/fs/cgroup', controller, 'tend')
    let owners: string[] = []
    try {
      owners = readdirSync(top).filter((name) => /^\d+$/.test(name))
    } catch {
      continue
    }
    for (const owner of owners) {
      for (const id of ids) {
        try {
          rmdirSync(join(top, owner, daemonFolder, id))
        } catch {
          // none, or not empty (its processes are reported above)
        }
      }
      try {
        rmdirSync(join(top, owner, daemonFolder))
      } catch {
        // none, or not empty
      }
    }
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ')
  } catch {
    return 'gone'
  }
}

/**
 * Stops a daemon as its operator would (SIGTERM) and waits for it to exit, leaving its home as it
 * is for the next one (stop() would remove a home it made).
 */
export async function stopKeepingHome(daemon: TestDaemon): Promise<void> {
  daemon.client.close()
  const child = daemon.process
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  await exited
}

/**
 * The end of a suite: no process of its tasks left, then what it started stopped (stopAll) and its
 * folder removed, whatever failed on the way.
 */
export async function endSuite(taskIds: readonly string[], folder: string, ...stoppable: Array<{ stop: () => Promise<void> } | undefined>): Promise<void> {
  try {
    await noTaskProcessLeft(taskIds)
  } finally {
    try {
      await stopAll(...stoppable)
    } finally {
      rmSync(folder, { recursive: true, force: true })
    }
  }
}

/** Waits until no process of these tasks is left: a test that failed midway may have left one running. */
export async function noTaskProcessLeft(taskIds: readonly string[]): Promise<void> {
  await waitFor('no process of any task of this suite left', () => taskIds.every((id) => processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive).length === 0))
}

/**
 * Stops each in turn (daemons, then the Redis they use, …) even when one of them fails, and then
 * throws the first failure: a test that failed midway still leaves nothing running.
 */
export async function stopAll(...stoppable: Array<{ stop: () => Promise<void> } | undefined>): Promise<void> {
  const failures: unknown[] = []
  for (const each of stoppable) await each?.stop().catch((error: unknown) => failures.push(error))
  if (failures.length > 0) throw failures[0]
}
