import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants as fsConstants, existsSync, statSync } from 'node:fs'
import type { Socket } from 'node:net'
import { constants as osConstants } from 'node:os'
import { resolve as resolvePath } from 'node:path'
import { fileURLToPath } from 'node:url'
import { cwdChangedFailure, dataFileFailure, descriptorLayout, pinnedDirFailure, spawnRequestProblem, userFailure, type SpawnExit, type SpawnOutcome, type SpawnRequest, type Spawner } from './spawner.js'

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

/**
 * The native spawner: a small C helper (daemon/spawner/tend-spawner.c, built at install) that the
 * daemon starts once and sends spawn requests to over a pipe. It forks from its own tiny address
 * space, sets the child up (session, limits, cgroups, descriptors, cwd, user), execs it, reaps it and
 * reports its exit, so the daemon's thread only writes one request and parses a few short lines
 * per task. The wire protocol is described at the top of the C file.
 *
 * If the helper dies, pending spawns fail with stage `spawner` and the `exited` promise of every
 * child it was watching rejects (their exit status is lost); the next spawn starts a new helper.
 */
export class NativeSpawner implements Spawner {
  readonly kind = 'native'
  private helper: Helper | null = null
  private closed = false
  private nextId = 1

  private constructor(
    private readonly binary: string,
    private readonly log: SpawnerLog | undefined,
  ) {}

  /** The helper built next to this module (dist/daemon/spawner/tend-spawner), or null if it is missing. */
  static binaryPath(): string | null {
    const path = fileURLToPath(new URL('./spawner/tend-spawner', import.meta.url))
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

  /** The helper's pid (undefined while none runs): for tests and diagnostics. */
  get helperPid(): number | undefined {
    return this.helper?.child.pid
  }

  spawn(request: SpawnRequest): Promise<SpawnOutcome> {
    if (this.closed) return Promise.resolve(spawnerFailure('the native spawner is closed'))
    const id = this.nextId++
    const encoded = encodeRequest(id, request)
    if (typeof encoded === 'string') return Promise.resolve({ started: false, stage: 'request', code: 'EINVAL', message: encoded })
    const helper = this.helper ?? this.launch()
    return new Promise<SpawnOutcome>((resolve) => {
      helper.pending.set(id, { resolve, request })
      helper.stdin.write(encoded)
    })
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
    const helper = new Helper(this.binary, this.log, (gone) => {
      if (this.helper === gone) this.helper = null
    })
    this.helper = helper
    return helper
  }
}

interface PendingSpawn {
  resolve: (outcome: SpawnOutcome) => void
  request: SpawnRequest
}

interface RunningChild {
  resolve: (exit: SpawnExit) => void
  reject: (error: Error) => void
}

/** One helper process and what it is doing for us. */
class Helper {
  readonly child: ChildProcess
  readonly stdin: Socket
  readonly pending = new Map<number, PendingSpawn>()
  readonly running = new Map<number, RunningChild>()
  /** Resolves once the helper has been started (rejects if it could not be). */
  readonly ready: Promise<void>
  /** Resolves once the helper is gone and everything waiting on it has been settled. */
  readonly gone: Promise<void>
  closing = false
  private dead = false
  private stdoutRest = ''
  private stderrRest = ''
  private markGone!: () => void

