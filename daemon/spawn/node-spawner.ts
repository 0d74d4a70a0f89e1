import { closeSync, constants as fsConstants, existsSync, fstatSync, lstatSync, openSync, readlinkSync } from 'node:fs'
import type { Readable } from 'node:stream'
import { checkCwd } from './cwd-check.js'
import {
  cgroupFailure,
  cwdChangedFailure,
  descriptorLayout,
  pinnedDirFailure,
  spawnRequestProblem,
  userFailure,
  type AttachOutcome,
  type CgroupJoin,
  type PinnedDir,
  type SpawnExit,
  type SpawnOutcome,
  type SpawnRequest,
  type Spawner,
  HIDDEN_UNSUPPORTED,
  SETUP_DONE,
  setupFailure,
  setupWaitOf,
  IDMAP_UNSUPPORTED,
  LIFELINE_UNSUPPORTED,
  STDIN_PIPE_UNSUPPORTED,
  TTY_UNSUPPORTED,
} from './spawner.js'

/**
 * execa is imported on the first spawn, from node_modules: it stays out of the daemon's bundle
 * (~220 KiB, compiled and resident at every start of a daemon that uses the native spawner), and a
 * dynamic import loads it on every Node (it is an ES module; a require of it fails before 20.19).
 */
let execaModule: Promise<typeof import('execa')> | undefined
const loadExeca = () => (execaModule ??= import('execa'))

/** O_PATH (Linux; node's fs.constants lacks it) | O_DIRECTORY | O_NOFOLLOW. */
const PINNED_DIR_FLAGS = 0o10000000 | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW

/** Where the prelude finds its helpers: fixed, never the task's PATH (which the task's owner chose). */
const STAT = firstExisting(['/usr/bin/stat', '/bin/stat'])
const SETPRIV = firstExisting(['/usr/bin/setpriv', '/bin/setpriv', '/usr/sbin/setpriv', '/sbin/setpriv'])
const NSENTER = firstExisting(['/usr/bin/nsenter', '/bin/nsenter', '/usr/sbin/nsenter', '/sbin/nsenter'])

type Failure = Extract<SpawnOutcome, { started: false }>

/**
 * The fallback spawner, where the native helper could not be built: child_process (through execa)
 * from the daemon's own thread, with a small shell prelude that sets the limits, joins the cgroups,
 * checks cwd and drops to the task's user before it execs the program. Slower (the daemon forks
 * itself for every task) but the child ends up set up the same way, on the same descriptors.
 *
 * The prelude reports a failing check on its stdout, a pipe to the daemon; right before the exec it
 * points stdout at the output file, so the pipe's end (with nothing said) means the program is
 * being exec'd. Pinned folders are opened and checked here in the daemon and handed down, and so
 * is each cgroup's `tasks` file, opened from its folder once checked (the prelude writes its pid
 * there and closes it); each in-memory file reaches the child as a socket that execa writes whole
 * and ends (the daemon never reads from it). Another user is set by util-linux's setpriv, exec'd by
 * the prelude after the cgroups are joined (which takes the daemon's privileges).
 *
 * What only a child that is still root, or a system call, can do is left out: no idmapped folders
 * (a request with them fails at stage idmap; the daemon plans its tasks without), no places hidden
 * by descriptor (stage hidden; the daemon has bubblewrap mount its masks by path), and the task
 * keeps the daemon's session keyring (KEYRING_UNSUPPORTED: `tend status` says so). A mask by path
 * fails bubblewrap when its place goes or changes kind as the task starts: with reportsSetup the
 * task counts as started only once bubblewrap is set up, so that such a failure is told apart
 * from the task's own, and the daemon plans again.
 *
 * No keeper: the task is the daemon's child and its exit is known only to the daemon (`keeper: null`,
 * exitFile ignored, attach answers ENOTSUP); a daemon that dies loses it, and the next one records
 * the task `lost`. A shell keeper (the prelude running the command in the background and `wait`ing
 * for it) cannot be exact: `wait` gives 128+N for a signal, the same as an exit with 128+N; a
 * non-interactive shell starts a background command with SIGINT and SIGQUIT ignored (POSIX), which
 * the task would inherit; and a prelude that ignores HUP and TERM hands those dispositions down too.
 */

export class NodeSpawner implements Spawner {
  readonly kind = 'node'
  readonly hidesPaths = false
  readonly reportsSetup = true

