import { isFinished, plainTextChunk, taskLabel, type ReadResult, type Task } from '../../client/index.js'
import type { OwnerSession } from './owner-session.js'
import { MAX_RESULT_BYTES, outputPathOf, readBytes, readForModel, shapeText, type ModelOutput } from './output-shaping.js'
import { inToolTerms } from './refusal-terms.js'
import { ToolFailure } from './tool-failure.js'
import type { TaskPort } from '../../protocol/ports.js'
import type { Readiness } from '../../protocol/readiness.js'
import { awaitMatchingLine, type WaitForOutcome } from './wait-for-line.js'

export { ToolFailure }

export interface ToolSettings {
  /** Bytes of output handed to the model per result. Default 30000. */
  outputBudgetBytes: number
  /** Foreground bash time limit when the call gives none, in ms. Default 120000. */
  defaultTimeoutMs: number
  /** Largest foreground bash time limit a call may ask for, in ms. Default 600000. */
  maxTimeoutMs: number
  /** Longest task_output wait_ms, in ms. Default 300000. */
  maxWaitMs: number
  /** How long a foreground bash runs before the call returns and leaves it running (yields) when the call gives no yield_ms, in ms. Default 10000. */
  defaultYieldMs: number
  /** Largest yield_ms a call may ask for, in ms (larger ones are cut to this). Default 600000. */
  maxYieldMs: number
  /**
   * bash offers network "host" (the host's whole network: its loopback services, its LAN) besides
   * "loopback" and "allow". The operator's choice, never the agent's. Default false.
   */
  allowHostNetwork: boolean
}

export const DEFAULT_TOOL_SETTINGS: Readonly<ToolSettings> = Object.freeze({
  outputBudgetBytes: 30_000,
  defaultTimeoutMs: 120_000,
  maxTimeoutMs: 600_000,
  maxWaitMs: 300_000,
  defaultYieldMs: 10_000,
  maxYieldMs: 600_000,
  allowHostNetwork: false,
})

/** Most output a filtered read scans in one call; the cursor says where the next call goes on. */
const FILTER_SCAN_BYTES = 8 * 1024 * 1024

export interface TaskOutputArgs {
  task_id: string
  wait_ms?: number
  from?: number
  filter?: string
  /** With wait_ms: wait for a new line matching this regular expression (RE2 syntax, matched by the daemon). */
  wait_for?: string
  max_bytes?: number
}

export interface TaskOutputResult {
  task: Task
  output: ModelOutput
  /** The regular expression applied, if any, and how many lines matched. */
  filter: { pattern: string; matchedLines: number } | null
  /** With wait_for: the line that matched, or that none did (absent without wait_for). */
  waitFor?: WaitForOutcome
  /** True when the ending was in this result: the task has ended and every byte was covered. */
  done: boolean
  outputPath: string
}

