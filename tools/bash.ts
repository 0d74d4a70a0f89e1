import { defineTool } from './harness/index.js'
import { renderBash, runBash } from './core/index.js'
import { sessionOf, withPendingNotices, type ToolDeps } from './tool-context.js'

interface BashMeta {
  taskId: string
  background: boolean
  output: string
  exitCode: number | null
  signal: string | null
}

export function createBashTool(deps: ToolDeps) {
  return defineTool({
    name: 'bash',
    description: [
      'Run a shell command (sh -c) in the working directory and return its output with [exit code: N].',
      'Output longer than the budget keeps its head and tail and says where the full output is.',
      'Set run_in_background for long-running commands: it returns a task id at once; read the output with task_output,',
      'stop it with task_kill; a notice arrives when it finishes. stdin is /dev/null.',
    ].join(' '),
    parameters: {
      command: { type: 'string', required: true, description: 'The shell command to run' },
      description: { type: 'string', description: 'What the command does, in a few words (used as the task label)' },
      timeout: { type: 'number', description: `Time limit in milliseconds (foreground default ${deps.settings.defaultTimeoutMs}, at most ${deps.settings.maxTimeoutMs}; background: none unless given)` },
      run_in_background: { type: 'boolean', description: 'Return at once with a task id instead of waiting' },
      cwd: { type: 'string', description: 'Working directory (default: the agent process working directory)' },
    },
    async execute(args, exec) {
      const session = sessionOf(deps, exec)
      const outcome = await runBash(session, args, deps.settings, exec.signal)
      const meta: BashMeta = {
        taskId: outcome.task.id,
        background: outcome.kind === 'background',
        output: outcome.kind === 'foreground' ? outcome.output.text : '',
        exitCode: outcome.task.exitCode,
        signal: outcome.task.signal,
      }
      return { content: withPendingNotices(session, renderBash(outcome)), meta }
    },
    presentCall: (args) => ({ card: 'terminal', title: args.command, ...(args.description ? { description: args.description } : {}), ...(args.cwd ? { cwd: args.cwd } : {}) }),
    presentResult: (args, result) => {
      const meta = result.meta as BashMeta | undefined
      if (!meta) return { card: 'terminal', title: args.command, output: result.content.map((block) => block.text).join('\n') }
      // A background start has no output or exit yet: its task_output calls show those.
      if (meta.background) return { card: 'terminal', title: args.command }
      return { card: 'terminal', title: args.command, output: meta.output, exitCode: meta.exitCode, signal: meta.signal }
    },
  })
}

