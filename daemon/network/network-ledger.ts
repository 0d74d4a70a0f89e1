import type { Logger } from 'pino'
import { isFinished, NETWORK_LOG_MAX_BYTES, type NetworkDecision, type NetworkUse, type Task } from '../../protocol/index.js'
import { appendNetworkLog } from '../../spool/index.js'
import { copyNetworkUse, countDecision } from './network-use.js'

/** What the ledger needs of the task store: the newest version of a task, and a change to it. */
export interface LedgerStore {
  findCurrent(id: string): Task | undefined
  transition(id: string, change: (task: Task) => Task | null): Promise<Task>
}

/** How often, at most, one task's record is rewritten with its counts while it runs. */
export const NETWORK_RECORD_INTERVAL_MS = 250
/** Lines waiting for the disk, per task, past which more are counted lost: a disk that hangs must not grow the daemon. */
const PENDING_LINES_MAX = 8192

interface TaskLedger {
  /** Exact counts, ahead of the record until the next rewrite. */
  use: NetworkUse
  /** `use` changed since the record was last given it. */
  dirty: boolean
  timer: NodeJS.Timeout | null
  /** Lines not yet handed to the disk. */
  lines: string[]
  /** The append under way, if any: one at a time per task, in order. */
  writing: Promise<void> | null
  /** network.log reached its cap: every later decision is only counted. */
  capped: boolean
  /** The summary line (how many were left out) is to be appended after the lines. */
  summaryDue: boolean
  /** A failed append was logged for this task already (once, not per line). */
  lossLogged: boolean
}

/**
 * Every decision of the egress proxy, per task: one JSON line in the task's network.log
 * (spool/network-log.ts) and its counts in the record's `networkUse`.
 *
 * record() is called on the proxy's path, so it never throws and never waits on the disk: lines
 * queue per task and are appended one batch at a time. The counts are exact whatever the disk
 * does: a line past the log's cap (NETWORK_LOG_MAX_BYTES) is counted in `logOmitted`, one the disk
 * refuses (full, read-only, the folder gone or replaced) in `logLost`. The record is rewritten at
 * most every NETWORK_RECORD_INTERVAL_MS per task, and flush() brings it up to date at once: the
 * supervisor calls it before it records a task's ending, so the final record has the final counts.
 */
export class NetworkLedger {
  private readonly tasks = new Map<string, TaskLedger>()

  constructor(
    private readonly spoolRoot: string,
    private readonly store: LedgerStore,
    private readonly log: Logger,
    private readonly limits: { maxLogBytes: number; recordIntervalMs: number } = {
      maxLogBytes: NETWORK_LOG_MAX_BYTES,
      recordIntervalMs: NETWORK_RECORD_INTERVAL_MS,
    },
  ) {}

  /** Records one decision for the task; a task the store does not know is passed over. */
  record(taskId: string, decision: NetworkDecision): void {
    try {
      const ledger = this.ledgerOf(taskId)
      if (!ledger) {
        this.log.warn({ taskId, name: decision.name, port: decision.port }, 'a network decision for a task tend does not know was not recorded')
        return
      }
      countDecision(ledger.use, decision)
      ledger.dirty = true
      if (ledger.capped) ledger.use.logOmitted = (ledger.use.logOmitted ?? 0) + 1
      else if (ledger.lines.length >= PENDING_LINES_MAX) this.countLost(taskId, ledger, 1, 'the disk is not keeping up')
      else ledger.lines.push(JSON.stringify(decision))
      this.scheduleRecord(taskId, ledger)
      this.drain(taskId, ledger)
    } catch (error) {
      this.log.error({ taskId, err: error }, 'a network decision could not be recorded')
    }
  }

  /**
   * Brings the task's record up to date now and waits for its lines to reach the disk (with the
   * summary line when some were left out). Answers once the counts are in the store's current
   * version: a transition made after it (the task's ending) carries them.
   */
  async flush(taskId: string): Promise<void> {
    const ledger = this.tasks.get(taskId)
    if (!ledger) return
    if (ledger.capped || ledger.use.logOmitted) ledger.summaryDue = true
    this.drain(taskId, ledger)
    while (ledger.writing) await ledger.writing
    this.writeRecord(taskId, ledger)
    if (!ledger.writing && ledger.lines.length === 0) this.tasks.delete(taskId)
  }

