import { defineTool } from './harness/index.js'
import { offeredNetworks, renderTaskInput, sendTaskInput, TASK_INPUT_DEFAULT_YIELD_MS } from './core/index.js'
import { sessionOf, withPendingNotices, type ToolDeps } from './tool-context.js'

interface TaskInputMeta {
  taskId: string
  sentBytes: number
  eof: boolean
  output: string
  exitCode: number | null
  signal: string | null
  done: boolean
}

/** The description the model reads (every host shows the same). */
export function taskInputDescription(maxYieldMs: number): string {
  return [
    'Write text to the stdin of a task started with bash stdin: true (a REPL, a debugger, a prompt), or type it into the ' +
      'terminal of one started with tty: true, then return the output that arrived since you last read it, as task_output does.',
    'The text is sent exactly as given: end a line with "\\n". eof: true closes the stdin after the text (the program reads end-of-file).',
    'On a terminal the text is echoed, "\\u0003" is Ctrl-C, and eof: true types Ctrl-D (the terminal stays open).',
    `The call waits up to yield_ms (default ${TASK_INPUT_DEFAULT_YIELD_MS}, at most ${maxYieldMs}` +
      `) for output, and returns sooner once output has come and paused, or the task has ended.`,
  ].join(' ')
}

export const TASK_INPUT_PARAMETER_DESCRIPTIONS = {
  task_id: 'The task id that bash returned',
  text: 'Text to write to its stdin or type into its terminal, exactly as given (include "\\n" to end a line); may be empty with eof',
  eof: 'Close the stdin after the text: the program reads end-of-file (on a terminal: type Ctrl-D)',
  yield_ms: 'Wait at most this many milliseconds for output',
} as const

export function createTaskInputTool(deps: ToolDeps) {
  return defineTool({
    name: 'task_input',
    description: taskInputDescription(deps.settings.maxYieldMs),
    parameters: {
      task_id: { type: 'string', required: true, description: TASK_INPUT_PARAMETER_DESCRIPTIONS.task_id },
      text: { type: 'string', required: true, description: TASK_INPUT_PARAMETER_DESCRIPTIONS.text },
      eof: { type: 'boolean', description: TASK_INPUT_PARAMETER_DESCRIPTIONS.eof },
      yield_ms: { type: 'number', description: TASK_INPUT_PARAMETER_DESCRIPTIONS.yield_ms },
    },
    async execute(args, exec) {
      const session = sessionOf(deps, exec)
      const outcome = await sendTaskInput(session, args, deps.settings, exec.signal)
      const meta: TaskInputMeta = {
        taskId: outcome.task.id,
        sentBytes: outcome.sentBytes,
        eof: outcome.eof,
        output: outcome.output.text,
        exitCode: outcome.task.exitCode,
        signal: outcome.task.signal,
        done: outcome.done,
      }
      return { content: withPendingNotices(session, renderTaskInput(outcome, offeredNetworks(deps.settings))), meta }
    },
    presentCall: (args) => ({ card: 'generic', title: `task_input ${args.task_id}`, kind: 'execute', rawInput: args }),
    presentResult: (args, result) => {
      const meta = result.meta as TaskInputMeta | undefined
      if (!meta) return { card: 'terminal', title: `task ${args.task_id}`, output: result.content.map((block) => block.text).join('\n') }
      return { card: 'terminal', title: `task ${meta.taskId}`, output: meta.output, ...(meta.done ? { exitCode: meta.exitCode, signal: meta.signal } : {}) }
    },
  })
}
