import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import {
  IDEMPOTENCY_HEADER,
  isTendError,
  describeHolder,
  holderProcess,
  isTendDaemonOf,
  homeLockHolder,
  TendError,
  isFinished,
  OWNER_HEADER,
  backoffMs,
  pollUntil,
  readProcStat,
  WAIT_MS_LIMIT,
  type DaemonStatus,
  type GcResult,
  type Lifetime,
  type NetworkLogPage,
  type NetworkMode,
  type ReadResult,
  type RemoveResult,
  type SandboxProfile,
  type StdinMode,
  type TaskInputResult,
  type StartedTask,
  type Task,
  type TerminalSize,
  type TaskEvent,
  type ConsoleInfo,
} from '../protocol/index.js'
import { ensureDaemon, socketAnswers } from './ensure-daemon.js'
import { cliEntry } from './package-root.js'
import { newSubmissionKey } from './submission-key.js'
import { streamEvents, type EventsOptions } from './events.js'
import { isUnreachable, SocketHttp, type RequestOptions } from './http.js'
import { normalizeClientOptions, type NormalizedClientOptions, type TendClientOptions } from './options.js'

export interface StartOptions {
  /** argv to run, or a shell line when `shell` is true. */
  command: string[] | string
  shell?: boolean
  name?: string
  owner?: string
  /** Working directory; default the client's cwd. Relative paths resolve against it. */
  cwd?: string
  env?: Record<string, string>
  timeoutMs?: number
  maxOutputBytes?: number
  /** Confinement: off, workspace or strict (default: the daemon's, workspace). */
  sandbox?: SandboxProfile
  /**
   * What a sandboxed task's network reaches: `loopback` (the default: its owner's private loopback),
   * `allow` (that, plus the daemon's networkAllow through tend's egress proxy), `host` (the host's
   * network). `true`/`false` (older callers) mean `host`/`loopback`.
   */
  network?: NetworkMode | boolean
  /** With network `allow`: destinations this task may reach besides the daemon's list (operator clients only). */
  allowNet?: string[]
  /** Absolute paths writable inside the sandbox besides cwd. */
  writablePaths?: string[]
  /** Memory limit in bytes (strict). */
  memoryBytes?: number
  /** Process-count limit (strict). */
  pidsMax?: number
  /**
   * `owner` (default): the task stops when its agent session ends (OwnerSession.stopTasks);
   * `persistent`: it outlives the session.
   */
  lifetime?: Lifetime
  /**
   * `null` (default): stdin is /dev/null; `pipe`: a pipe that input() writes to (the daemon must
   * run the native spawner, else TEND_ERR_STDIN_UNAVAILABLE).
   */
  stdin?: StdinMode
  /**
   * Run on a pseudo-terminal: `true` (80x24) or its size. Its stdin is then the terminal: input()
   * types into it, and resize() changes its size (the program gets SIGWINCH). output.log holds what
   * the terminal showed, raw (plainText() makes it readable). Needs the native spawner, else
   * TEND_ERR_TTY_UNAVAILABLE.
   */
  tty?: boolean | Partial<TerminalSize>
  /**
   * A port given to the task as PORT and recorded as its `port`: `'auto'` picks a free one that no
   * other task not yet ended holds (AUTO_PORT_RANGE), held until it ends; a number is given as it
   * is (not exclusive: the start then warns if another task of the owner listens on it). Default: none.
   */
  port?: number | 'auto'
  /**
   * Identifies this submission across retries (1–128 of letters, digits and `._:-`). Default: a
   * fresh random key per start() call, used for its own automatic retry. Pass your own to make
   * retries of your own (after your process restarted) answer the first task.
   */
  idempotencyKey?: string
  /**
   * Ids of tasks to wait for (`--after`): the task stays queued until they have ended, and starts if
   * all exited 0, else ends failed naming the first that did not. Each must exist (resolve() a name
   * or prefix first). Default: none.
   */
  after?: string[]
  /** With `after`: start once they have ended, whatever they ended as. Default: false. */
  afterAny?: boolean
  /**
   * When it counts as ready: a line of its output matches `pattern` (RE2), something in its network
   * listens on `port`, or `url` answers 2xx/3xx from inside its network; exactly one. `timeoutMs`
   * from its start, default 60 s. Its record's `ready` says how it went; waitReady() waits for it.
   */
  ready?: { pattern?: string; port?: number; url?: string; timeoutMs?: number }
}