/** task_output: what this agent has not seen yet (or a non-consuming read from a byte offset). */
export async function readTaskOutput(session: OwnerSession, args: TaskOutputArgs, settings: ToolSettings, signal?: AbortSignal): Promise<TaskOutputResult> {
  const filter = args.filter === undefined ? null : compileFilter(args.filter)
  if (args.from !== undefined && (!Number.isInteger(args.from) || args.from < 0))
    throw new ToolFailure(`from must be a byte offset (0 or more), got ${args.from}`)
  if (args.max_bytes !== undefined && (!Number.isInteger(args.max_bytes) || args.max_bytes <= 0))
    throw new ToolFailure(`max_bytes must be a positive whole number, got ${args.max_bytes}`)
  if (args.wait_ms !== undefined && (!Number.isFinite(args.wait_ms) || args.wait_ms < 0))
    throw new ToolFailure(`wait_ms must be 0 or more, got ${args.wait_ms}`)
  if (args.wait_for !== undefined && args.wait_ms === undefined)
    throw new ToolFailure('wait_for needs wait_ms: how long to wait for a matching line, in milliseconds')
  if (args.wait_for !== undefined && filter) throw new ToolFailure('wait_for and filter cannot be combined: wait for the line, then filter')
  await session.open()
  return session.watch(args.task_id, async () => {
    const consuming = args.from === undefined
    let from = consuming ? session.cursor(args.task_id) : args.from!
    const budget = Math.min(args.max_bytes ?? settings.outputBudgetBytes, MAX_RESULT_BYTES)
    const waitMs = Math.min(args.wait_ms ?? 0, settings.maxWaitMs)
    const deadline = Date.now() + waitMs
    let probe: ReadResult
    if (args.wait_for !== undefined) probe = await awaitMatchingLine(session.client, args.task_id, from, args.wait_for, waitMs, signal)
    else {
      probe = await session.client.read(args.task_id, { from, maxBytes: 1, waitMs: Math.min(waitMs, 60_000), signal })
      // A long-poll answers at once for an output cut back below `from`: that is no reason to wait again.
      while (probe.outputBytes === from && !probe.done && Date.now() < deadline) {
        probe = await session.client.read(args.task_id, { from, maxBytes: 1, waitMs: Math.min(deadline - Date.now(), 60_000), signal })
      }
    }
    // The task cut its output back below this agent's place (truncated its stdout): it is read
    // again from its start, as `tail -f` does, rather than never again.
    if (consuming && probe.outputBytes < from) {
      session.rewind(args.task_id)
      from = 0
    }
    const recorded = await session.client.get(args.task_id)
    // A finished task's size is final; a running one's is the live size the last read saw.
    const task = isFinished(recorded) ? recorded : { ...recorded, outputBytes: Math.max(recorded.outputBytes, probe.outputBytes) }
    // A matching line ends the result: what came after it is for the next call.
    const end = probe.matched ? probe.matched.end : Math.max(from, task.outputBytes)
    const outputPath = outputPathOf(task)
    let output: ModelOutput
    let matched: TaskOutputResult['filter'] = null
    if (filter) {
      const scanEnd = Math.min(end, from + FILTER_SCAN_BYTES)
      const raw = await readBytes(session.client, task.id, from, scanEnd - from)
      // Only whole lines are consumed, unless this is the end of a finished task's output (or
      // one line is longer than a whole scan).
      const atEnd = isFinished(task) && scanEnd === end
      const lastNewline = raw.lastIndexOf(0x0a)
      let consumed = atEnd || lastNewline === -1 ? raw.length : lastNewline + 1
      // A character or control sequence the growing end cuts in two is held back, read again with the rest of it.
      const plain = plainTextChunk(raw.subarray(0, consumed), { final: atEnd })
      const text = plain.text
      consumed -= plain.heldBackBytes
      const lines = text.split('\n')
      if (lines[lines.length - 1] === '') lines.pop()
      const kept = lines.filter((line) => filter.test(line))
      const shaped = shapeText(kept.length > 0 ? `${kept.join('\n')}\n` : '', budget)
      output = { text: shaped.text, from, next: from + consumed, omittedBytes: shaped.omittedBytes }
      matched = { pattern: args.filter!, matchedLines: kept.length }
    } else {
      output = await readForModel(session.client, task.id, from, end, budget, isFinished(task))
    }
    const done = isFinished(task) && output.next >= task.outputBytes
    if (consuming) session.advance(task.id, output.next)
    if (done) session.markSeen(task.id)
    const waitFor = args.wait_for === undefined ? {} : { waitFor: { pattern: args.wait_for, matchedLine: probe.matched?.line ?? null, waitMs } }
    return { task, output, filter: matched, ...waitFor, done, outputPath }
  })
}

function compileFilter(pattern: string): RegExp {
  try {
    return new RegExp(pattern)
  } catch (error) {
    throw new ToolFailure(`filter is not a valid regular expression: ${(error as Error).message}`)
  }
}

export interface TaskKillArgs {
  task_id: string
  signal?: string
  reason?: string
}

/** task_kill: answers once no process of the task is left. */
export async function killTask(session: OwnerSession, args: TaskKillArgs): Promise<Task> {
  await session.open()
  session.markSeen(args.task_id)
  return session.watch(args.task_id, () =>
    inToolTerms('the kill was refused', undefined, () => session.client.kill(args.task_id, { signal: args.signal, reason: args.reason })),
  )
}

export interface TaskListEntry {
  id: string
  label: string
  state: Task['state']
  ageMs: number
  exitCode: number | null
  signal: string | null
  /** Who or what stopped it (null: it ended by itself, or runs). */
  stoppedBy: Task['stoppedBy']
  /** `persistent` tasks outlive the agent's session. */
  lifetime: Task['lifetime']
  outputBytes: number
  /** Where it listens while it runs (empty: nowhere, or a daemon that does not look). */
  ports: TaskPort[]
  /** Its readiness, when it has a condition (Readiness); absent without one. */
  ready?: Readiness
}

/** task_list: this agent's tasks, newest last. */
export async function listTasks(session: OwnerSession, now = Date.now()): Promise<TaskListEntry[]> {
  const tasks = await session.client.list({ all: true })
  return tasks.map((task) => ({
    id: task.id,
    label: taskLabel(task),
    state: task.state,
    ageMs: now - Date.parse(task.createdAt),
    exitCode: task.exitCode,
    signal: task.signal,
    // A daemon older than lifetimes sends neither field.
    stoppedBy: task.stoppedBy ?? null,
    lifetime: task.lifetime ?? 'owner',
    outputBytes: task.outputBytes,
    ports: task.ports ?? [],
    ...(task.ready === undefined ? {} : { ready: task.ready }),
  }))
}
