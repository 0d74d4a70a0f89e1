// What starting a finished task again asks for: the request made of its record, and the lines
// that show it. Its environment's values are never stored (only their names), so they cannot be
// replayed; nor can the tasks it waited for, which have ended.

import { formatBytes, formatDuration, quotedCommand, shellLine, visible } from '../shared/format.js'

const NAME_MAX = 200
const SUFFIX = ' (again)'

/** The request that starts it again: what its record keeps of the one that started it. */
export function againRequest(task) {
  const line = shellLine(task)
  const body = {
    command: line === null ? task.command : [line],
    shell: task.shell,
    cwd: task.cwd,
    owner: task.owner,
    sandbox: task.sandbox,
    network: task.network,
    lifetime: task.lifetime,
    maxOutputBytes: task.maxOutputBytes,
  }
  if (task.name) body.name = `${task.name.slice(0, NAME_MAX - SUFFIX.length)}${SUFFIX}`
  if (task.allowNet?.length) body.allowNet = task.allowNet
  if (task.writablePaths?.length) body.writablePaths = task.writablePaths
  if (task.timeoutMs) body.timeoutMs = task.timeoutMs
  if (task.memoryBytes) body.memoryBytes = task.memoryBytes
  if (task.pidsMax) body.pidsMax = task.pidsMax
  if (task.stdin === 'pipe' || task.stdin === 'closed') body.stdin = 'pipe'
  if (task.tty) body.tty = { cols: task.tty.cols, rows: task.tty.rows }
  if (task.readyWhen) body.ready = task.readyWhen
  if (task.portAuto) body.port = 'auto'
  else if (task.port) body.port = task.port
  return body
}

/** What the confirmation shows: what will run, and what cannot be replayed. */
export function againLines(body, task) {
  const lines = [
    `Command: ${quotedCommand(task)}${body.shell ? ' (a shell line, sh -c)' : ''}`,
    `Cwd: ${visible(body.cwd)}`,
    `Owner ${visible(body.owner)}, lifetime ${body.lifetime}; sandbox ${body.sandbox}, network ${body.network}` +
      `${body.allowNet ? ` (also ${body.allowNet.map(visible).join(', ')})` : ''}`,
  ]
  const limits = [
    body.timeoutMs && `time limit ${formatDuration(body.timeoutMs)}`,
    body.memoryBytes && `memory ${formatBytes(body.memoryBytes)}`,
    body.pidsMax && `${body.pidsMax} processes`,
    `output cap ${formatBytes(body.maxOutputBytes)}`,
  ].filter(Boolean)
  lines.push(`Limits: ${limits.join(', ')}`)
  if (body.writablePaths) lines.push(`Also writable: ${body.writablePaths.map(visible).join(', ')}`)
  if (body.tty) lines.push(`On a terminal, ${body.tty.cols}×${body.tty.rows}`)
  else if (body.stdin) lines.push('Its stdin a pipe (for the input box)')
  if (body.name) lines.push(`Name: ${visible(body.name)}`)
  if (task.envKeys?.length) {
    lines.push(`Not replayed: its environment variables ${task.envKeys.map(visible).join(', ')} (their values are never stored).`)
  }
  if (task.after?.length) lines.push(`Not replayed: waiting for ${task.after.join(', ')} (those have ended).`)
  return lines
}