export interface ReadOptions {
  /** Byte offset to read from. Default 0. */
  from?: number
  /** Start at the last N lines instead. */
  tail?: number
  /** Bytes per read. Default 1 MiB on the daemon. */
  maxBytes?: number
  /** Long-poll: wait up to this long (ms, capped at 60000) for output past `from` or the end. */
  waitMs?: number
  /** With waitMs: wait for a new complete line that matches this regular expression (RE2 syntax), and read up to and including it. */
  waitFor?: string
  encoding?: 'utf8' | 'base64'
  signal?: AbortSignal
}

export interface ListOptions {
  all?: boolean
  owner?: string
  /** Running tasks carry their live figures (`live`: CPU %, memory), sampled at most once a second. Default false. */
  live?: boolean
}

export interface GetOptions {
  /** A running task carries its live figures (`live`: CPU %, memory), sampled at most once a second. Default false. */
  live?: boolean
}

export interface KillOptions {
  signal?: string | number
  graceMs?: number
  /** Why, recorded in the task's reason. */
  reason?: string
  /**
   * `session-end`: this kill is the end of the task's agent session (recorded as its stoppedBy).
   * Default: the daemon records `owner` for an owner-scoped client, `operator` otherwise.
   */
  stoppedBy?: 'session-end'
}

/** The typed, promise-based way to talk to the tend daemon. The CLI and the tools use only this. */
export class TendClient {
  readonly options: NormalizedClientOptions
  private readonly http: SocketHttp
  private starting: Promise<void> | undefined

  constructor(options: TendClientOptions = {}) {
    this.options = normalizeClientOptions(options)
    this.http = new SocketHttp(this.options.endpoint, this.headers(), this.options.requestTimeoutMs)
  }

  /** Starts a task: its record, with `warnings` beside its fields when the start deserves a word (protocol/started-task.ts). */
  async start(options: StartOptions): Promise<StartedTask> {
    // One key for every try of this submission (a retry after a reset connection or a daemon
    // restart): the daemon answers the first task again instead of running the command twice.
    const idempotencyKey = options.idempotencyKey ?? newSubmissionKey()
    return this.call<StartedTask>('POST', '/v1/tasks', { body: startRequestBody(options), headers: { [IDEMPOTENCY_HEADER]: idempotencyKey } })
  }

  get(id: string, options: GetOptions = {}): Promise<Task> {
    return this.call<Task>('GET', `/v1/tasks/${encodeURIComponent(id)}`, options.live ? { query: { live: true } } : {})
  }

  /**
   * The id of the task `ref` names among those this client may see: its id, its name (the newest
   * task of that name), or a unique prefix of 4 or more characters of its id, in that order.
   * Rejects with TEND_ERR_TASK_NOT_FOUND (naming the ref) or TEND_ERR_TASK_AMBIGUOUS (listing the candidates).
   */
  async resolve(ref: string): Promise<string> {
    const { id } = await this.call<{ id: string }>('GET', '/v1/tasks/resolve', { query: { ref } })
    return id
  }

  async list(options: ListOptions = {}): Promise<Task[]> {
    const { tasks } = await this.call<{ tasks: Task[] }>('GET', '/v1/tasks', {
      query: { all: options.all, owner: options.owner, live: options.live || undefined },
    })
    return tasks
  }