  async spawn(request: SpawnRequest): Promise<SpawnOutcome> {
    const problem = spawnRequestProblem(request)
    if (problem) return { started: false, stage: 'request', code: 'EINVAL', message: problem }
    // A stdin pipe must outlive the daemon (its keeper holds it): without keepers there is none.
    if (request.terminal) return { started: false, stage: 'tty', code: 'ENOTSUP', message: TTY_UNSUPPORTED }
    if (request.stdinFifo) return { started: false, stage: 'stdin', code: 'ENOTSUP', message: STDIN_PIPE_UNSUPPORTED }
    // Its task is the daemon's child, and outlives a daemon that dies: nothing here would end it.
    if (request.endsWithDaemon) return { started: false, stage: 'lifeline', code: 'ENOTSUP', message: LIFELINE_UNSUPPORTED }
    // Only a child that is still root can mount them; the daemon plans without them here.
    if ((request.pinnedDirs ?? []).some((pinned) => pinned.owner) || (request.idmappedViews?.length ?? 0) > 0)
      return { started: false, stage: 'idmap', code: 'ENOTSUP', message: IDMAP_UNSUPPORTED }
    // Nor can a task here get a mount namespace of its own to cover them in: the daemon has bubblewrap mount its masks instead.
    if ((request.hiddenPaths?.length ?? 0) > 0 || (request.coveredFiles?.length ?? 0) > 0)
      return { started: false, stage: 'hidden', code: 'ENOTSUP', message: HIDDEN_UNSUPPORTED }
    const cwdProblem = await checkCwd(request.cwd)
    if (cwdProblem) return { started: false, stage: 'chdir', code: 'ENOENT', message: cwdProblem }
    const userProblem = request.user && checkUser(request.user)
    if (userProblem) return userProblem
    const netnsProblem = request.netns && checkNetns(request.netns)
    if (netnsProblem) return netnsProblem
    if (request.cwdIdentity && !STAT)
      return {
        started: false,
        stage: 'chdir',
        code: 'ENOENT',
        message: `cannot check that cwd is still the folder the task was accepted with: ${request.cwd} (stat, from coreutils, is not installed)`,
      }
    const { execa } = await loadExeca()
    const descriptors: number[] = []
    try {
      const opened = openDescriptors(request, descriptors)
      if ('stage' in opened) return opened
      const subprocess = execa('/bin/sh', ['-c', prelude(request, opened.cgroupFds, opened.netns), 'tend-task', request.file, ...request.argv.slice(1)], {
        cwd: request.cwd,
        env: request.env,
        extendEnv: false,
        stdio: opened.stdio as unknown as ExecaStdio,
        detached: true,
        reject: false,
        cleanup: false,
        buffer: false,
        stripFinalNewline: false,
      })
      const pid = subprocess.pid
      if (pid === undefined) {
        const result = await subprocess
        return {
          started: false,
          stage: 'exec',
          code: String(result.code ?? 'UNKNOWN'),
          message: `could not start ${request.file}: ${result.originalMessage ?? result.shortMessage}`,
        }
      }
      const exited: Promise<SpawnExit> = subprocess.then((result) => ({
        exitCode: result.exitCode ?? null,
        signal: (result.signal as NodeJS.Signals | undefined) ?? null,
      }))
      // As a keeper does: a description of the output file open for reading while the task runs
      // leaves it no write lease to take (every read would wait out its break).
      descriptors.splice(descriptors.indexOf(opened.outputReader), 1)
      void exited.finally(() => closeSync(opened.outputReader))
      if (request.reportsSetup) {
        const waitMs = setupWaitOf(request)
        const report = await readSetupReport(subprocess.stderr, waitMs)
        if (report.setUp) return { started: true, pid, keeper: null, exited }
        // Still setting up: its whole group goes (it began a session), bubblewrap's sandbox with it.
        if (report.timedOut) killGroup(pid)
        // The prelude or the program ended without the task's command: nothing of it is left once exited settles.
        const exit = await exited
        if (report.timedOut) return setupFailure(request.file, exit, report.said, waitMs)
        if (isPreludeFailure(report.said)) return preludeFailure(report.said, request)
        return setupFailure(request.file, exit, report.said)
      }
      const said = await readToEnd(subprocess.stdout)
      if (said) {
        // The prelude exits right after saying why: nothing of it is left once exited settles.
        await exited
        return preludeFailure(said, request)
      }
      return { started: true, pid, keeper: null, exited }
    } finally {
      for (const fd of descriptors) closeSync(fd)
    }
  }

  /** No keepers here (see the class comment): nothing to attach to. */
  async attach(): Promise<AttachOutcome> {
    return { attached: false, code: 'ENOTSUP', message: 'the node spawner has no keepers: a task it started cannot be watched by another daemon' }
  }

  async close(): Promise<void> {}
}

