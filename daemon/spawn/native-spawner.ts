import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants as fsConstants, existsSync, mkdirSync, statSync } from 'node:fs'
import type { Socket } from 'node:net'
import { constants as osConstants } from 'node:os'
import { join, resolve as resolvePath } from 'node:path'
import { fileURLToPath } from 'node:url'
import { endedBy, exitOf, lostWord, readExitFile, signalName, withLostOutput } from './exit-file.js'
import {
  cgroupFailure,
  cwdChangedFailure,
  dataFileFailure,
  descriptorLayout,
  hiddenFailure,
  idmapFailure,
  keyringFailure,
  pinnedDirFailure,
  spawnRequestProblem,
  userFailure,
  type AttachOutcome,
  type AttachRequest,
  type KeeperRef,
  type PinnedDir,
  type SpawnExit,
  type SpawnOutcome,
  type SpawnRequest,
  type Spawner,
} from './spawner.js'

/** Where the helper's complaints go (a pino logger fits). */
export interface SpawnerLog {
  warn(obj: object, msg: string): void
  error(obj: object, msg: string): void
}

/** How long close() waits for the helper to exit on its own before it is killed. */
const CLOSE_GRACE_MS = 2000

/** The helper's own environment: fixed, never the daemon's (its children get exactly their request's). */
const HELPER_ENV = Object.freeze({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin' })

/** The wire's limit on one request (MAX_PAYLOAD in the C file). */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024

/** The wire's limit on extra files, in-memory files and pinned folders together. */
const MAX_DESCRIPTORS = 1024

/** The wire's limits on an exit file's path and on its last component (MAX_EXIT_PATH, NAME_MAX). */
const MAX_EXIT_PATH_BYTES = 4000
const MAX_EXIT_NAME_BYTES = 255

/** How long the helper may take to answer a ping before it is taken for stopped or wedged, and replaced. */
const HELPER_ANSWER_MS = 2000

/** How often a spawn or attach without an answer has the helper pinged (a keeper may take long; the helper never should). */
const REQUEST_CHECK_MS = 3000

/** How many helpers in a row may die before one of them attached to a task's keeper again; a successful attach starts the count anew. */
const MAX_REATTACH = 3

/**
 * The native spawner: a small C helper (daemon/spawner/tend-spawner.c, built at install) that the
 * daemon starts once and sends spawn requests to over a pipe. For every task it forks a keeper from
 * its own tiny address space; the keeper sets the child up (session, limits, cgroups, descriptors,
 * idmapped folders, cwd, user, a session keyring of its own), execs it, becomes its parent, and outlives the helper and the daemon: when the task
 * ends it writes the exit file and tells the helper, which reports the exit. The daemon's thread
 * only writes one request and parses a few short lines per task. The wire protocol is described at
 * the top of the C file.
 *
 * If the helper dies (the daemon living on), pending spawns fail with stage `spawner`, and the next
 * request starts a new helper, which attaches to the keepers of the running children: their
 * `exited` promises still settle with the real exit (at most MAX_REATTACH times in a row; after that,
 * and when the spawner is closed, they reject: their exit is then unknown to this daemon).
 */
export class NativeSpawner implements Spawner {
  readonly kind = 'native'
  /** Its keeper reports the exec of bubblewrap, not the end of its setup: the daemon has no setup to wait for (see SpawnRequest.reportsSetup). */
  readonly reportsSetup = false
  private helper: Helper | null = null
  private hiding = false
  private closed = false
  private nextId = 1

  private constructor(
    private readonly binary: string,
    private readonly log: SpawnerLog | undefined,
  ) {}

  /** The helper built beside this module's folder (dist/daemon/spawner/tend-spawner), or null if it is missing. */
  static binaryPath(): string | null {
    const path = fileURLToPath(new URL('../spawner/tend-spawner', import.meta.url))
    try {
      accessSync(path, fsConstants.X_OK)
      return statSync(path).isFile() ? path : null
    } catch {
      return null
    }
  }

  /** Starts the helper; rejects if it cannot be started at all. */
  static async start(binary: string, log?: SpawnerLog): Promise<NativeSpawner> {
    const spawner = new NativeSpawner(binary, log)
    const helper = spawner.launch()
    await helper.ready
    return spawner
  }

  /** Whether spawn() takes hiddenPaths here: false until checkHiding() has proved it. */
  get hidesPaths(): boolean {
    return this.hiding
  }

  /**
   * Proves, with one spawn of `true` that hides a folder made in `scratch` (an empty folder of the
   * caller's), that this helper's children can hide places: they must be root, with the right to
   * make a mount namespace (CAP_SYS_ADMIN, which a container may withhold). Answers why not, or null
   * once hidesPaths is true.
   */
  async checkHiding(scratch: string): Promise<string | null> {
    if (process.getuid?.() !== 0) return 'the daemon is not root: its spawner\'s children cannot mount'
    const place = join(scratch, 'hidden')
    mkdirSync(place)
    const outcome = await this.spawn({ file: '/bin/true', argv: ['true'], env: {}, cwd: '/', outputFile: join(scratch, 'output.log'), exitFile: '', extraFiles: [], cgroups: [], limits: { openFiles: 64, fileSizeBytes: 1024 * 1024 }, hiddenPaths: [place] })
    if (!outcome.started) return outcome.message
    const exit = await outcome.exited
    if (exit.exitCode !== 0) return `true ended with ${exit.signal ?? `exit code ${exit.exitCode}`}`
    this.hiding = true
    return null
  }

  /** The helper's pid (undefined while none runs): for tests and diagnostics. */
  get helperPid(): number | undefined {
    return this.helper?.child.pid
  }

  spawn(request: SpawnRequest): Promise<SpawnOutcome> {
    if (this.closed) return Promise.resolve(spawnerFailure('the native spawner is closed'))
    if (request.reportsSetup) return Promise.resolve({ started: false, stage: 'request', code: 'EINVAL', message: 'reportsSetup: the native spawner does not wait for a setup report' })
    const id = this.nextId++
    const encoded = encodeRequest(id, request)
    if (typeof encoded === 'string') return Promise.resolve({ started: false, stage: 'request', code: 'EINVAL', message: encoded })
    const helper = this.helper ?? this.launch()
    const check = this.checkWhileWaiting()
    return new Promise<SpawnOutcome>((resolve) => {
      helper.pending.set(id, { resolve, request })
      helper.stdin.write(encoded)
    }).finally(check)
  }

  /**
   * Pings the helper; one that does not answer within HELPER_ANSWER_MS (stopped, wedged) is killed
   * and so replaced: what waited on it settles as for a helper that died, and the keepers of its
   * running tasks are attached to again through the next one.
   */
  prod(): void {
    if (!this.closed) this.helper?.ping(HELPER_ANSWER_MS)
  }

  /** While a request waits for its answer, the helper is pinged every REQUEST_CHECK_MS; answers the stop. */
  private checkWhileWaiting(): () => void {
    const timer = setInterval(() => this.prod(), REQUEST_CHECK_MS)
    timer.unref()
    return () => clearInterval(timer)
  }

  attach(request: AttachRequest): Promise<AttachOutcome> {
    return this.sendAttach(request, 0)
  }

  private sendAttach(request: AttachRequest, generation: number): Promise<AttachOutcome> {
    if (this.closed) return Promise.resolve({ attached: false, code: 'ESPAWNER', message: 'the native spawner is closed' })
    const problem = attachProblem(request)
    if (problem) return Promise.resolve({ attached: false, code: 'EINVAL', message: problem })
    const id = this.nextId++
    const { keeper, taskPid, exitFile } = request
    const helper = this.helper ?? this.launch()
    const check = this.checkWhileWaiting()
    return new Promise<AttachOutcome>((resolve) => {
      helper.pendingAttaches.set(id, { resolve, request, generation })
      helper.stdin.write(frame(['attach', String(id), String(keeper.pid), String(keeper.startTicks), String(taskPid), exitFile]))
    }).finally(check)
  }

  /** A dead helper's running children: each keeper is attached to again, through a new helper. */
  private reattach(orphans: RunningChild[]): void {
    for (const orphan of orphans) {
      const { taskPid, keeper, exitFile, generation } = orphan
      if (!keeper || generation >= MAX_REATTACH) {
        orphan.reject(new Error(`the native spawner died ${generation + 1} times in a row: the exit of pid ${taskPid} is unknown`))
        continue
      }
      void this.sendAttach({ keeper, taskPid, exitFile }, generation + 1).then((outcome) => {
        if (outcome.attached) return outcome.exited.then(orphan.resolve, orphan.reject)
        // That helper died too before it answered: one more in a row, tried again through the next.
        if (outcome.code === 'ESPAWNER' && !this.closed) return this.reattach([{ ...orphan, generation: generation + 1 }])
        if (outcome.code !== 'ESRCH') return orphan.reject(new Error(`the native spawner died, and the keeper of pid ${taskPid} could not be watched again: ${outcome.message}`))
        // The keeper is gone already: its exit file says how the task ended.
        const recorded = exitFile ? readExitFile(exitFile) : null
        if (recorded && recorded.pid === taskPid) return orphan.resolve(exitOf(recorded))
        return orphan.resolve(UNKNOWN_EXIT)
      })
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const helper = this.helper
    this.helper = null
    if (!helper) return
    helper.closing = true
    helper.stdin.end()
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), CLOSE_GRACE_MS)
    })
    const late = await Promise.race([helper.gone.then(() => false), timedOut])
    clearTimeout(timer)
    if (late) {
      this.log?.warn({ pid: helper.child.pid }, `the native spawner did not exit within ${CLOSE_GRACE_MS}ms of its stdin closing; killing it`)
      helper.child.kill('SIGKILL')
      await helper.gone
    }
  }

  private launch(): Helper {
    const helper = new Helper(this.binary, this.log, (gone, orphans) => {
      if (this.helper === gone) this.helper = null
      this.reattach(orphans)
    })
    this.helper = helper
    return helper
  }
}