  read(id: string, options: ReadOptions = {}): Promise<ReadResult> {
    const waitMs = options.waitMs === undefined ? undefined : Math.min(options.waitMs, WAIT_MS_LIMIT)
    return this.call<ReadResult>('GET', `/v1/tasks/${encodeURIComponent(id)}/output`, {
      query: { from: options.from, tail: options.tail, maxBytes: options.maxBytes, waitMs, encoding: options.encoding, waitFor: options.waitFor },
      signal: options.signal,
      waitMs,
    })
  }

  /**
   * Yields the task's output chunk by chunk from `from` until the task has ended. An output.log cut
   * back below the place reached (the task truncated its stdout) is read again from its start, as
   * `tail -f` does, after `onCutBack` is told (else the follow would wait for bytes past an end
   * that no longer exists).
   */
  async *follow(
    id: string,
    options: Omit<ReadOptions, 'waitMs'> & { onCutBack?: (outputBytes: number, from: number) => void } = {},
  ): AsyncGenerator<ReadResult> {
    const { onCutBack, ...readOptions } = options
    let cursor: { from?: number; tail?: number } = options.tail !== undefined ? { tail: options.tail } : { from: options.from ?? 0 }
    for (;;) {
      const result = await this.read(id, { ...readOptions, ...cursor, waitMs: WAIT_MS_LIMIT })
      if (result.outputBytes < result.from) {
        onCutBack?.(result.outputBytes, result.from)
        cursor = { from: 0 }
        continue
      }
      if (result.next > result.from || result.done) yield result
      if (result.done) return
      cursor = { from: result.next }
    }
  }

  /**
   * A page of the task's network.log: the egress proxy's decisions from byte `from` (default 0),
   * at most `limit`; `next` is where the following page starts, `done` once the task has ended
   * and every decision is read.
   */
  networkLog(id: string, options: { from?: number; limit?: number } = {}): Promise<NetworkLogPage> {
    return this.call<NetworkLogPage>('GET', `/v1/tasks/${encodeURIComponent(id)}/network`, { query: { from: options.from, limit: options.limit } })
  }

