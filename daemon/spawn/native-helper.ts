import { spawn, type ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'
import { exitOf, readExitFile } from './exit-file.js'
import { encodePing } from './native-request.js'
import { attachFailure, failureMessage, parseReply } from './native-reply.js'
import {
  setupFailure,
  setupWaitOf,
  type AttachOutcome,
  type AttachRequest,
  type KeeperRef,
  type SpawnExit,
  type SpawnOutcome,
  type SpawnRequest,
} from './spawner.js'

/**
 * One process of the native spawner's helper (daemon/spawner/tend-spawner.c) and what it is doing
 * for the daemon: the requests waiting on an answer, and the tasks whose ends it will report.
 */

/** Where the helper's complaints go (a pino logger fits). */
export interface SpawnerLog {
  warn(obj: object, msg: string): void
  error(obj: object, msg: string): void
}

/** The helper's own environment: fixed, never the daemon's (its children get exactly their request's). */
const HELPER_ENV = Object.freeze({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin' })

export interface PendingSpawn {
  resolve: (outcome: SpawnOutcome) => void
  request: SpawnRequest
}

export interface PendingAttach {
  resolve: (outcome: AttachOutcome) => void
  request: AttachRequest
  generation: number
}

export interface RunningChild {
  resolve: (exit: SpawnExit) => void
  reject: (error: Error) => void
  taskPid: number
  keeper: KeeperRef | null
  exitFile: string
  /** How many helpers died under it, one after another, since it was last started or attached to. */
  generation: number
}

export const UNKNOWN_EXIT: SpawnExit = Object.freeze({ exitCode: null, signal: null, unknown: true as const })

/** One helper process and what it is doing for us. */
export class Helper {
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
      this.die(
        this.unanswered !== null
          ? `it did not answer within ${this.unanswered}ms, stopped or wedged, and was killed`
          : signal
            ? `it was killed by ${signal}`
            : `it exited with code ${code}`,
      ),
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
      this.log?.error(
        { pid: this.child.pid, answerMs },
        'the native spawner did not answer a ping (stopped or wedged); killing it, a new one takes over its tasks',
      )
      this.unanswered = answerMs
      this.child.kill('SIGKILL')
    }, answerMs)
    timer.unref()
    this.pinging = { id, timer }
    this.stdin.write(encodePing(id))
  }

  private onLine(line: string): void {
    const reply = parseReply(line)
    switch (reply.kind) {
      case 'pong':
        if (this.pinging?.id === reply.id) {
          clearTimeout(this.pinging.timer)
          this.pinging = null
        }
        return
      case 'started': {
        const waiting = this.pending.get(reply.id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(reply.id)
        const { pid, keeper } = reply
        const exitFile = waiting.request.exitFile ?? ''
        const exited = new Promise<SpawnExit>((resolve, reject) => this.watch({ resolve, reject, taskPid: pid, keeper, exitFile, generation: 0 }))
        return waiting.resolve({ started: true, pid, keeper, exited })
      }
      case 'attached': {
        const waiting = this.pendingAttaches.get(reply.id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pendingAttaches.delete(reply.id)
        const { keeper, taskPid, exitFile } = waiting.request
        // Attached: the helpers that died before this one no longer count. Only helpers that die one
        // after another before any of them could attach give up on the task, never churn spread out.
        // The keeper lives (that is what `attached` says): it reports the exit itself, or its `gone`
        // sends the daemon to the exit file. A file there now is never taken over the keeper's
        // word: anyone who can write the task's folder could have put it there.
        const exited = new Promise<SpawnExit>((resolve, reject) => this.watch({ resolve, reject, taskPid, keeper, exitFile, generation: 0 }))
        return waiting.resolve({ attached: true, exited })
      }
      case 'failed-attach': {
        const attaching = this.pendingAttaches.get(reply.id)
        if (!attaching) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pendingAttaches.delete(reply.id)
        const { taskPid, exitFile } = attaching.request
        // No keeper to watch, but the task's exit file may say how it ended.
        const recorded = reply.code === 'ESRCH' ? recordedExit(exitFile, taskPid) : null
        if (recorded) return attaching.resolve({ attached: true, exited: Promise.resolve(recorded) })
        return attaching.resolve({ attached: false, code: reply.code, message: attachFailure(attaching.request, reply.code) })
      }
      case 'failed': {
        const waiting = this.pending.get(reply.id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(reply.id)
        const { stage, code, index } = reply
        // A keeper killed before it reported may have started its task: as for a helper that died
        // mid-spawn, the daemon looks for what is left of it.
        if (stage === 'keeper')
          return waiting.resolve({
            started: false,
            stage: 'spawner',
            code,
            message: `the task's keeper was killed before it reported the start of ${waiting.request.file}`,
          })
        return waiting.resolve({ started: false, stage, code, message: failureMessage(stage, code, index, waiting.request) })
      }
      case 'failed-setup': {
        const waiting = this.pending.get(reply.id)
        if (!waiting) return this.log?.warn({ line }, 'native spawner: reply for an unknown request')
        this.pending.delete(reply.id)
        const { request } = waiting
        return waiting.resolve(setupFailure(request.file, reply.exit, reply.said, reply.timedOut ? setupWaitOf(request) : undefined))
      }
      case 'exited':
      case 'gone': {
        const watchers = this.running.get(reply.pid)
        const running = watchers?.shift()
        if (!running) return this.log?.warn({ line }, 'native spawner: exit of an unknown child')
        if (watchers!.length === 0) this.running.delete(reply.pid)
        if (reply.kind === 'exited') return running.resolve(reply.exit)
        return running.resolve(recordedExit(running.exitFile, running.taskPid) ?? UNKNOWN_EXIT)
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

export function spawnerFailure(message: string): SpawnOutcome {
  return { started: false, stage: 'spawner', code: 'ESPAWNER', message }
}

/** The exit a task's exit file records, when the file is there and names that task. */
export function recordedExit(exitFile: string, taskPid: number): SpawnExit | null {
  const recorded = exitFile ? readExitFile(exitFile) : null
  return recorded && recorded.pid === taskPid ? exitOf(recorded) : null
}