interface PendingSpawn {
  resolve: (outcome: SpawnOutcome) => void
  request: SpawnRequest
}

interface PendingAttach {
  resolve: (outcome: AttachOutcome) => void
  request: AttachRequest
  generation: number
}

interface RunningChild {
  resolve: (exit: SpawnExit) => void
  reject: (error: Error) => void
  taskPid: number
  keeper: KeeperRef | null
  exitFile: string
  /** How many helpers died under it, one after another, since it was last started or attached to. */
  generation: number
}

const UNKNOWN_EXIT: SpawnExit = Object.freeze({ exitCode: null, signal: null, unknown: true as const })

/** One helper process and what it is doing for us. */
class Helper {
  readonly child: ChildProcess
  readonly stdin: Socket
  readonly pending = new Map<number, PendingSpawn>()
  readonly pendingAttaches = new Map<number, PendingAttach>()
  /**
   * By task pid; each watcher gets one `exited` line (a task this helper both started and was asked
   * to attach to has two watchers, and two lines).
   */
  readonly running = new Map<number, RunningChild[]>()
  /** Resolves once the helper has been started (rejects if it could not be). */
  readonly ready: Promise<void>
  /** Resolves once the helper is gone and everything waiting on it has been settled. */
  readonly gone: Promise<void>
  closing = false
  private dead = false
  /** The ping in flight (at most one): its id, and the timer that kills the helper if no pong comes. */
  private pinging: { id: string; timer: NodeJS.Timeout } | null = null
  private pings = 0
  /** Set when the helper was killed for not answering a ping within that many ms. */
  private unanswered: number | null = null
  private stdoutRest = ''
  private stderrRest = ''
  private markGone!: () => void