  /** Resolves with the task once it has ended, or with its current record after timeoutMs. */
  wait(id: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Task> {
    return this.waitFor(id, false, options)
  }

  /**
   * Resolves with the task once its readiness has settled (`ready` is no longer null: ready, timed
   * out, or ended first), or with its current record after timeoutMs. A task without a readiness
   * condition is TEND_ERR_VALIDATION.
   */
  waitReady(id: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<Task> {
    return this.waitFor(id, true, options)
  }

  private async waitFor(id: string, ready: boolean, options: { timeoutMs?: number; signal?: AbortSignal }): Promise<Task> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs
    for (;;) {
      const remaining = deadline - Date.now()
      const chunk = Math.max(0, Math.min(WAIT_MS_LIMIT, remaining))
      const { done, task } = await this.call<{ done: boolean; task: Task }>('GET', `/v1/tasks/${encodeURIComponent(id)}/wait`, {
        query: ready ? { timeoutMs: chunk, ready: true } : { timeoutMs: chunk },
        signal: options.signal,
        waitMs: chunk,
      })
      if (done || isFinished(task) || Date.now() >= deadline) return task
    }
  }

  /** Stops the task's whole tree; resolves with its final record once no process of it is left. */
  kill(id: string, options: KillOptions = {}): Promise<Task> {
    // The daemon answers once the tree is gone, which can take the grace period.
    return this.call<Task>('POST', `/v1/tasks/${encodeURIComponent(id)}/kill`, {
      body: dropUndefined({ signal: options.signal, graceMs: options.graceMs, reason: options.reason, stoppedBy: options.stoppedBy }),
      waitMs: options.graceMs,
    })
  }

  /**
   * Writes to the stdin of a task started with `stdin: 'pipe'`: a string as UTF-8, exactly as given
   * (no newline is added), a Buffer as raw bytes; with `eof` the stdin is closed afterwards (the
   * task reads end-of-file once it has read everything). Resolves once every byte is in the pipe;
   * a pipe the task does not drain rejects with TEND_ERR_STDIN_FULL, whose message says how many
   * bytes were written (those are in input.log too). At most 1 MiB per call.
   */
  input(id: string, data: string | Buffer, options: { eof?: boolean } = {}): Promise<TaskInputResult> {
    const body = typeof data === 'string' ? { text: data } : { base64: data.toString('base64') }
    return this.call<TaskInputResult>('POST', `/v1/tasks/${encodeURIComponent(id)}/input`, { body: { ...body, ...(options.eof ? { eof: true } : {}) } })
  }

  /**
   * Resizes the terminal of a task started with `tty`: its programs get SIGWINCH and read the new
   * size (`stty size`). Resolves with the task as recorded, its `tty` the new size.
   */
  resize(id: string, size: TerminalSize): Promise<Task> {
    return this.call<Task>('POST', `/v1/tasks/${encodeURIComponent(id)}/resize`, { body: { cols: size.cols, rows: size.rows } })
  }

  remove(id: string): Promise<RemoveResult> {
    return this.call<RemoveResult>('DELETE', `/v1/tasks/${encodeURIComponent(id)}`)
  }

  gc(options: { olderThanMs?: number } = {}): Promise<GcResult> {
    return this.call<GcResult>('POST', '/v1/gc', { body: dropUndefined({ olderThanMs: options.olderThanMs }) })
  }

  status(): Promise<DaemonStatus> {
    return this.call<DaemonStatus>('GET', '/v1/status')
  }

  /**
   * Asks the daemon to stop and resolves once it has exited. With keepTasks its running tasks go
   * on under their keepers, for the next daemon to supervise.
   */
  async stopDaemon(options: { timeoutMs?: number; keepTasks?: boolean } = {}): Promise<{ stopped: boolean; pid: number | null }> {
    let pid: number | null = null
    try {
      const body = options.keepTasks ? { keepTasks: true } : undefined
      pid = (await this.http.request<{ pid: number }>('POST', '/v1/stop', { body })).pid
    } catch (error) {
      if (!isUnreachable(error)) throw error
      const silent = await this.silentDaemon(options)
      if (silent === null || typeof silent === 'object') return silent ?? { stopped: false, pid: null }
      pid = silent
    }
    this.http.close()
    // A daemon reached over TCP may run on another machine: its pid says nothing here, its silence does.
    const stopped = await pollUntil(async () => (this.options.endpoint.tcp ? !(await this.answers()) : !processAlive(pid)), options.timeoutMs ?? 30_000, 20)
    return { stopped, pid }
  }

  /**
   * No answer on the socket: a daemon may still hold the home (its socket removed or replaced, the
   * daemon binds it again within a second or so). The lock's holder, as the kernel reports it, is
   * that daemon: stopped through its socket once it answers again, else by SIGTERM (which stops its
   * tasks: with keepTasks that is refused instead). Null when no daemon holds the home; the pid
   * signalled; or the answer of the stop that went through the socket.
   */
  private async silentDaemon(options: { timeoutMs?: number; keepTasks?: boolean }): Promise<number | { stopped: boolean; pid: number | null } | null> {
    if (this.options.endpoint.tcp) return null
    const holder = homeLockHolder(this.options.layout.home, this.options.layout.lock)
    if (holder === null) return null
    this.refuseUnlessDaemon(holder)
    let answers = false
    const settled = await pollUntil(
      async () => (answers = await socketAnswers(this.options.layout.socket)) || homeLockHolder(this.options.layout.home, this.options.layout.lock) !== holder,
      SILENT_DAEMON_WAIT_MS,
      20,
    )
    if (answers) return this.stopDaemon(options)
    if (settled) return null
    if (options.keepTasks)
      throw new TendError('TEND_ERR_DAEMON_UNAVAILABLE', {
        detail:
          `the daemon (pid ${holder}) holds ${this.options.layout.home}` + ` but does not answer on its socket; without --keep-tasks it is stopped by a signal`,
      })
    // Looked at again just before the signal: the holder may have ended and its pid been reused.
    this.refuseUnlessDaemon(holder)
    process.kill(holder, 'SIGTERM')
    return holder
  }

  /**
   * Throws unless the lock's holder is this tend's daemon (or worker) of this uid, as /proc shows
   * it: a process the user locked the file with is named, never signalled.
   */
  private refuseUnlessDaemon(holder: number): void {
    const described = holderProcess(holder)
    if (described && homeLockHolder(this.options.layout.home, this.options.layout.lock) === holder && isTendDaemonOf(described, cliEntry())) return
    throw new TendError('TEND_ERR_DAEMON_UNAVAILABLE', {
      detail:
        `the lock of ${this.options.layout.home} (${this.options.layout.lock}) is held by pid ${describeHolder(described, holder)}` +
        ` and no daemon answers on its socket; tend signals nothing but its own daemon: end that process, or use another TEND_HOME`,
    })
  }

  /**
   * Starts the operator console (or moves it to another address) and makes a fresh token: the
   * answer's `url` opens the page, its `token` authorizes the API over TCP. Operator only, on the
   * local socket only.
   */
  openConsole(options: { host?: string; port?: number; insecure?: boolean; tlsCert?: string; tlsKey?: string } = {}): Promise<ConsoleInfo> {
    const body = dropUndefined({ ...options, tlsCert: options.tlsCert && resolve(options.tlsCert), tlsKey: options.tlsKey && resolve(options.tlsKey) })
    return this.consoleControl('POST', '/v1/console', body)
  }

  /** Where the console listens, if it does (no token). */
  consoleInfo(): Promise<ConsoleInfo> {
    return this.consoleControl('GET', '/v1/console')
  }

  /** Stops the console's listener; its tokens stay valid for the next start. */
  closeConsole(): Promise<ConsoleInfo> {
    return this.consoleControl('DELETE', '/v1/console')
  }

  /** Revokes every console token and ends every open page's session. */
  revokeConsoleTokens(): Promise<ConsoleInfo> {
    return this.consoleControl('POST', '/v1/console/revoke')
  }

  /** The console is controlled through the daemon's socket only: a token cannot make tokens. */
  private consoleControl(method: string, path: string, body?: unknown): Promise<ConsoleInfo> {
    if (this.options.endpoint.tcp) {
      return Promise.reject(
        new TendError('TEND_ERR_USAGE', {
          detail: `the console is controlled on the daemon's machine, through its socket, not over ${this.options.endpoint.where} (unset TEND_URL)`,
        }),
      )
    }
    return this.withDaemon(() => this.http.request<ConsoleInfo>(method, path, { body }))
  }

  private async answers(): Promise<boolean> {
    try {
      await this.http.request('GET', '/v1/status')
      return true
    } catch (error) {
      if (isUnreachable(error)) return false
      throw error
    }
  }

  /**
   * Replaces the daemon with a new one of the installed version (an upgrade) without stopping a
   * task: the old one lets go of its tasks, the new one supervises them again. Starts one if none
   * ran.
   */
  async restartDaemon(options: { timeoutMs?: number } = {}): Promise<{ previousPid: number | null; pid: number }> {
    const stopped = await this.stopDaemon({ ...options, keepTasks: true })
    if (stopped.pid !== null && !stopped.stopped)
      throw new TendError('TEND_ERR_DAEMON_UNAVAILABLE', { detail: `the daemon (pid ${stopped.pid}) is still stopping` })
    await ensureDaemon(this.options)
    const { pid } = await this.status()
    return { previousPid: stopped.pid, pid }
  }

  /** Lifecycle events; reconnects by sequence number when the stream drops. */
  async *events(options: EventsOptions = {}): AsyncGenerator<TaskEvent> {
    await this.withDaemon(() => this.http.request('GET', '/v1/status'))
    yield* streamEvents(this.options.endpoint, { ...options, headers: this.headers() })
  }

  private headers(): Record<string, string> {
    return this.options.owner === null ? {} : { [OWNER_HEADER]: this.options.owner }
  }

  /** Releases kept-alive connections. */
  close(): void {
    this.http.close()
  }

  private call<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return this.withDaemon(() => this.http.request<T>(method, path, options))
  }

