import { Type } from 'typebox'
import { ErrorSchema, KillTaskBody, TaskIdParams } from '../../../protocol/schemas.js'
import type { TaskStore } from '../../store/task-store.js'
import { normalizeSignal } from '../../tasks/input/signals.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, requestOwner, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface KillTaskDeps {
  store: Pick<TaskStore, 'get'>
  supervisor: Pick<Supervisor, 'kill'>
}

/** POST /v1/tasks/:id/kill — stops the whole tree; answers once no process of it is left. */
export function registerKillTaskRoute(app: TendApp, { store, supervisor }: KillTaskDeps): void {
  typedRoutes(app).post(
    '/v1/tasks/:id/kill',
    {
      schema: {
        summary: 'Kill a task and its whole process tree',
        params: TaskIdParams,
        headers: OwnerHeaders,
        body: Type.Optional(KillTaskBody),
        response: { 200: Type.Ref('Task'), 400: ErrorSchema, 404: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params
      const body = request.body ?? {}
      visibleTask(store, request, id)
      // Who stops it is known from who asks: an agent's client acts for its owner, the CLI for nobody.
      const stoppedBy = body.stoppedBy ?? (requestOwner(request) === null ? 'operator' : 'owner')
      return supervisor.kill(id, { signal: normalizeSignal(body.signal), graceMs: body.graceMs, note: body.reason, stoppedBy })
    },
  )
}
