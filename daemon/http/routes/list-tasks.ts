import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { ListTasksQuery, type Task } from '../../../protocol/index.js'
import { requestOwner } from '../owner-scope.js'
import { withLiveOutput } from '../../tasks/live-output.js'

/** GET /v1/tasks — running and queued tasks; `all` adds finished ones and corrupt spool entries. */
export function registerListTasksRoute(app: TendApp, context: DaemonContext): void {
  app.get(
    '/v1/tasks',
    { schema: { summary: 'List tasks', querystring: ListTasksQuery, response: { 200: Type.Object({ tasks: Type.Array(Type.Ref('Task')) }) } } },
    async (request) => {
      const query = request.query as ListTasksQuery
      const owner = requestOwner(request)
      // An owner lists only its own tasks, whatever it asks for.
      if (owner !== null && query.owner !== undefined && query.owner !== owner) return { tasks: [] }
      const tasks: Task[] = context.store.list({ all: query.all ?? false, owner: owner ?? query.owner })
      const live = await Promise.all(tasks.map((task) => withLiveOutput(context.config.layout.spool, task)))
      if (!query.all) return { tasks: live }
      const corrupt = context.corrupt.list(owner ?? query.owner ?? null)
      return { tasks: [...live, ...corrupt].sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id)) }
    },
  )
}