  /**
   * Sends; when no daemon answers, starts one and sends again. A daemon that is going away (a
   * crash the socket still shows for a moment) can reset the retry too: a few rounds, then the
   * error. Every try of a submission carries the same idempotency key, so it never runs twice.
   */
  private async withDaemon<T>(send: () => Promise<T>): Promise<T> {
    const shutdownDeadline = Date.now() + SHUTDOWN_WAIT_MS
    for (let attempt = 1; ; attempt++) {
      try {
        return await send()
      } catch (error) {
        // A daemon that is being replaced (tend restart) refuses new work for a moment: wait for
        // its successor rather than fail.
        if (this.options.autoStart && isTendError(error, 'TEND_ERR_SHUTTING_DOWN') && Date.now() < shutdownDeadline) {
          await delay(50)
          continue
        }
        if (!this.options.autoStart || !isUnreachable(error) || attempt >= UNREACHABLE_ATTEMPTS) throw error
      }
      // A daemon that was just killed can still accept a connection or two: back off a little.
      if (attempt > 1) await delay(backoffMs(attempt - 2, 50, 1000))
      this.starting ??= ensureDaemon(this.options).finally(() => (this.starting = undefined))
      await this.starting
    }
  }
}

/** How long a request waits for a daemon that is shutting down to be replaced. */
const SHUTDOWN_WAIT_MS = 30_000
/** How long stop waits for a daemon that holds its home to answer on its socket again (it checks it every second). */
const SILENT_DAEMON_WAIT_MS = 3000

