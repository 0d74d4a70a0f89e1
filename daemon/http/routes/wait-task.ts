import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { visibleTask } from '../owner-scope.js'
import { isFinished, TendError, WAIT_MS_LIMIT } from '../../../protocol/index.js'
import { ErrorSchema, TaskIdParams, WaitQuery, WaitResultSchema } from '../../../protocol/schemas.js'

/**
 * GET /v1/tasks/:id/wait — answers when the task ends, or after timeoutMs with done: false. A daemon
 * that stops (a restart) answers an open wait at once with 503 TEND_ERR_SHUTTING_DOWN, which
 * clients retry against the next daemon: its stop never waits out a long-poll.
 */
export function registerWaitTaskRoute(app: TendApp, context: DaemonContext): void {
  app.get(
    '/v1/tasks/:id/wait',
    { schema: { summary: 'Wait for a task to end', params: TaskIdParams, querystring: WaitQuery, response: { 200: WaitResultSchema, 400: ErrorSchema, 404: ErrorSchema, 503: ErrorSchema } } },
    async (request) => {
      const { id } = request.params as TaskIdParams
      const { timeoutMs = WAIT_MS_LIMIT } = request.query as WaitQuery
      visibleTask(context.store, request, id)
      const task = await context.store.whenFinished(id, timeoutMs, context.closing)
      if (!isFinished(task) && context.closing.aborted) throw new TendError('TEND_ERR_SHUTTING_DOWN', { detail: 'ask the next daemon (the task goes on)' })
      return { done: isFinished(task), task }
    },
  )
}
