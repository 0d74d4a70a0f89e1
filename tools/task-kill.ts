import { defineTool } from './harness/index.js'
import { killTask, renderTaskKill } from './core/index.js'
import { sessionOf, withPendingNotices, type ToolDeps } from './tool-context.js'

interface TaskKillMeta {
  taskId: string
  state: string
  exitCode: number | null
  signal: string | null
}

export function createTaskKillTool(deps: ToolDeps) {
  return defineTool({
    name: 'task_kill',
    description: 'Stop a background task and every process it started. Answers once none is left, with the final state.',
    parameters: {
      task_id: { type: 'string', required: true, description: 'The task id that bash returned' },
      signal: {
        type: 'string',
        enum: ['TERM', 'INT', 'HUP', 'KILL', 'QUIT', 'USR1', 'USR2'],
        description: 'First signal (default TERM; KILL follows after a grace period)',
      },
      reason: { type: 'string', description: 'Why, recorded with the task' },
    },
    async execute(args, exec) {
      const session = sessionOf(deps, exec)
      const task = await killTask(session, args)
      const meta: TaskKillMeta = { taskId: task.id, state: task.state, exitCode: task.exitCode, signal: task.signal }
      return { content: withPendingNotices(session, renderTaskKill(task)), meta }
    },
    presentCall: (args) => ({ card: 'generic', title: `task_kill ${args.task_id}`, rawInput: args }),
    presentResult: (args, result) => {
      const meta = result.meta as TaskKillMeta | undefined
      return { card: 'terminal', title: `task ${meta?.taskId ?? args.task_id}`, output: '', exitCode: meta?.exitCode ?? null, signal: meta?.signal ?? null }
    },
  })
}