/** Tries of one request while the daemon is unreachable (each after starting one). */
const UNREACHABLE_ATTEMPTS = 8

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  // An exited daemon still answers kill(0) until its parent reaps it, and an auto-started daemon's
  // parent is init, which in many containers reaps late or never: a zombie has stopped.
  const stat = readProcStat(pid)
  // Gone between the two checks, or no /proc to ask (then kill(0) is all there is).
  return stat === null ? !existsSync(`/proc/${process.pid}/stat`) : stat.state !== 'Z'
}

/** The body of POST /v1/tasks for these options (paths made absolute here, where they were given). */
export function startRequestBody(options: StartOptions): Record<string, unknown> {
  const shell = options.shell ?? typeof options.command === 'string'
  const command = typeof options.command === 'string' ? [options.command] : options.command
  return dropUndefined({
    command,
    shell: shell || undefined,
    name: options.name,
    owner: options.owner,
    cwd: resolveCwd(options.cwd),
    env: options.env,
    timeoutMs: options.timeoutMs,
    maxOutputBytes: options.maxOutputBytes,
    sandbox: options.sandbox,
    network: options.network,
    allowNet: options.allowNet,
    writablePaths: options.writablePaths?.map((path) => resolve(path)),
    memoryBytes: options.memoryBytes,
    pidsMax: options.pidsMax,
    lifetime: options.lifetime,
    stdin: options.stdin,
    tty: options.tty,
    after: options.after,
    afterAny: options.afterAny,
    ready: options.ready,
    port: options.port,
  })
}

function resolveCwd(cwd: string | undefined): string {
  return resolve(cwd ?? '.')
}

function dropUndefined<T extends Record<string, unknown>>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as Partial<T>
}
