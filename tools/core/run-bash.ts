import { isAbsolute, resolve } from 'node:path'
import type { NetworkMode, Task } from '../../client/index.js'
import { isTaskId } from '../../protocol/ids.js'
import { refuseUnofferedNetwork } from './agent-network.js'
import { awaitReady, readyCondition, validateReadyArgs, type ReadyArgs, type ReadyOutcome } from './await-ready.js'
import { awaitForeground, type ForegroundOutcome } from './foreground.js'
import type { ToolSettings } from './operations.js'
import type { OwnerSession } from './owner-session.js'
import { inToolTerms } from './refusal-terms.js'
import { ToolFailure } from './tool-failure.js'

export interface BashArgs {
  command: string
  description?: string
  timeout?: number
  run_in_background?: boolean
  cwd?: string
  /** Foreground only: return after this many ms with the command still running. */
  yield_ms?: number
  /** The task outlives the agent's session (lifetime `persistent`). */
  persistent?: boolean
  /** stdin is a pipe that task_input writes to (else /dev/null). */
  stdin?: boolean
  /** Run on a pseudo-terminal (80x24): task_input types into it; its output is read as plain text. */
  tty?: boolean
  /** What a sandboxed command's network reaches; `host` only where ToolSettings.allowHostNetwork. */
  network?: NetworkMode
  /** `auto`: the command gets a free port as PORT, held for it until it ends. */
  port?: 'auto'
  /** With run_in_background: the call returns once the command is ready (or that failed), not at once. */
  ready?: ReadyArgs
  /** Task ids: the command stays queued until they end, and starts if all exited 0. */
  after?: string[]
}

/** How the call ended, and what the start said deserves a word (a port another task already serves). */
export type BashOutcome = ({ kind: 'background'; task: Task } | ReadyOutcome | ForegroundOutcome) & { warnings?: string[] }

/** bash: one path for both modes — every command is a tend task. */
export async function runBash(session: OwnerSession, args: BashArgs, settings: ToolSettings, signal?: AbortSignal): Promise<BashOutcome> {
  if (args.command.trim() === '') throw new ToolFailure('command is empty')
  if (args.timeout !== undefined && (!Number.isInteger(args.timeout) || args.timeout <= 0))
    throw new ToolFailure(`timeout must be a positive whole number of milliseconds, got ${args.timeout}`)
  if (args.yield_ms !== undefined && (!Number.isInteger(args.yield_ms) || args.yield_ms <= 0))
    throw new ToolFailure(`yield_ms must be a positive whole number of milliseconds, got ${args.yield_ms}`)
  refuseUnofferedNetwork(args.network, settings)
  validateReadyArgs(args.ready, args.run_in_background === true)
  const notIds = (args.after ?? []).filter((id) => !isTaskId(id))
  if (notIds.length > 0)
    throw new ToolFailure(
      `after must list task ids (12 lowercase letters or digits, as bash returned them), got ${notIds.map((id) => JSON.stringify(id)).join(', ')}`,
    )
  if (signal?.aborted) throw new ToolFailure('aborted before the task was started; nothing was run')
  const background = args.run_in_background === true
  const timeoutMs = background ? args.timeout : Math.min(args.timeout ?? settings.defaultTimeoutMs, settings.maxTimeoutMs)
  await session.open()
  // A relative cwd is taken from the default, as the host's folder is the agent's idea of "here".
  const defaultCwd = args.cwd === undefined || !isAbsolute(args.cwd) ? await session.defaultCwd() : undefined
  const cwd = defaultCwd ? resolve(defaultCwd.path, args.cwd ?? '.') : args.cwd
  const cwdNote =
    defaultCwd && `cwd ${args.cwd === undefined ? 'was not given' : `${args.cwd} is relative`}: the default is ${defaultCwd.path} (${defaultCwd.source})`
  const started = await inToolTerms('the task was refused', cwdNote, () =>
    session.client.start({
      command: args.command,
      shell: true,
      cwd,
      name: args.description,
      timeoutMs,
      ...(args.persistent ? { lifetime: 'persistent' as const } : {}),
      ...(args.stdin ? { stdin: 'pipe' as const } : {}),
      ...(args.tty ? { tty: true } : {}),
      ...(args.network ? { network: args.network } : {}),
      ...(args.port ? { port: args.port } : {}),
      ...(args.ready ? { ready: readyCondition(args.ready) } : {}),
      ...(args.after && args.after.length > 0 ? { after: args.after } : {}),
    }),
  )
  const warnings = started.warnings && started.warnings.length > 0 ? { warnings: started.warnings } : {}
  if (signal?.aborted) {
    // The abort came while the task was being admitted: it must not run.
    session.markSeen(started.id)
    await session.client.kill(started.id, { reason: 'the tool call was aborted' })
    throw new ToolFailure('aborted before the task was started; nothing was run')
  }
  if (background && args.ready) return { ...(await awaitReady(session, started, args.ready, settings.outputBudgetBytes, signal)), ...warnings }
  if (background) return { kind: 'background', task: started, ...warnings }
  const yieldMs = Math.min(args.yield_ms ?? settings.defaultYieldMs, settings.maxYieldMs)
  return { ...(await awaitForeground(session, started, yieldMs, settings.outputBudgetBytes, signal)), ...warnings }
}
