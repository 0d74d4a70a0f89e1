import {
  killTask,
  listTasks,
  offeredNetworks,
  readTaskOutput,
  renderBash,
  renderTaskInput,
  renderTaskKill,
  renderTaskList,
  renderTaskOutput,
  runBash,
  sendTaskInput,
} from '../core/index.js'
import type { BashArgs, OwnerSession, SessionRegistry, TaskInputArgs, TaskKillArgs, TaskOutputArgs, ToolSettings } from '../core/index.js'
import { validateArgs, type Tool } from '../harness/index.js'
import { bashMeta } from '../bash.js'
import { createTendTools } from '../plugin.js'
import type { DshAgent, DshRunContext, DshToolDefinition, DshValueSchema, HarnessHelpers, TextBlock } from './host-types.js'
import { toDshParameters } from './parameters.js'
import { BASH_VALUE_SCHEMA, TASK_INPUT_VALUE_SCHEMA, TASK_KILL_VALUE_SCHEMA, TASK_LIST_VALUE_SCHEMA, TASK_OUTPUT_VALUE_SCHEMA } from './values.js'
import type { BashValue, TaskInputValue, TaskKillValue, TaskListValue, TaskOutputValue } from './values.js'

export interface DshToolDeps {
  sessions: SessionRegistry
  settings: ToolSettings
  /** The calling agent's OwnerSession; throws a ToolFailure when the call has no agent. */
  sessionOf(agent: DshAgent | undefined): OwnerSession
}

/**
 * bash, task_output, task_input, task_kill and task_list for the published harness. Everything but the value
 * plumbing comes from elsewhere: the work from tools/core, the model-facing text from its
 * renderers, and the name, description, parameters and editor cards from the seed-contract tools,
 * so every host shows the model the same tools and checks their arguments the same way.
 * presentationMeta hands the seed presenters the meta they read.
 */
export function createDshTools(deps: DshToolDeps, harness: HarnessHelpers): DshToolDefinition[] {
  const seed = new Map(createTendTools({ sessions: deps.sessions, settings: deps.settings }).map((tool) => [tool.name, tool]))
  const seedTool = (name: string): Tool => seed.get(name)!
  const offered = offeredNetworks(deps.settings)
  const run = <Args, Value>(work: (session: OwnerSession, args: Args, exec: DshRunContext) => Promise<Value>) => {
    return async (args: Args, exec: DshRunContext): Promise<Value & { notices: string[] }> => {
      const session = deps.sessionOf(exec.agent)
      const value = await work(session, args, exec)
      return { ...value, notices: session.takePendingNotices() }
    }
  }

  const define = <Args, Value extends { notices: string[] }>(
    tool: Tool,
    schema: DshValueSchema,
    execute: (args: Args, exec: DshRunContext) => Promise<Value>,
    render: (value: Value) => string,
    meta: (value: Value) => unknown,
  ): DshToolDefinition =>
    harness.defineTool<Args, Value>({
      name: tool.name,
      description: tool.description,
      parameters: toDshParameters(tool.parameters),
      output: {
        schema,
        render: (_args, value) => [text(render(value)), ...value.notices.map(text)],
        presentationMeta: (_args, value) => meta(value),
      },
      // The published harness accepts unknown argument keys; tend refuses them on every host, so a
      // misspelt run_in_background is an error the model sees, not a silent foreground run.
      execute: async (args, exec) => {
        validateArgs(tool.name, tool.parameters, args)
        return execute(args, exec)
      },
      presentCall: (args) => tool.presentCall(args),
      presentResult: (args, result) => tool.presentResult(args, result),
    })

  return [
    define<BashArgs, BashValue>(
      seedTool('bash'),
      BASH_VALUE_SCHEMA,
      run((session, args, exec) => runBash(session, args, deps.settings, exec.signal)),
      (value) => renderBash(value, offered),
      bashMeta,
    ),
    define<TaskOutputArgs, TaskOutputValue>(
      seedTool('task_output'),
      TASK_OUTPUT_VALUE_SCHEMA,
      run((session, args, exec) => readTaskOutput(session, args, deps.settings, exec.signal)),
      (value) => renderTaskOutput(value, offered),
      (value) => ({ taskId: value.task.id, output: value.output.text, exitCode: value.task.exitCode, signal: value.task.signal, done: value.done }),
    ),
    define<TaskInputArgs, TaskInputValue>(
      seedTool('task_input'),
      TASK_INPUT_VALUE_SCHEMA,
      run((session, args, exec) => sendTaskInput(session, args, deps.settings, exec.signal)),
      (value) => renderTaskInput(value, offered),
      (value) => ({
        taskId: value.task.id,
        sentBytes: value.sentBytes,
        eof: value.eof,
        output: value.output.text,
        exitCode: value.task.exitCode,
        signal: value.task.signal,
        done: value.done,
      }),
    ),
    define<TaskKillArgs, TaskKillValue>(
      seedTool('task_kill'),
      TASK_KILL_VALUE_SCHEMA,
      run(async (session, args) => ({ task: await killTask(session, args) })),
      (value) => renderTaskKill(value.task),
      (value) => ({ taskId: value.task.id, state: value.task.state, exitCode: value.task.exitCode, signal: value.task.signal }),
    ),
    define<Record<string, never>, TaskListValue>(
      seedTool('task_list'),
      TASK_LIST_VALUE_SCHEMA,
      run(async (session) => ({ tasks: await listTasks(session) })),
      (value) => renderTaskList(value.tasks),
      (value) => ({ count: value.tasks.length }),
    ),
  ]
}

const text = (value: string): TextBlock => ({ type: 'text', text: value })
