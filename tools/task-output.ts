import { defineTool } from './harness/index.js'
import { offeredNetworks, readTaskOutput, renderTaskOutput } from './core/index.js'
import { sessionOf, withPendingNotices, type ToolDeps } from './tool-context.js'

interface TaskOutputMeta {
  taskId: string
  output: string
  exitCode: number | null
  signal: string | null
  done: boolean
}

export function createTaskOutputTool(deps: ToolDeps) {
  return defineTool({
    name: 'task_output',
    description: [
      'Read the output of a background task. Without from, returns what you have not seen yet and remembers where you stopped.',
      'wait_ms blocks until new output arrives or the task ends (at most',
      `${deps.settings.maxWaitMs} ms); with wait_for, until a new line matches it (or the task ends, or wait_ms runs out).`,
      'from reads from a byte offset without moving your place. filter keeps only lines matching a regular expression.',
      'Long output keeps its head and tail and says how to read the rest (task_output with from).',
    ].join(' '),
    parameters: {
      task_id: { type: 'string', required: true, description: 'The task id that bash returned' },
      wait_ms: { type: 'number', description: 'Wait up to this many milliseconds for new output or the end' },
      from: { type: 'number', description: 'Byte offset to read from (does not move your place)' },
      filter: { type: 'string', description: 'JavaScript regular expression; only matching lines are returned' },
      wait_for: {
        type: 'string',
        description:
          'With wait_ms: wait for a new line matching this regular expression (RE2 syntax: no backreferences or lookaround) ' +
          'instead of any new output; returns the output up to and including that line (e.g. a server\'s "listening on")',
      },
      max_bytes: { type: 'number', description: `Byte budget for this result (default ${deps.settings.outputBudgetBytes})` },
    },
    async execute(args, exec) {
      const session = sessionOf(deps, exec)
      const result = await readTaskOutput(session, args, deps.settings, exec.signal)
      const meta: TaskOutputMeta = {
        taskId: result.task.id,
        output: result.output.text,
        exitCode: result.task.exitCode,
        signal: result.task.signal,
        done: result.done,
      }
      return { content: withPendingNotices(session, renderTaskOutput(result, offeredNetworks(deps.settings))), meta }
    },
    presentCall: (args) => ({ card: 'generic', title: `task_output ${args.task_id}`, kind: 'read', rawInput: args }),
    presentResult: (args, result) => {
      const meta = result.meta as TaskOutputMeta | undefined
      if (!meta) return { card: 'terminal', title: `task ${args.task_id}`, output: result.content.map((block) => block.text).join('\n') }
      return { card: 'terminal', title: `task ${meta.taskId}`, output: meta.output, ...(meta.done ? { exitCode: meta.exitCode, signal: meta.signal } : {}) }
    },
  })
}