/**
 * fd 0 ignored (/dev/null), fd 1 the prelude's report pipe (the output file once it execs), fd 2
 * the output file (the other way round when the program reportsSetup: fd 2 is then the report
 * pipe, and the program's own error output, up to the exec of the task's command), then the
 * layout: extra files, data (written by execa and ended), pinned folders; after them each cgroup's
 * `tasks` file (cgroupFds: their numbers in the child), which the prelude writes and closes. Every
 * descriptor opened here is pushed to `opened`, for the caller to close after the spawn.
 */
function openDescriptors(
  request: SpawnRequest,
  opened: number[],
): { stdio: StdioEntry[]; cgroupFds: number[]; outputReader: number; netns: NamespaceFds | null } | Failure {
  const open = (path: string, flags: string | number): number => {
    const fd = openSync(path, flags, 0o600)
    opened.push(fd)
    return fd
  }
  const layout = descriptorLayout(request)
  const [output, report] = request.reportsSetup ? [1, 2] : [2, 1]
  const stdio: StdioEntry[] = ['ignore']
  stdio[report] = 'pipe'
  let outputReader: number
  try {
    // Never through a link, never waiting on a FIFO, a regular file only (the native spawner's regular.c).
    stdio[output] = open(request.outputFile, OUTPUT_FLAGS)
    outputReader = open(request.outputFile, OUTPUT_READER_FLAGS)
    if (!fstatSync(stdio[output] as number).isFile()) throw Object.assign(new Error('not a regular file'), { code: 'ENXIO' })
  } catch (error) {
    const code = errorCode(error)
    const message =
      code === 'ENXIO'
        ? `the output file ${request.outputFile} is not a regular file (a FIFO, socket or device put in its place?)`
        : `could not open the output file ${request.outputFile}: ${code}`
    return { started: false, stage: 'output', code, message }
  }
  for (const [index, file] of request.extraFiles.entries()) {
    try {
      stdio[layout.extra[index]!] = open(file, 'r')
    } catch (error) {
      const code = errorCode(error)
      return { started: false, stage: 'extra', code, message: `could not open ${file}: ${code}` }
    }
  }
  for (const [index, data] of (request.dataFiles ?? []).entries()) stdio[layout.data[index]!] = new Uint8Array(data.buffer, data.byteOffset, data.length)
  for (const [index, pinned] of (request.pinnedDirs ?? []).entries()) {
    const fd = openPinned(pinned, opened)
    if (typeof fd === 'string') return { started: false, stage: 'pinned', code: fd, message: pinnedDirFailure(pinned.path, fd) }
    stdio[layout.pinned[index]!] = fd
  }
  const cgroupFds: number[] = []
  for (const group of request.cgroups) {
    const fd = openCgroupTasks(group, opened)
    if (typeof fd === 'string') return { started: false, stage: 'cgroup', code: fd, message: cgroupFailure(group.path, fd) }
    cgroupFds.push(stdio.length)
    stdio.push(fd)
  }
  // After the cgroups' tasks files, whose numbers the shell writes to (dash takes only 0 to 9 there); nsenter opens these by /proc/self/fd.
  let netnsFd: number | null = null
  let usernsFd: number | null = null
  if (request.netns) {
    const { userns } = request.netns
    if (userns) {
      const fd = openNamespace(userns, opened)
      if (typeof fd === 'string') return { started: false, stage: 'netns', code: fd, message: netnsFailure(request.netns.path, fd) }
      usernsFd = stdio.length
      stdio.push(fd)
    }
    const fd = openNamespace(request.netns, opened)
    if (typeof fd === 'string') return { started: false, stage: 'netns', code: fd, message: netnsFailure(request.netns.path, fd) }
    netnsFd = stdio.length
    stdio.push(fd)
  }
  return { stdio, cgroupFds, outputReader, netns: netnsFd === null ? null : { net: netnsFd, user: usernsFd } }
}

/**
 * The `tasks` file of a cgroup folder, opened for writing from that very folder: the folder opened
 * without following a symbolic link (ELOOP when one is anywhere in its path: the kernel's name for
 * it must be the path itself), checked against the identity and owner it was made with (ESTALE),
 * and the file opened through the folder's descriptor, never by its path again. Or the errno name.
 */
function openCgroupTasks(group: CgroupJoin, opened: number[]): number | string {
  const dir = openPinned(group, opened)
  if (typeof dir === 'string') return dir
  try {
    if (fstatSync(dir, { bigint: true }).uid !== BigInt(group.uid)) return 'ESTALE'
    const tasks = openJoinFile(dir)
    opened.push(tasks)
    return tasks
  } catch (error) {
    return errorCode(error)
  }
}