  constructor(
    binary: string,
    private readonly log: SpawnerLog | undefined,
    private readonly onGone: (helper: Helper) => void,
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
    this.child.on('close', (code, signal) => this.die(signal ? `it was killed by ${signal}` : `it exited with code ${code}`))
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

  private onLine(line: string): void {
    const parts = line.split(' ')
    switch (parts[0]) {
      case 'started': {
        const id = Number(parts[1])
        const pid = Number(parts[2])
        const waiting = this.pending.get(id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(id)
        const exited = new Promise<SpawnExit>((resolve, reject) => this.running.set(pid, { resolve, reject }))
        return waiting.resolve({ started: true, pid, exited })
      }
      case 'exited': {
        const pid = Number(parts[1])
        const code = Number(parts[2])
        const running = this.running.get(pid)
        if (!running) return this.log?.warn({ line }, 'native spawner: exit of an unknown child')
        this.running.delete(pid)
        return running.resolve(code === -1 ? { exitCode: null, signal: signalName(Number(parts[3])) } : { exitCode: code, signal: null })
      }
      case 'failed': {
        const id = Number(parts[1])
        const waiting = this.pending.get(id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(id)
        const stage = parts[2] ?? 'exec'
        const code = errnoName(Number(parts[3]))
        const index = parts[4] === undefined ? undefined : Number(parts[4])
        return waiting.resolve({ started: false, stage, code, message: failureMessage(stage, code, index, waiting.request) })
      }
      case 'error':
        // The helper exits 2 right after: 'close' settles what was waiting on it.
        return this.log?.error({ line }, 'native spawner rejected a request')
      default:
        return this.log?.warn({ line }, 'native spawner: unexpected output')
    }
  }

  private die(reason: string): void {
    if (this.dead) return
    this.dead = true
    this.onGone(this)
    const what = this.closing ? `the native spawner was closed` : `the native spawner died (${reason})`
    if (!this.closing) this.log?.error({ pid: this.child.pid, pending: this.pending.size, running: this.running.size }, what)
    for (const waiting of this.pending.values()) waiting.resolve(spawnerFailure(`${what} before the task started`))
    this.pending.clear()
    for (const [pid, running] of this.running) running.reject(new Error(`${what}: the exit of pid ${pid} is unknown`))
    this.running.clear()
    this.markGone()
  }
}

function spawnerFailure(message: string): SpawnOutcome {
  return { started: false, stage: 'spawner', code: 'ESPAWNER', message }
}

// ---------------------------------------------------------------------------------- requests

/** The request's string fields in wire order (see the C file): counts before each list; the blobs follow. */
function fields(id: number, request: SpawnRequest): string[] {
  const env = Object.entries(request.env).map(([key, value]) => `${key}=${value}`)
  const { argv, extraFiles, cgroupProcs, cwdIdentity, user } = request
  const pinnedDirs = request.pinnedDirs ?? []
  return [
    String(id), request.file, request.cwd, request.outputFile, String(request.limits.openFiles), String(request.limits.fileSizeBytes),
    cwdIdentity?.dev ?? '', cwdIdentity?.ino ?? '', user ? String(user.uid) : '', user ? String(user.gid) : '',
    String(argv.length), ...argv,
    String(env.length), ...env,
    String(extraFiles.length), ...extraFiles,
    String(cgroupProcs.length), ...cgroupProcs,
    String(pinnedDirs.length), ...pinnedDirs.flatMap((pinned) => [pinned.path, pinned.dev, pinned.ino]),
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
  const problem = spawnRequestProblem(request)
  if (problem) return problem
  // The helper takes a request it cannot parse for a broken daemon and exits: refuse it here.
  const layout = descriptorLayout(request)
  const descriptors = layout.extra.length + layout.data.length + layout.pinned.length
  if (descriptors > MAX_DESCRIPTORS) return `too many extra files, in-memory files and pinned folders: ${descriptors} (at most ${MAX_DESCRIPTORS})`
  const all = fields(id, request)
  // NUL ends a field on the wire: a value holding one cannot be carried.
  const carrier = all.find((field) => field.includes('\0'))
  if (carrier !== undefined) return `a field contains a NUL byte: ${JSON.stringify(carrier.slice(0, 80))}`
  const text = `${all.join('\0')}\0`
  const blobs = request.dataFiles ?? []
  const blobLengths = blobs.map((data) => `${data.length}\0`)
  const size = Buffer.byteLength(text) + blobs.reduce((sum, data, index) => sum + blobLengths[index]!.length + data.length, 0)
  if (size > MAX_REQUEST_BYTES) return `the request is too large (${size} bytes)`
  const framed = Buffer.allocUnsafe(4 + size)
  framed.writeUInt32LE(size, 0)
  let at = 4 + framed.write(text, 4)
  for (const [index, data] of blobs.entries()) {
    at += framed.write(blobLengths[index]!, at, 'latin1')
    at += data.copy(framed, at)
  }
  return framed
}

// ------------------------------------------------------------------------------------ replies

const ERRNO_NAMES = new Map<number, string>()
for (const [name, value] of Object.entries(osConstants.errno)) if (!ERRNO_NAMES.has(value)) ERRNO_NAMES.set(value, name)

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>()
for (const [name, value] of Object.entries(osConstants.signals)) if (!SIGNAL_NAMES.has(value)) SIGNAL_NAMES.set(value, name as NodeJS.Signals)

function errnoName(value: number): string {
  return ERRNO_NAMES.get(value) ?? `errno ${value}`
}

function signalName(value: number): NodeJS.Signals {
  // Real-time signals have no name in os.constants.
  return SIGNAL_NAMES.get(value) ?? (`SIG${value}` as NodeJS.Signals)
}

function failureMessage(stage: string, code: string, index: number | undefined, request: SpawnRequest): string {
  switch (stage) {
    case 'output':
      return `could not open the output file ${request.outputFile}: ${code}`
    case 'stdin':
      return `could not open /dev/null as stdin: ${code}`
    case 'extra': {
      const file = index === undefined ? request.extraFiles.join(', ') : request.extraFiles[index]
      return `could not open ${file}: ${code}`
    }
    case 'data':
      return dataFileFailure(index ?? 0, code)
    case 'pinned': {
      const pinned = index === undefined ? undefined : request.pinnedDirs?.[index]
      return pinnedDirFailure(pinned?.path ?? (request.pinnedDirs ?? []).map((dir) => dir.path).join(', '), code)
    }
    case 'user':
      return request.user ? userFailure(request.user, code) : `could not switch user: ${code}`
    case 'cgroup': {
      const file = index === undefined ? request.cgroupProcs.join(', ') : request.cgroupProcs[index]
      return `could not join cgroup ${file}: ${code}`
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
