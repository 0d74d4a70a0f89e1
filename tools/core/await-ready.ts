import { isFinished, type Task } from '../../client/index.js'
import type { OwnerSession } from './owner-session.js'
import { outputPathOf, readForModel, type ModelOutput } from './output-shaping.js'
import { ToolFailure } from './tool-failure.js'

/** bash's `ready`: when a background command counts as ready (exactly one of pattern, port and url). */
export interface ReadyArgs {
  pattern?: string
  port?: number
  url?: string
  /** How long it may take from the start, in ms (the daemon's default: 60000). */
  timeout_ms?: number
}

/** A background start that waited for readiness: the record says how it went (`ready`), and the output so far. */
export interface ReadyOutcome {
  kind: 'ready'
  task: Task
  output: ModelOutput
  outputPath: string
}

/** How much longer than the condition's own time limit the call waits for the daemon to say it failed. */
const READY_SLACK_MS = 10_000
const DEFAULT_READY_TIMEOUT_MS = 60_000

/** Throws the ToolFailure the model reads for a `ready` it cannot have; nothing is started then. */
export function validateReadyArgs(ready: ReadyArgs | undefined, background: boolean): void {
  if (ready === undefined) return
  if (!background) throw new ToolFailure('ready needs run_in_background: true (a foreground command is waited for anyway)')
  const given = (['pattern', 'port', 'url'] as const).filter((key) => ready[key] !== undefined)
  if (given.length !== 1) throw new ToolFailure(`ready needs exactly one of pattern, port and url, got ${given.length === 0 ? 'none' : given.join(' and ')}`)
  if (ready.timeout_ms !== undefined && (!Number.isInteger(ready.timeout_ms) || ready.timeout_ms <= 0))
    throw new ToolFailure(`ready.timeout_ms must be a positive whole number of milliseconds, got ${ready.timeout_ms}`)
}

/** The start request's `ready` for the tool's. */
export function readyCondition(ready: ReadyArgs): { pattern?: string; port?: number; url?: string; timeoutMs?: number } {
  return { pattern: ready.pattern, port: ready.port, url: ready.url, timeoutMs: ready.timeout_ms }
}

/**
 * Waits until the daemon has settled a started task's readiness (ready, timed out, or it ended
 * first) and answers the record with the output so far since the agent's place, which it moves.
 * A task that ended first is shown to its end: its ending is in this result, so no notice follows.
 * An abort leaves the task running in the background, as any background start.
 */
export async function awaitReady(session: OwnerSession, started: Task, ready: ReadyArgs, budgetBytes: number, signal?: AbortSignal): Promise<ReadyOutcome> {
  return session.watch(started.id, async () => {
    const timeoutMs = (ready.timeout_ms ?? DEFAULT_READY_TIMEOUT_MS) + READY_SLACK_MS
    let task = await session.client.waitReady(started.id, { timeoutMs, signal }).catch((error: unknown) => {
      if (signal?.aborted) throw new ToolFailure(`aborted while waiting for task ${started.id} to be ready; it goes on in the background`)
      throw error
    })
    // The record the wait answered may lag the output on disk: the live record has its size now.
    if (!isFinished(task)) task = await session.client.get(started.id)
    const finished = isFinished(task)
    const from = session.cursor(task.id)
    const output = await readForModel(session.client, task.id, from, Math.max(from, task.outputBytes), budgetBytes, finished)
    session.advance(task.id, output.next)
    if (finished && output.next >= task.outputBytes) session.markSeen(task.id)
    return { kind: 'ready', task, output, outputPath: outputPathOf(task) }
  })
}
