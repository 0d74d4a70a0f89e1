import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { visibleTask } from '../owner-scope.js'
import { isFinished, WAIT_MS_LIMIT } from '../../../protocol/index.js'
import { ErrorSchema, TaskIdParams, WaitQuery, WaitResultSchema } from '../../../protocol/schemas.js'

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