  /** Whether lines or counts of the task are still on their way (a reader is not done yet). */
  busy(taskId: string): boolean {
    const ledger = this.tasks.get(taskId)
    return ledger !== undefined && (ledger.writing !== null || ledger.lines.length > 0)
  }

  /** Flushes every task (the daemon stops): what was counted reaches the records before they are closed. */
  async close(): Promise<void> {
    await Promise.all([...this.tasks.keys()].map((id) => this.flush(id)))
  }

  /** The task's ledger, made from its record's counts (a daemon restarted while it ran counts on); null for a task not known. */
  private ledgerOf(taskId: string): TaskLedger | null {
    const known = this.tasks.get(taskId)
    if (known) return known
    const task = this.store.findCurrent(taskId)
    if (!task) return null
    const use = copyNetworkUse(task.networkUse)
    const ledger: TaskLedger = {
      use,
      dirty: false,
      timer: null,
      lines: [],
      writing: null,
      capped: (use.logOmitted ?? 0) > 0,
      summaryDue: false,
      lossLogged: false,
    }
    this.tasks.set(taskId, ledger)
    return ledger
  }

  private scheduleRecord(taskId: string, ledger: TaskLedger): void {
    if (ledger.timer) return
    ledger.timer = setTimeout(() => {
      ledger.timer = null
      this.writeRecord(taskId, ledger)
      // A task that has ended and has nothing on its way is let go (a late decision makes it anew from its record).
      const task = this.store.findCurrent(taskId)
      if ((!task || isFinished(task)) && !this.busy(taskId) && this.tasks.get(taskId) === ledger) this.tasks.delete(taskId)
    }, this.limits.recordIntervalMs)
    ledger.timer.unref()
  }

  /** Installs the counts in the task's current version (the store writes it in order, in the background). */
  private writeRecord(taskId: string, ledger: TaskLedger): void {
    if (ledger.timer) clearTimeout(ledger.timer)
    ledger.timer = null
    if (!ledger.dirty) return
    ledger.dirty = false
    const use = copyNetworkUse(ledger.use)
    try {
      // Object.assign, not a spread: see the store (each copy would get a hidden class of its own).
      void this.store
        .transition(taskId, (task) => Object.assign({}, task, { networkUse: use }))
        .catch((error: unknown) => this.log.warn({ taskId, err: error }, "a task's network counts could not be recorded"))
    } catch (error) {
      // The task is gone (removed): nothing to record its counts in.
      this.log.warn({ taskId, err: error }, "a task's network counts could not be recorded")
    }
  }

  /** Appends the task's queued lines, batch after batch, then its summary line when due; one run at a time. */
  private drain(taskId: string, ledger: TaskLedger): void {
    if (ledger.writing) return
    if (ledger.lines.length === 0 && !ledger.summaryDue) return
    ledger.writing = (async () => {
      while (ledger.lines.length > 0 || ledger.summaryDue) {
        const lines = ledger.lines.splice(0)
        const summary = lines.length === 0 && ledger.summaryDue
        if (summary) ledger.summaryDue = false
        const trailer = summary ? JSON.stringify({ time: new Date().toISOString(), omitted: ledger.use.logOmitted ?? 0 }) : undefined
        const outcome = await appendNetworkLog(this.spoolRoot, taskId, lines, {
          maxBytes: this.limits.maxLogBytes,
          ...(trailer === undefined ? {} : { trailer }),
        })
        if (outcome.omitted > 0) {
          ledger.capped = true
          ledger.use.logOmitted = (ledger.use.logOmitted ?? 0) + outcome.omitted
          ledger.dirty = true
          this.scheduleRecord(taskId, ledger)
        }
        if (outcome.lost > 0) this.countLost(taskId, ledger, outcome.lost, 'network.log could not be appended to')
      }
    })()
      .catch((error: unknown) => this.log.error({ taskId, err: error }, 'network.log could not be written'))
      .finally(() => {
        ledger.writing = null
        // Lines queued after the last batch was taken and before this run ended.
        if (ledger.lines.length > 0) this.drain(taskId, ledger)
      })
  }

  private countLost(taskId: string, ledger: TaskLedger, lines: number, why: string): void {
    ledger.use.logLost = (ledger.use.logLost ?? 0) + lines
    ledger.dirty = true
    this.scheduleRecord(taskId, ledger)
    if (ledger.lossLogged) return
    ledger.lossLogged = true
    this.log.error({ taskId, lostLines: lines }, `${why}: its decisions are counted in the record's networkUse, not listed`)
  }
}
