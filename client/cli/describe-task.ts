import {
  describePorts,
  describeStoppedBy,
  destinationLabel,
  formatBytes,
  sandboxHint,
  taskLabel,
  visibleLine,
  type CorruptTask,
  type Task,
} from '../../protocol/index.js'
import { paintState, printJson, type CliIo } from './output.js'
import { describeCondition, describeReadiness } from './readiness.js'
import { liveText, usageText } from './usage-text.js'

/**
 * `tend show`'s answer for a task record: JSON, or its fields (a corrupt entry's own, with what to
 * do about it), and the sandbox's hint when the end of its output (`outputTail`) shows a refusal.
 */
export function printTask(io: CliIo, task: Task, outputTail = ''): void {
  if (io.json) printJson(io, task)
  else if (task.state === 'corrupt') {
    io.out(describeCorrupt(io, task))
    io.err(
      `tend: ${task.id} is a corrupt spool entry (docs/spool.md): any output it has is in ${task.spool}` +
        `/output.log; remove it with \`tend rm ${task.id}\` (\`tend gc\` removes every corrupt entry)`,
    )
  } else {
    io.out(describeTask(io, task))
    const hint = sandboxHint(task, outputTail)
    if (hint) io.err(hint)
  }
}

export function describeTask(io: CliIo, task: Task): string {
  const fields: Array<[string, string | null]> = [
    ['id', task.id],
    ['label', taskLabel(task)],
    ['state', paintState(io, task)],
    ['exit code', task.exitCode === null ? null : String(task.exitCode)],
    ['signal', task.signal],
    ['reason', task.reason],
    ['stopped by', task.stoppedBy ? describeStoppedBy(task.stoppedBy) : null],
    ['after', task.after ? `${task.after.ids.join(' ')} (${task.after.any ? 'starts once they end, however' : 'starts if all exit 0'})` : null],
    ['owner', task.owner],
    ['lifetime', task.lifetime ?? 'owner'],
    ['stdin', task.tty ? null : stdinText(task.stdin)],
    ['tty', task.tty ? `${task.tty.cols}x${task.tty.rows} (tend send types into it; tend resize ID COLS ROWS)` : null],
    ['command', task.shell ? `sh -c ${JSON.stringify(task.command[2])}` : JSON.stringify(task.command)],
    ['cwd', task.cwd],
    ['env added', task.envKeys.length > 0 ? task.envKeys.join(' ') : null],
    ['sandbox', `${task.sandbox}${task.writablePaths.length ? `, writable ${task.writablePaths.join(' ')}` : ''}`],
    ['network', networkText(task)],
    ['port', task.port === null || task.port === undefined ? null : `${task.port} (given as $PORT)`],
    ['ports', task.ports?.length ? describePorts(task.ports) : null],
    ['blocked', blockedText(task)],
    ['can write', task.sandbox === 'off' || !task.sandboxWritable ? null : task.sandboxWritable.join(' ')],
    ['warnings', task.warnings?.length ? task.warnings.join('; ') : null],
    [
      'limits',
      task.memoryBytes === null && task.pidsMax === null
        ? null
        : `memory ${task.memoryBytes === null ? '-' : formatBytes(task.memoryBytes)}, processes ${task.pidsMax ?? '-'}`,
    ],
    ['pid', task.pid === null ? null : String(task.pid)],
    ['ready when', task.readyWhen ? describeCondition(task.readyWhen) : null],
    ['ready', describeReadiness(task)],
    ['timeout', task.timeoutMs === null ? null : `${task.timeoutMs}ms`],
    ['now', liveText(task)],
    ['used', usageText(task)],
    ['output', `${formatBytes(task.outputBytes)} (cap ${formatBytes(task.maxOutputBytes)})`],
    ['output lost', task.outputLostBytes ? `${task.outputLostBytes} bytes the terminal showed are missing from output.log (the disk refused them)` : null],
    ['input lost', task.inputLogLostBytes ? `${task.inputLogLostBytes} bytes sent to stdin are missing from input.log (the disk refused them)` : null],
    ['created', task.createdAt],
    ['started', task.startedAt],
    ['ended', task.endedAt],
    ['spool', task.spool],
  ]
  return formatFields(fields)
}

/** A corrupt spool entry: what is wrong, and what could be salvaged from it. */
export function describeCorrupt(io: CliIo, task: CorruptTask): string {
  return formatFields([
    ['id', task.id],
    ['state', paintState(io, task)],
    ['reason', task.reason],
    ['owner', task.owner],
    ['label', taskLabel(task) || null],
    ['created', task.createdAt],
    ['output', formatBytes(task.outputBytes)],
    ['spool', task.spool],
  ])
}

export function formatFields(fields: Array<[string, string | null]>): string {
  return (
    fields
      .filter((field): field is [string, string] => field[1] !== null)
      // One line each: a value of many lines (a name, a reason) would forge the fields after it.
      .map(([key, value]) => `${`${key}:`.padEnd(11)} ${visibleLine(value)}`)
      .join('\n')
  )
}

/** Nothing for the usual /dev/null; a pipe says how to write to it. */
function stdinText(stdin: Task['stdin']): string | null {
  if (stdin === 'pipe') return 'pipe (tend send ID TEXT writes to it)'
  if (stdin === 'closed') return 'pipe, closed (end of input sent)'
  return null
}

/** The task's network mode, what it was allowed besides the daemon's list, and its use of the proxy. */
function networkText(task: Task): string {
  const extra = task.allowNet?.length ? `, also ${task.allowNet.join(' ')}` : ''
  const use = task.networkUse
  const counts = use ? ` (${use.allowed} allowed, ${use.blocked} blocked; ${formatBytes(use.sentBytes)} sent, ${formatBytes(use.receivedBytes)} received)` : ''
  return `${task.network}${extra}${counts}`
}

/** The destinations the egress proxy refused it, each with why (network.log in its spool has every decision). */
function blockedText(task: Task): string | null {
  const blocked = task.networkUse?.blockedDestinations ?? []
  if (blocked.length === 0) return null
  return blocked.map((entry) => `${destinationLabel(entry)} (${entry.reason}${entry.count > 1 ? `, ${entry.count}×` : ''})`).join(', ')
}