/** The file a process joins a group by, from its folder's descriptor: `tasks` (v1), or cgroup.procs (v2, which has no `tasks`). */
function openJoinFile(dir: number): number {
  const flags = fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK
  try {
    return openSync(`/proc/self/fd/${dir}/tasks`, flags)
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error
    return openSync(`/proc/self/fd/${dir}/cgroup.procs`, flags)
  }
}

const OUTPUT_FLAGS = fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY
const OUTPUT_READER_FLAGS = fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY

type StdioEntry = 'ignore' | 'pipe' | number | Uint8Array
// execa passes any numeric descriptor through to the child; its types only list 3..9.
type ExecaStdio = ['ignore', 'pipe', 3, ...(3 | Uint8Array)[]]

/**
 * The pinned folder opened O_PATH without following its last component, or the errno name: ELOOP
 * when a symbolic link is anywhere in its path (the kernel's name for it must be the path itself),
 * ESTALE when it is another directory.
 */
function openPinned(pinned: Pick<PinnedDir, 'path' | 'dev' | 'ino'>, opened: number[]): number | string {
  let fd: number
  try {
    fd = openSync(pinned.path, PINNED_DIR_FLAGS)
  } catch (error) {
    const code = errorCode(error)
    // O_PATH|O_NOFOLLOW opens a symbolic link itself, which O_DIRECTORY then refuses.
    if (code === 'ENOTDIR' && isSymbolicLink(pinned.path)) return 'ELOOP'
    return code
  }
  opened.push(fd)
  try {
    if (readlinkSync(`/proc/self/fd/${fd}`) !== pinned.path) return 'ELOOP'
    const info = fstatSync(fd, { bigint: true })
    return String(info.dev) === pinned.dev && String(info.ino) === pinned.ino ? fd : 'ESTALE'
  } catch (error) {
    return errorCode(error)
  }
}

/** The child's descriptors of the network namespace it joins, and of the user namespace that owns it (an unprivileged daemon's). */
interface NamespaceFds {
  net: number
  user: number | null
}

/** The network namespace, opened by its path and checked to be that very one (ESTALE otherwise), or the errno name. */
function openNamespace(namespace: { path: string; dev: string; ino: string }, opened: number[]): number | string {
  try {
    const fd = openSync(namespace.path, fsConstants.O_RDONLY)
    opened.push(fd)
    const info = fstatSync(fd, { bigint: true })
    return String(info.dev) === namespace.dev && String(info.ino) === namespace.ino ? fd : 'ESTALE'
  } catch (error) {
    return errorCode(error)
  }
}

/** A namespace this daemon cannot enter: nsenter (util-linux) is missing, or it is another user's and not in a user namespace of this daemon's. */
function checkNetns(netns: NonNullable<SpawnRequest['netns']>): Failure | null {
  if (!NSENTER)
    return {
      started: false,
      stage: 'netns',
      code: 'ENOENT',
      message: 'nsenter (util-linux) is not installed, and the node spawner needs it to join a private network',
    }
  if (process.getuid?.() !== 0 && !netns.userns)
    return { started: false, stage: 'netns', code: 'EPERM', message: 'an unprivileged daemon joins only a private network of its own user namespace' }
  return null
}

function netnsFailure(path: string, code: string): string {
  return code === 'ESTALE'
    ? `the private network the task was to join (${path}) is gone; it was not given another`
    : `could not join the task's private network ${path}: ${code}`
}

/**
 * The shell prelude: limits, cgroups (on the descriptors cgroupFds), the cwd check, then the exec
 * (through nsenter into its network, setpriv for another user).
 */
function prelude(request: SpawnRequest, cgroupFds: number[], netns: NamespaceFds | null): string {
  const fileSizeBlocks = Math.ceil(request.limits.fileSizeBytes / 512)
  // Failures are said on the report pipe: fd 1, or fd 2 where the program reports its setup.
  const say = request.reportsSetup ? ' >&2' : ''
  const steps = [`ulimit -c 0; ulimit -n ${request.limits.openFiles}; ulimit -f ${fileSizeBlocks}`]
  // Each `tasks` file is closed once written: the task never holds it.
  for (const [index, fd] of cgroupFds.entries()) steps.push(`{ echo $$ >&${fd}; } 2>/dev/null || { echo cgroup EIO ${index}${say}; exit 125; }; exec ${fd}>&-`)
  if (request.cwdIdentity) {
    const { dev, ino } = request.cwdIdentity
    steps.push(`[ "$(${shellQuote(STAT!)} -c %d:%i .)" = ${dev}:${ino} ] || { echo chdir ESTALE${say}; exit 125; }`)
  }
  const { user } = request
  const drop = user ? `${shellQuote(SETPRIV!)} --reuid=${user.uid} --regid=${user.gid} --clear-groups -- ` : ''
  // The user namespace first (it owns the network's); the daemon's ids are kept there, which map to themselves.
  const enterUser = netns?.user != null ? `--user=/proc/self/fd/${netns.user} --preserve-credentials ` : ''
  const enter = netns ? `${shellQuote(NSENTER!)} ${enterUser}--net=/proc/self/fd/${netns.net} -- ` : ''
  // `1>&2`: stdout joins stderr on the output file, which ends the report pipe. A program that
  // reportsSetup keeps the pipe, as fd 2, until it execs the task's command.
  steps.push(`exec ${enter}${drop}"$@"${request.reportsSetup ? '' : ' 1>&2'}`)
  return steps.join('; ')
}