  constructor(
    binary: string,
    private readonly log: SpawnerLog | undefined,
    /** Called once, when the helper is gone, with the running children whose keepers live on (none when closing). */
    private readonly onGone: (helper: Helper, orphans: RunningChild[]) => void,
  ) {
    this.gone = new Promise((resolve) => (this.markGone = resolve))
    this.child = spawn(binary, [String(process.pid)], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...HELPER_ENV } })
    const stdout = this.child.stdout as Socket
    const stderr = this.child.stderr as Socket
    this.stdin = this.child.stdin as Socket
    // The helper never keeps the daemon alive: it dies with it (PR_SET_PDEATHSIG) anyway.
    this.child.unref()
    this.stdin.unref()
    stdout.unref()
    stderr.unref()
    stdout.setEncoding('latin1')
    stderr.setEncoding('utf8')
    stdout.on('data', (chunk: string) => this.onStdout(chunk))
    stderr.on('data', (chunk: string) => this.onStderr(chunk))
    // A dead helper shows up as EPIPE here; 'close' below settles everything.
    this.stdin.on('error', () => {})
    stdout.on('error', () => {})
    stderr.on('error', () => {})
    this.ready = new Promise((resolve, reject) => {
      this.child.once('spawn', () => resolve())
      this.child.once('error', (error) => reject(new Error(`could not start the native spawner ${binary}: ${error.message}`)))
    })
    this.ready.catch(() => {})
    this.child.on('error', (error) => this.die(`it could not be started or signalled: ${error.message}`))
    this.child.on('close', (code, signal) =>
      this.die(this.unanswered !== null ? `it did not answer within ${this.unanswered}ms, stopped or wedged, and was killed` : signal ? `it was killed by ${signal}` : `it exited with code ${code}`),
    )
  }

  private onStdout(chunk: string): void {
    const text = this.stdoutRest + chunk
    let start = 0
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
      this.onLine(text.slice(start, end))
      start = end + 1
    }
    this.stdoutRest = start === text.length ? '' : text.slice(start)
  }

  private onStderr(chunk: string): void {
    const lines = (this.stderrRest + chunk).split('\n')
    this.stderrRest = lines.pop() ?? ''
    for (const line of lines) if (line) this.log?.warn({ spawner: this.child.pid }, `native spawner: ${line}`)
  }

  /** Sends a ping; no pong within answerMs: the helper is SIGKILLed (its pid is our unreaped child's). */
  ping(answerMs: number): void {
    if (this.dead || this.pinging) return
    const id = `ping-${++this.pings}`
    const timer = setTimeout(() => {
      this.log?.error({ pid: this.child.pid, answerMs }, 'the native spawner did not answer a ping (stopped or wedged); killing it, a new one takes over its tasks')
      this.unanswered = answerMs
      this.child.kill('SIGKILL')
    }, answerMs)
    timer.unref()
    this.pinging = { id, timer }
    this.stdin.write(frame(['ping', id]))
  }

  private onLine(line: string): void {
    const parts = line.split(' ')
    switch (parts[0]) {
      case 'pong':
        if (this.pinging?.id === parts[1]) {
          clearTimeout(this.pinging.timer)
          this.pinging = null
        }
        return
      case 'started': {
        const id = Number(parts[1])
        const pid = Number(parts[2])
        const waiting = this.pending.get(id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(id)
        const keeper = parts[3] === undefined ? null : { pid: Number(parts[3]), startTicks: Number(parts[4]) }
        const exitFile = waiting.request.exitFile ?? ''
        const exited = new Promise<SpawnExit>((resolve, reject) => this.watch({ resolve, reject, taskPid: pid, keeper, exitFile, generation: 0 }))
        return waiting.resolve({ started: true, pid, keeper, exited })
      }
      case 'attached': {
        const id = Number(parts[1])
        const waiting = this.pendingAttaches.get(id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pendingAttaches.delete(id)
        const { keeper, taskPid, exitFile } = waiting.request
        // Attached: the helpers that died before this one no longer count. Only helpers that die one
        // after another before any of them could attach give up on the task, never churn spread out.
        const exited = new Promise<SpawnExit>((resolve, reject) => this.watch({ resolve, reject, taskPid, keeper, exitFile, generation: 0 }))
        return waiting.resolve({ attached: true, exited })
      }
      case 'exited': {
        const pid = Number(parts[1])
        const code = Number(parts[2])
        const watchers = this.running.get(pid)
        const running = watchers?.shift()
        if (!running) return this.log?.warn({ line }, 'native spawner: exit of an unknown child')
        if (watchers!.length === 0) this.running.delete(pid)
        if (code === -2) return running.resolve(UNKNOWN_EXIT)
        const exit: SpawnExit = code === -1 ? { exitCode: null, signal: signalName(Number(parts[3])) } : { exitCode: code, signal: null }
        const words = parts.slice(4)
        return running.resolve(withLostOutput(endedBy(exit, words.includes('lifeline'), words.includes('lease')), lostWord(words)))
      }
      case 'failed': {
        const id = Number(parts[1])
        if (parts[2] === 'attach') {
          const attaching = this.pendingAttaches.get(id)
          if (!attaching) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
          this.pendingAttaches.delete(id)
          const code = errnoName(Number(parts[3]))
          return attaching.resolve({ attached: false, code, message: attachFailure(attaching.request, code) })
        }
        const waiting = this.pending.get(id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(id)
        const stage = parts[2] ?? 'exec'
        const code = errnoName(Number(parts[3]))
        const index = parts[4] === undefined ? undefined : Number(parts[4])
        // A keeper killed before it reported may have started its task: as for a helper that died
        // mid-spawn, the daemon looks for what is left of it.
        if (stage === 'keeper') return waiting.resolve({ started: false, stage: 'spawner', code, message: `the task's keeper was killed before it reported the start of ${waiting.request.file}` })
        return waiting.resolve({ started: false, stage, code, message: failureMessage(stage, code, index, waiting.request) })
      }
      case 'error':
        // The helper exits 2 right after: 'close' settles what was waiting on it.
        return this.log?.error({ line }, 'native spawner rejected a request')
      default:
        return this.log?.warn({ line }, 'native spawner: unexpected output')
    }
  }

  private watch(running: RunningChild): void {
    const watchers = this.running.get(running.taskPid)
    if (watchers) watchers.push(running)
    else this.running.set(running.taskPid, [running])
  }

  private die(reason: string): void {
    if (this.dead) return
    this.dead = true
    if (this.pinging) clearTimeout(this.pinging.timer)
    const what = this.closing ? `the native spawner was closed` : `the native spawner died (${reason})`
    if (!this.closing) this.log?.error({ pid: this.child.pid, pending: this.pending.size, running: this.running.size }, what)
    for (const waiting of this.pending.values()) waiting.resolve(spawnerFailure(`${what} before the task started`))
    this.pending.clear()
    for (const waiting of this.pendingAttaches.values()) waiting.resolve({ attached: false, code: 'ESPAWNER', message: `${what} before it answered` })
    this.pendingAttaches.clear()
    // Keepers outlive their helper: unless the spawner is being closed, a new helper watches them.
    const orphans: RunningChild[] = []
    for (const [pid, watchers] of this.running) {
      for (const running of watchers) {
        if (!this.closing && running.keeper) orphans.push(running)
        else running.reject(new Error(`${what}: the exit of pid ${pid} is unknown`))
      }
    }
    this.running.clear()
    this.onGone(this, orphans)
    this.markGone()
  }
}

function spawnerFailure(message: string): SpawnOutcome {
  return { started: false, stage: 'spawner', code: 'ESPAWNER', message }
}

/** What the wire cannot carry in an exit file's path ('' allowed for none when optional), or null. */
function exitFileProblem(path: unknown, optional: boolean): string | null {
  if (typeof path !== 'string') return `exitFile must be a string, got ${typeof path}`
  if (path === '' && optional) return null
  if (!path.startsWith('/')) return `exitFile must be an absolute path, got ${JSON.stringify(path)}`
  if (path.includes('\0')) return 'exitFile contains a NUL byte'
  const name = path.slice(path.lastIndexOf('/') + 1)
  if (name === '' || name === '.' || name === '..') return `exitFile must name a file, got ${JSON.stringify(path)}`
  if (Buffer.byteLength(path) > MAX_EXIT_PATH_BYTES || Buffer.byteLength(name) > MAX_EXIT_NAME_BYTES) return `exitFile is too long: ${JSON.stringify(path.slice(0, 80))}...`
  return null
}

/** What the wire cannot carry in a stdin FIFO's path (undefined: none), or null. */
function stdinFifoProblem(path: string | undefined): string | null {
  if (path === undefined) return null
  const problem = exitFileProblem(path, false)
  return problem && problem.replace(/^exitFile/, 'stdinFifo')
}

/** What the wire cannot carry in a terminal (undefined: none), or null. */
function terminalProblem(request: SpawnRequest): string | null {
  const { terminal } = request
  if (terminal === undefined) return null
  if (request.stdinFifo === undefined) return 'a terminal needs a stdinFifo (its input)'
  for (const key of ['cols', 'rows'] as const) {
    const value = terminal[key]
    if (!Number.isInteger(value) || value < 1 || value > 65535) return `terminal.${key} must be an integer from 1 to 65535, got ${value}`
  }
  const problem = exitFileProblem(terminal.resizeFifo, false)
  return problem && problem.replace(/^exitFile/, 'terminal.resizeFifo')
}

function attachProblem(request: AttachRequest): string | null {
  const { keeper, taskPid } = request
  if (!keeper || !isPid(keeper.pid)) return `keeper.pid must be a positive integer, got ${keeper?.pid}`
  if (!Number.isSafeInteger(keeper.startTicks) || keeper.startTicks < 0) return `keeper.startTicks must be a non-negative integer, got ${keeper.startTicks}`
  if (!isPid(taskPid)) return `taskPid must be a positive integer, got ${taskPid}`
  // '' is allowed (a task spawned without an exit file): its keeper is watched, its exit unknown.
  return exitFileProblem(request.exitFile, true)
}

function isPid(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 && value <= 0x7fffffff
}

function attachFailure(request: AttachRequest, code: string): string {
  const keeper = `the keeper ${request.keeper.pid} of pid ${request.taskPid}`
  if (code === 'ESRCH') return `${keeper} is gone (no such process, or another one has its pid now)`
  if (code === 'ENOSYS') return `cannot watch ${keeper}: pidfd_open is missing (Linux 5.3 or later is needed)`
  return `cannot watch ${keeper}: ${code}`
}

/** One framed request of plain string fields. */
function frame(all: string[]): Buffer {
  const text = `${all.join('\0')}\0`
  const size = Buffer.byteLength(text)
  const framed = Buffer.allocUnsafe(4 + size)
  framed.writeUInt32LE(size, 0)
  framed.write(text, 4)
  return framed
}

// ---------------------------------------------------------------------------------- requests

/** The request's string fields in wire order (see the C file): counts before each list; the blobs follow. */
function fields(id: number, request: SpawnRequest): string[] {
  const env = Object.entries(request.env).map(([key, value]) => `${key}=${value}`)
  const { argv, extraFiles, cgroups, cwdIdentity, user } = request
  const pinnedDirs = request.pinnedDirs ?? []
  const views = request.idmappedViews ?? []
  const hidden = request.hiddenPaths ?? []
  const folder = (pinned: PinnedDir) => [pinned.path, pinned.dev, pinned.ino, pinned.owner ? String(pinned.owner.uid) : '', pinned.owner ? String(pinned.owner.gid) : '']
  // A task with a stdin FIFO, or a terminal, is a request of its own kind; the plain one stays as it was.
  // A task that ends with its daemon has +lifeline after its kind.
  const { stdinFifo, terminal } = request
  const lifeline = request.endsWithDaemon ? '+lifeline' : ''
  const kind =
    terminal && stdinFifo !== undefined
      ? [`spawn-tty${lifeline}`, String(id), request.exitFile ?? '', stdinFifo, terminal.resizeFifo, String(terminal.cols), String(terminal.rows)]
      : stdinFifo !== undefined
        ? [`spawn-stdin${lifeline}`, String(id), request.exitFile ?? '', stdinFifo]
        : [`spawn${lifeline}`, String(id), request.exitFile ?? '']
  return [
    ...kind, request.file, request.cwd, request.outputFile, String(request.limits.openFiles), String(request.limits.fileSizeBytes),
    cwdIdentity?.dev ?? '', cwdIdentity?.ino ?? '', user ? String(user.uid) : '', user ? String(user.gid) : '',
    String(argv.length), ...argv,
    String(env.length), ...env,
    String(extraFiles.length), ...extraFiles,
    String(cgroups.length), ...cgroups.flatMap((group) => [group.path, group.dev, group.ino, String(group.uid)]),
    String(pinnedDirs.length), ...pinnedDirs.flatMap(folder),
    String(views.length), ...views.flatMap(folder),
    String(hidden.length), ...hidden,
    String(request.dataFiles?.length ?? 0),
  ]
}

/** The framed request (length, then NUL-terminated fields, then each blob as its length and raw bytes), or what is wrong with it. */
function encodeRequest(id: number, request: SpawnRequest): Buffer | string {
  if (!request.file) return 'the program path is empty'
  if (request.argv.length === 0) return 'argv is empty (it must hold argv[0])'
  const { openFiles, fileSizeBytes } = request.limits
  if (!Number.isSafeInteger(openFiles) || openFiles < 0) return `invalid open files limit: ${openFiles}`
  if (!Number.isSafeInteger(fileSizeBytes) || fileSizeBytes < 0) return `invalid file size limit: ${fileSizeBytes}`
  for (const key of Object.keys(request.env)) {
    if (key === '' || key.includes('=')) return `environment variable name ${JSON.stringify(key)} is empty or contains "="`
  }
  const problem = spawnRequestProblem(request) ?? exitFileProblem(request.exitFile ?? '', true) ?? stdinFifoProblem(request.stdinFifo) ?? terminalProblem(request)
  if (problem) return problem
  // The helper takes a request it cannot parse for a broken daemon and exits: refuse it here.
  const layout = descriptorLayout(request)
  const descriptors = layout.extra.length + layout.data.length + layout.pinned.length
  if (descriptors > MAX_DESCRIPTORS) return `too many extra files, in-memory files and pinned folders: ${descriptors} (at most ${MAX_DESCRIPTORS})`
  if ((request.idmappedViews?.length ?? 0) > MAX_DESCRIPTORS) return `too many idmapped views: ${request.idmappedViews!.length} (at most ${MAX_DESCRIPTORS})`
  const all = fields(id, request)
  // NUL ends a field on the wire: a value holding one cannot be carried.
  const carrier = all.find((field) => field.includes('\0'))
  if (carrier !== undefined) return `a field contains a NUL byte: ${JSON.stringify(carrier.slice(0, 80))}`
  const text = `${all.join('\0')}\0`
  const blobs = request.dataFiles ?? []
  const covers = request.coveredFiles ?? []
  // After the blobs: the covered files' count, then each one's path and its contents as a blob.
  const parts: Array<string | Buffer> = [text]
  for (const data of blobs) parts.push(`${data.length}\0`, data)
  parts.push(`${covers.length}\0`)
  for (const cover of covers) parts.push(`${cover.path}\0`, `${cover.data.length}\0`, cover.data)
  // Last, and only when given: the network namespace to join, by path and identity.
  if (request.netns) parts.push(`${request.netns.path}\0${request.netns.dev}\0${request.netns.ino}\0`)
  const size = parts.reduce((sum, part) => sum + (typeof part === 'string' ? Buffer.byteLength(part) : part.length), 0)
  if (size > MAX_REQUEST_BYTES) return `the request is too large (${size} bytes)`
  const framed = Buffer.allocUnsafe(4 + size)
  framed.writeUInt32LE(size, 0)
  let at = 4
  for (const part of parts) at += typeof part === 'string' ? framed.write(part, at) : part.copy(framed, at)
  return framed
}

// ------------------------------------------------------------------------------------ replies

const ERRNO_NAMES = new Map<number, string>()
for (const [name, value] of Object.entries(osConstants.errno)) if (!ERRNO_NAMES.has(value)) ERRNO_NAMES.set(value, name)

function errnoName(value: number): string {
  return ERRNO_NAMES.get(value) ?? `errno ${value}`
}

/** The pinned folder, or past them the view, a failure's index names. */
function folderAt(request: SpawnRequest, index: number): PinnedDir | undefined {
  const pinned = request.pinnedDirs ?? []
  return index < pinned.length ? pinned[index] : request.idmappedViews?.[index - pinned.length]
}

function failureMessage(stage: string, code: string, index: number | undefined, request: SpawnRequest): string {
  switch (stage) {
    case 'output':
      // ENXIO: something that is not a regular file is in its place (regular.c).
      return code === 'ENXIO' ? `the output file ${request.outputFile} is not a regular file (a FIFO, socket or device put in its place?)` : `could not open the output file ${request.outputFile}: ${code}`
    case 'stdin':
      if (!request.stdinFifo) return `could not open /dev/null as stdin: ${code}`
      if (code === 'ENXIO') return `the task's stdin pipe is not a FIFO: ${request.stdinFifo}`
      return `could not make or open the task's stdin pipe ${request.stdinFifo}: ${code}`
    case 'lifeline':
      return `could not make the task's keeper watch its daemon, so that the task ends with it: ${code}`
    case 'tty':
      if (code === 'ENXIO') return `the task's resize pipe is not a FIFO: ${request.terminal?.resizeFifo}`
      return `could not give the task a terminal: ${code}`
    case 'extra': {
      const file = index === undefined ? request.extraFiles.join(', ') : request.extraFiles[index]
      return `could not open ${file}: ${code}`
    }
    case 'data':
      return dataFileFailure(index ?? 0, code)
    case 'pinned': {
      const pinned = index === undefined ? undefined : folderAt(request, index)
      return pinnedDirFailure(pinned?.path ?? (request.pinnedDirs ?? []).map((dir) => dir.path).join(', '), code)
    }
    case 'idmap':
      return idmapFailure(index === undefined ? undefined : (folderAt(request, index)?.path ?? `folder ${index}`), code)
    case 'hidden':
      return hiddenFailure(index === undefined ? undefined : (request.hiddenPaths?.[index] ?? request.coveredFiles?.[index - (request.hiddenPaths?.length ?? 0)]?.path ?? `place ${index}`), code)
    case 'keyring':
      return keyringFailure(code)
    case 'netns':
      if (code === 'ESTALE') return `the private network the task was to join (${request.netns?.path}) is gone; it was not given another`
      return `could not join the task's private network ${request.netns?.path ?? ''}: ${code}`
    case 'user':
      return request.user ? userFailure(request.user, code) : `could not switch user: ${code}`
    case 'cgroup': {
      const group = index === undefined ? request.cgroups.map((each) => each.path).join(', ') : request.cgroups[index]?.path
      return cgroupFailure(group ?? `${index}`, code)
    }
    case 'limits':
      return `could not set the resource limits (open files ${request.limits.openFiles}, file size ${request.limits.fileSizeBytes} bytes): ${code}`
    case 'setsid':
      return `could not start a new session: ${code}`
    case 'chdir':
      if (code === 'ESTALE') return cwdChangedFailure(request.cwd)
      if (code === 'ENOENT') return `cwd does not exist: ${request.cwd}`
      if (code === 'ENOTDIR') return `cwd is not a directory: ${request.cwd}`
      return `cwd is not usable: ${request.cwd} (${code})`
    case 'exec':
      if (code === 'ENOENT') {
        // A bare name was searched on PATH; a path that exists has a missing interpreter (#!) or loader.
        if (!request.file.includes('/')) return `no such program: ${request.file}`
        return existsSync(resolvePath(request.cwd, request.file)) ? `the interpreter of ${request.file} is missing (ENOENT)` : `no such program: ${request.file}`
      }
      if (code === 'EACCES') return `program is not executable: ${request.file}`
      if (code === 'ENOEXEC') return `program is not a valid executable: ${request.file}`
      return `could not start ${request.file}: ${code}`
    case 'fork':
      return `could not fork a process for ${request.file}: ${code}`
    default:
      return `could not start ${request.file} (${stage}): ${code}`
  }
}
