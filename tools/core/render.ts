import { formatBytes, formatDuration, isFinished, taskLabel, type NetworkMode, type Task } from '../../client/index.js'
import { agentSandboxHint, blockedText } from './agent-hint.js'
import { formatSpan } from '../../protocol/usage-summary.js'
import { costSummary, withCost } from './cost-summary.js'
import { serverNotes } from './task-facts.js'
import { DEFAULT_OFFERED_NETWORKS } from './agent-network.js'
import type { TaskListEntry, TaskOutputResult } from './operations.js'
import type { BashOutcome } from './run-bash.js'
import type { TaskInputOutcome } from './task-input.js'
import type { WaitForOutcome } from './wait-for-line.js'

/** Model-facing text of each tool's result; shared by every host adapter (harness, MCP). */

/**
 * How the task ended; for one that failed, what tend's network filter refused it and, when the
 * record or the end of its output (`outputTail`) shows a refusal of its sandbox, what its sandbox
 * allowed, with the wider networks among `offered` (the ones bash offers this agent).
 */
export function endingText(task: Task, offered: readonly NetworkMode[] = DEFAULT_OFFERED_NETWORKS, outputTail = ''): string {
  return [endingLine(task), costSummary(task), blockedText(task), agentSandboxHint(task, offered, outputTail)]
    .filter((line) => line !== null)
    .map((line, index) => (index === 0 ? line : `[${line}]`))
    .join('\n')
}

function endingLine(task: Task): string {
  const stoppedBy = task.stoppedBy ? `; stopped by: ${task.stoppedBy}` : ''
  switch (task.state) {
    case 'exited':
      return `[exit code: ${task.exitCode}]`
    case 'timed_out':
      return `[${task.reason}; the task was stopped${task.signal ? ` with ${task.signal}` : ''}${stoppedBy}]`
    case 'killed':
      return `[killed: ${task.reason}${task.signal ? `; signal: ${task.signal}` : ''}${stoppedBy}]`
    default:
      return `[${task.state}: ${task.reason ?? 'no reason recorded'}${stoppedBy}]`
  }
}

export function renderBash(outcome: BashOutcome, offered?: readonly NetworkMode[]): string {
  return [bashText(outcome, offered), ...(outcome.warnings ?? []).map((warning) => `[warning: ${warning}]`)].join('\n')
}

function bashText(outcome: BashOutcome, offered?: readonly NetworkMode[]): string {
  const { task } = outcome
  if (outcome.kind === 'background') {
    return [
      `Started background task ${task.id} (${taskLabel(task)}).${givenPortText(task)}${waitsForText(task)}`,
      `Read its output with task_output (task_id: "${task.id}"); stop it with task_kill. A notice arrives when it finishes.`,
    ].join('\n')
  }
  if (outcome.kind === 'ready') {
    const output = withNewline(outcome.output.text === '' ? '(no output yet)' : outcome.output.text)
    return `Started background task ${task.id} (${taskLabel(task)}).${givenPortText(task)}\n${output}${readinessText(task, offered, outcome.output.text)}`
  }
  if (outcome.kind === 'yielded')
    return `${withNewline(outcome.output.text === '' ? '(no output yet)' : outcome.output.text)}${stillRunningText(task, outcome.yieldMs)}`
  return `${withNewline(outcome.output.text === '' ? '(no output)' : outcome.output.text)}${endingText(task, offered, outcome.output.text)}`
}

/** How a background start's readiness went, and how to go on from it. */
function readinessText(task: Task, offered?: readonly NetworkMode[], outputTail = ''): string {
  const goOn = `Read more with task_output (task_id: "${task.id}"); stop it with task_kill. A notice arrives when it finishes.`
  const ready = task.ready
  const condition = task.readyWhen
  if (isFinished(task)) return `[not ready: the task ended first]\n${endingText(task, offered, outputTail)}`
  if (ready && 'by' in ready) {
    const started = task.startedAt === null ? Date.parse(ready.at) : Date.parse(task.startedAt)
    const held =
      ready.by === 'pattern'
        ? `the line ${JSON.stringify(ready.line ?? '')} matched`
        : ready.by === 'port'
          ? `something listens on port ${condition?.port}`
          : `${condition?.url} answered`
    return `[ready after ${formatSpan(Date.parse(ready.at) - started)}: ${held}; it goes on in the background. ${goOn}]`
  }
  if (ready && ready.failed === 'timed out' && condition) {
    const missed =
      condition.pattern !== undefined
        ? `no line matched /${condition.pattern}/`
        : condition.port !== undefined
          ? `nothing listened on port ${condition.port}`
          : `${condition.url} did not answer 2xx or 3xx`
    const readMore = `read more with task_output (task_id: "${task.id}"). A notice arrives when it finishes.`
    return `[not ready: ${missed} within ${condition.timeoutMs} ms; the task still runs: stop it with task_kill, or ${readMore}]`
  }
  return `[not ready yet; the task runs on in the background. ${goOn}]`
}

/** What a start with `after` waits for before it runs. */
function waitsForText(task: Task): string {
  if (!task.after || task.after.ids.length === 0) return ''
  const { ids } = task.after
  const which = ids.length === 1 ? `task ${ids[0]}` : `tasks ${ids.join(', ')}`
  const end = ids.length === 1 ? 'it exited 0' : 'all exited 0'
  return ` It waits for ${which} to end and starts ${task.after.any ? 'whatever they ended as' : `if ${end}`}.`
}

