import { isFinished, TendError, WAIT_MS_LIMIT, type Task } from '../../../protocol/index.js'
import { ErrorSchema, TaskIdParams, WaitQuery, WaitResultSchema } from '../../../protocol/schemas.js'
import type { TaskStore } from '../../store/task-store.js'
import { OwnerHeaders, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface WaitTaskDeps {
  store: Pick<TaskStore, 'get' | 'whenState'>
  /** Aborted when the daemon stops: an open wait answers at once. */
  closing: AbortSignal
}

/**
 * GET /v1/tasks/:id/wait — answers when the task ends (with ready=true: as soon as its readiness
 * settles, or it ends), or after timeoutMs with done: false. A daemon
 * that stops (a restart) answers an open wait at once with 503 TEND_ERR_SHUTTING_DOWN, which
 * clients retry against the next daemon: its stop never waits out a long-poll.
 */
export function registerWaitTaskRoute(app: TendApp, { store, closing }: WaitTaskDeps): void {
  typedRoutes(app).get(
    '/v1/tasks/:id/wait',
    {
      schema: {
        summary: 'Wait for a task to end',
        params: TaskIdParams,
        headers: OwnerHeaders,
        querystring: WaitQuery,
        response: { 200: WaitResultSchema, 400: ErrorSchema, 404: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params
      const { timeoutMs = WAIT_MS_LIMIT, ready = false } = request.query
      const visible = visibleTask(store, request, id)
      if (ready && !visible.readyWhen)
        throw new TendError('TEND_ERR_VALIDATION', { detail: `ready: task ${id} has no readiness condition (start it with ready: {pattern | port | url})` })
      const reached = ready ? readinessSettled : isFinished
      const task = await store.whenState(id, reached, timeoutMs, closing)
      if (!reached(task) && closing.aborted) throw new TendError('TEND_ERR_SHUTTING_DOWN', { detail: 'ask the next daemon (the task goes on)' })
      return { done: reached(task), task }
    },
  )
}

/** Its readiness is known (ready, or failed), or it has ended. */
function readinessSettled(task: Task): boolean {
  return isFinished(task) || (task.ready !== null && task.ready !== undefined)
}
