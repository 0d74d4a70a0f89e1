import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { visibleTask } from '../owner-scope.js'
import { ErrorSchema, isFinished, TaskIdParams, WAIT_MS_LIMIT, WaitQuery, WaitResultSchema } from '../../../protocol/index.js'

/** GET /v1/tasks/:id/wait — answers when the task ends, or after timeoutMs with done: false. */
export function registerWaitTaskRoute(app: TendApp, context: DaemonContext): void {
  app.get(
    '/v1/tasks/:id/wait',
    { schema: { summary: 'Wait for a task to end', params: TaskIdParams, querystring: WaitQuery, response: { 200: WaitResultSchema, 400: ErrorSchema, 404: ErrorSchema } } },
    async (request) => {
      const { id } = request.params as TaskIdParams
      const { timeoutMs = WAIT_MS_LIMIT } = request.query as WaitQuery
      visibleTask(context.store, request, id)
      const task = await context.store.whenFinished(id, timeoutMs)
      return { done: isFinished(task), task }
    },
  )
}