/** The port a `port: "auto"` start was given (a daemon before ports records none). */
const givenPortText = (task: Task): string => (typeof task.port === 'number' ? ` It was given port ${task.port} as PORT.` : '')

/** What a yielded call tells the model: the task goes on, and how to follow or stop it. */
export function stillRunningText(task: Task, yieldMs: number): string {
  const limit = task.timeoutMs === null ? '' : ` (at the latest when its time limit of ${task.timeoutMs}ms stops it)`
  return [
    `[still running after ${yieldMs}ms; it goes on as background task ${task.id} (${taskLabel(task)}).${givenPortText(task)}`,
    `Read more with task_output (task_id: "${task.id}"); stop it with task_kill. A notice arrives when it finishes${limit}.]`,
  ].join(' ')
}

const withNewline = (text: string): string => (text.endsWith('\n') ? text : `${text}\n`)

export function renderTaskOutput(result: TaskOutputResult, offered?: readonly NetworkMode[]): string {
  const { task, output } = result
  const notes = isFinished(task) ? [] : serverNotes(task)
  const lines = [`task ${task.id} (${taskLabel(task)}): ${[task.state, ...notes].join(' ')}; bytes ${output.from}–${output.next} of ${task.outputBytes}`]
  if (result.filter)
    lines.push(`[filter /${result.filter.pattern}/: ${result.filter.matchedLines} matching line${result.filter.matchedLines === 1 ? '' : 's'}]`)
  if (result.waitFor) lines.push(`[${waitForText(result.waitFor, result.done)}]`)
  const body = output.text === '' ? '(no new output)' : output.text.replace(/\n$/, '')
  lines.push(body)
  if (result.done) lines.push(endingText(task, offered, output.text))
  // Held-back bytes (a terminal's sequence still being written) are not more output to read now.
  else if (output.next + (output.heldBackBytes ?? 0) < task.outputBytes) lines.push(`[more output: call task_output again to read from byte ${output.next}]`)
  else lines.push('[still running: call task_output again later, or with wait_ms to wait for more]')
  return lines.join('\n')
}

/** Whether the line task_output waited for came, and when it did not, why it returned. */
function waitForText(waitFor: WaitForOutcome, done: boolean): string {
  const what = `wait_for /${waitFor.pattern}/`
  if (waitFor.matchedLine !== null) return `${what}: matched the line ${JSON.stringify(waitFor.matchedLine)}`
  if (done) return `${what}: the task ended without a matching line`
  return `${what}: no new line matched in ${waitFor.waitMs} ms`
}

/** What was sent, then the output that came since the agent's place, exactly as task_output shows it. */
export function renderTaskInput(outcome: TaskInputOutcome, offered?: readonly NetworkMode[]): string {
  const bytes = `${outcome.sentBytes} byte${outcome.sentBytes === 1 ? '' : 's'}`
  // On a terminal the end of input is the EOF character typed into it; the terminal stays.
  const sent = outcome.task.tty
    ? `typed ${bytes} into the terminal of task ${outcome.task.id}${outcome.eof ? ', then Ctrl-D (end of input; the terminal stays open)' : ''}`
    : `sent ${bytes} to the stdin of task ${outcome.task.id}${outcome.eof ? ', then closed it (end of input)' : ''}`
  return `${sent}\n${renderTaskOutput(outcome, offered)}`
}

export function renderTaskKill(task: Task): string {
  const details = [task.signal ? `signal: ${task.signal}` : '', task.stoppedBy ? `stopped by: ${task.stoppedBy}` : ''].filter(Boolean).join(', ')
  const ending =
    `task ${task.id} (${taskLabel(task)}) is ${task.state}${details ? ` (${details})` : ''}` +
    `; no process of it is left.${task.reason ? ` Reason: ${task.reason}.` : ''}`
  return withCost(ending, task)
}

export function renderTaskList(entries: TaskListEntry[]): string {
  if (entries.length === 0) return 'no tasks'
  const cells = entries.map((entry) => ({
    state: entry.stoppedBy ? `${entry.state}(${entry.stoppedBy})` : entry.state,
    exit: entry.exitCode !== null ? String(entry.exitCode) : (entry.signal ?? '-'),
    age: formatDuration(entry.ageMs),
    output: formatBytes(entry.outputBytes),
  }))
  // Each column as wide as its longest cell (killed(session-end), SIGKILL), at least as wide as before.
  const width = (column: keyof (typeof cells)[number], least: number) => Math.max(least, ...cells.map((cell) => cell[column].length))
  const widths = { state: width('state', 9), exit: width('exit', 7), age: width('age', 6), output: width('output', 6) }
  const rows = entries.map((entry, index) => {
    const cell = cells[index]!
    const persistent = entry.lifetime === 'persistent' ? '  [persistent]' : ''
    const notes = serverNotes(entry)
    return (
      `${entry.id}  ${cell.state.padEnd(widths.state)}  exit ${cell.exit.padEnd(widths.exit)}  age ${cell.age.padEnd(widths.age)}` +
      `  output ${cell.output.padEnd(widths.output)}  ${entry.label}${persistent}${notes.length > 0 ? `  ${notes.join(' ')}` : ''}`
    )
  })
  return rows.join('\n')
}
