import { isFinished } from '../client/index.js'
import { defineTool } from './harness/index.js'
import { networkParameterDescription, offeredNetworks, refuseUnofferedNetwork, renderBash, runBash, type BashOutcome } from './core/index.js'
import type { Tool } from './harness/index.js'
import { sessionOf, withPendingNotices, type ToolDeps } from './tool-context.js'

/** The bash result's card data (every host's presenter reads it). */
export interface BashMeta {
  taskId: string
  background: boolean
  /** The call returned before the command ended; the task went on in the background. */
  yielded: boolean
  output: string
  exitCode: number | null
  signal: string | null
}

export function bashMeta(outcome: BashOutcome): BashMeta {
  return {
    taskId: outcome.task.id,
    background: outcome.kind === 'background' || outcome.kind === 'ready',
    // A start that waited for readiness returns like a yield: the output so far, the task running on.
    yielded: outcome.kind === 'yielded' || (outcome.kind === 'ready' && !isFinished(outcome.task)),
    output: outcome.kind === 'background' ? '' : outcome.output.text,
    exitCode: outcome.task.exitCode,
    signal: outcome.task.signal,
  }
}

/** The bash parameter that chooses the working directory (the default comes from the host: see chooseWorkingFolder). */
export const BASH_CWD_DESCRIPTION =
  "Working directory (default: the folder the host names for your work, such as the MCP client's first root " +
  "or the agent session's folder, else the agent process's working directory; a relative path is taken from that default)"

/** The bash parameter that gives the command a stdin pipe (every host shows the same words). */
export const BASH_STDIN_DESCRIPTION =
  'Give the command a stdin pipe that task_input writes to (with run_in_background, or a yield_ms after which it runs on); default /dev/null'

/** The bash parameter that runs the command on a pseudo-terminal. */
export const BASH_TTY_DESCRIPTION =
  'Run on a pseudo-terminal (80x24), for programs that only behave interactively on one: REPLs, prompts, top. Implies stdin: ' +
  'task_input types into it (the terminal echoes what you type). Output comes back as plain text, control sequences removed'

/** The bash parameter that gives the command a port of its own. */
export const BASH_PORT_DESCRIPTION = '"auto": give the command a free port as $PORT (no other task holds it; the result says which), for a server to listen on'

/** The bash parameter that makes a background start wait until the command is ready. */
export const BASH_READY_DESCRIPTION =
  'With run_in_background: return when the command is ready instead of at once, with the output so far ' +
  '(a server: its "listening" line, its port, or its URL answering); exactly one of pattern, port and url. ' +
  'If it is not ready in time, or ends first, the result says why'

export function createBashTool(deps: ToolDeps): Tool {
  const { defaultYieldMs, maxYieldMs, defaultTimeoutMs, maxTimeoutMs } = deps.settings
  const offered = offeredNetworks(deps.settings)
  const tool = defineTool({
    name: 'bash',
    description: [
      'Run a shell command (sh -c) in the working directory and return its output with [exit code: N].',
      'Output longer than the budget keeps its head and tail and says how to read the rest (task_output with from).',
      `A command still running after yield_ms (default ${defaultYieldMs}) is not stopped: the call returns its output so far,`,
      'its task id and "still running", and the command goes on as a background task.',
      'Set run_in_background for long-running commands: it returns a task id at once; read the output with task_output,',
      'stop it with task_kill; a notice arrives when it finishes. With ready, it returns once the command is ready instead (a server up).',
      'stdin is /dev/null unless stdin is set: then write to it with task_input (a REPL, a prompt that waits for an answer).',
      'tty runs it on a pseudo-terminal instead, for programs that need one (REPLs, prompts, top): ' +
        'task_input types into it, and its output is returned as plain text.',
      `network chooses what the command reaches: ${offered.map((mode) => `"${mode}" ${NETWORK_SUMMARY[mode]}`).join(', ')}.`,
    ].join(' '),
    parameters: {
      command: { type: 'string', required: true, description: 'The shell command to run' },
      description: { type: 'string', description: 'What the command does, in a few words (used as the task label)' },
      timeout: {
        type: 'number',
        description:
          `Time limit in milliseconds; the command is stopped when it passes, also after a yield (foreground default ${defaultTimeoutMs}` +
          `, at most ${maxTimeoutMs}; background: none unless given)`,
      },
      run_in_background: { type: 'boolean', description: 'Return at once with a task id instead of waiting' },
      cwd: { type: 'string', description: BASH_CWD_DESCRIPTION },
      yield_ms: {
        type: 'number',
        description:
          `Wait at most this many milliseconds, then return with the command still running in the background (default ${defaultYieldMs}` +
          `, at most ${maxYieldMs}; not used with run_in_background)`,
      },
      persistent: {
        type: 'boolean',
        description: 'Keep the task running after this agent session ends (a server meant to outlive you); by default your tasks stop with the session',
      },
      stdin: { type: 'boolean', description: BASH_STDIN_DESCRIPTION },
      tty: { type: 'boolean', description: BASH_TTY_DESCRIPTION },
      network: { type: 'string', enum: offered, description: networkParameterDescription(offered) },
      port: { type: 'string', enum: ['auto'], description: BASH_PORT_DESCRIPTION },
      ready: {
        type: 'object',
        description: BASH_READY_DESCRIPTION,
        properties: {
          pattern: { type: 'string', description: 'A line of its output matches this regular expression (RE2 syntax)' },
          port: { type: 'number', description: 'Something in its network listens on this port' },
          url: { type: 'string', description: 'This http(s) URL answers 2xx or 3xx, fetched from inside its network' },
          timeout_ms: { type: 'number', description: 'How long it may take from the start, in milliseconds (default 60000)' },
        },
      },
      after: {
        type: 'array',
        items: { type: 'string' },
        description:
          'Task ids (from earlier bash calls): run only after they have ended, and only if all exited 0 (else it fails, naming the one that did not)',
      },
    },
    async execute(args, exec) {
      const session = sessionOf(deps, exec)
      const outcome = await runBash(session, args, deps.settings, exec.signal)
      return { content: withPendingNotices(session, renderBash(outcome, offered)), meta: bashMeta(outcome) }
    },
    presentCall: (args) => ({
      card: 'terminal',
      title: args.command,
      ...(args.description ? { description: args.description } : {}),
      ...(args.cwd ? { cwd: args.cwd } : {}),
    }),
    presentResult: (args, result) => {
      const meta = result.meta as BashMeta | undefined
      if (!meta) return { card: 'terminal', title: args.command, output: result.content.map((block) => block.text).join('\n') }
      // A yielded call (or a start that waited to be ready) has the output so far and no exit yet.
      if (meta.yielded) return { card: 'terminal', title: args.command, output: meta.output }
      // A background start has no output or exit yet: its task_output calls show those.
      if (meta.background) return { card: 'terminal', title: args.command }
      return { card: 'terminal', title: args.command, output: meta.output, exitCode: meta.exitCode, signal: meta.signal }
    },
  })
  // Before the schema's check: host where it is not offered gets its reason, not an enum list.
  return {
    ...tool,
    execute: async (args, exec) => {
      refuseUnofferedNetwork((args as { network?: unknown } | null)?.network, deps.settings)
      return tool.execute(args, exec)
    },
  }
}

/** What each network reaches, in the few words of bash's description. */
const NETWORK_SUMMARY = {
  loopback: "(the default) only your own tasks' servers on 127.0.0.1",
  allow: "adds the operator's allowlist through tend's proxy",
  host: "the host's whole network",
} as const
