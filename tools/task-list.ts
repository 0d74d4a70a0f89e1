import { defineTool, text } from './harness/index.js'
import { listTasks, renderTaskList } from './core/index.js'
import { sessionOf, withPendingNotices, type ToolDeps } from './tool-context.js'

export function createTaskListTool(deps: ToolDeps) {
  return defineTool({
    name: 'task_list',
    description:
      'List your background tasks: id, label, state (with who stopped it, e.g. killed(timeout)), age, ' +
      'exit code and output size; persistent tasks, which outlive your session, are marked [persistent]; ' +
      'a server shows where it listens and whether it is ready.',
    parameters: {},
    async execute(_args, exec) {
      const session = sessionOf(deps, exec)
      const entries = await listTasks(session)
      return { content: withPendingNotices(session, renderTaskList(entries)), meta: { count: entries.length } }
    },
    presentCall: () => ({ card: 'generic', title: 'task_list', kind: 'read' }),
    presentResult: (_args, result) => ({ card: 'generic', title: 'task_list', content: result.content.slice(0, 1).map((block) => text(block.text)) }),
  })
}