/** A switch of user this daemon cannot make, or null. */
function checkUser(user: { uid: number; gid: number }): Failure | null {
  if (!SETPRIV)
    return { started: false, stage: 'user', code: 'ENOENT', message: userFailure(user, 'setpriv (util-linux) is not installed, and the node spawner needs it') }
  const same = process.getuid?.() === user.uid && process.getgid?.() === user.gid
  // setpriv would fail only after the prelude has stopped reporting: refuse what cannot work.
  if (process.getuid?.() !== 0 && !same) return { started: false, stage: 'user', code: 'EPERM', message: userFailure(user, 'EPERM (the daemon is not root)') }
  return null
}

/** What the prelude said on its report pipe ('' when it exec'd without a word). */
async function readToEnd(stream: Readable | null): Promise<string> {
  if (!stream) return ''
  let said = ''
  stream.setEncoding('utf8')
  try {
    for await (const chunk of stream) said += chunk as string
  } catch {
    // A broken pipe ends the report like EOF: whatever came before it still counts.
  }
  return said.trim()
}

/**
 * What a program that reportsSetup said on the report pipe: setUp once SETUP_DONE came (the rest
 * of the pipe is drained, unread, until the program's end: its error output), else all it said up
 * to its end.
 */
async function readSetupReport(stream: Readable | null, waitMs: number): Promise<{ setUp: boolean; timedOut: boolean; said: string }> {
  if (!stream) return { setUp: false, timedOut: false, said: '' }
  // The line counts only as a line of its own (bubblewrap may name a path that holds it): a newline
  // before it, or the report's start, which this one stands for (trimmed away with the rest).
  let said = '\n'
  stream.setEncoding('utf8')
  const done = `\n${SETUP_DONE}\n`
  let timer: NodeJS.Timeout | undefined
  const outcome = await new Promise<'set-up' | 'ended' | 'timed-out'>((resolve) => {
    const onData = (chunk: string) => {
      // Only bubblewrap and the prelude write here before it: a few lines. More is kept only to its
      // last lines, once searched: a chunk may hold the line and more after it.
      const joined = said + chunk
      said = joined.slice(-REPORT_KEPT)
      if (!joined.includes(done)) return
      stream.off('data', onData)
      resolve('set-up')
    }
    stream.on('data', onData)
    stream.once('end', () => resolve('ended'))
    // A broken pipe ends the report like EOF: whatever came before it still counts.
    stream.once('error', () => resolve('ended'))
    timer = setTimeout(() => resolve('timed-out'), waitMs)
  })
  clearTimeout(timer)
  if (outcome === 'set-up') stream.resume()
  return { setUp: outcome === 'set-up', timedOut: outcome === 'timed-out', said: said.trim() }
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {
    // Gone already: its end settles `exited` all the same.
  }
}

const REPORT_KEPT = 8192

/** Whether the prelude said why it stopped (a step of its own failed), rather than the program. */
function isPreludeFailure(said: string): boolean {
  return /^(cgroup|chdir) [A-Z]+( \d+)?$/.test(said)
}

function preludeFailure(said: string, request: SpawnRequest): Failure {
  const [stage = 'exec', code = 'UNKNOWN', index] = said.split(/\s+/)
  if (stage === 'chdir' && code === 'ESTALE') return { started: false, stage, code, message: cwdChangedFailure(request.cwd) }
  if (stage === 'cgroup') return { started: false, stage, code, message: cgroupFailure(request.cgroups[Number(index)]?.path ?? '', code) }
  return { started: false, stage, code, message: `could not start ${request.file} (${stage}): ${code}` }
}

function errorCode(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? 'UNKNOWN'
}

function isSymbolicLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink()
  } catch {
    return false
  }
}

function firstExisting(paths: string[]): string | undefined {
  return paths.find((path) => existsSync(path))
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}
