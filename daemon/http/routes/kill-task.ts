import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { requestOwner, visibleTask } from '../owner-scope.js'
import { normalizeSignal } from '../../tasks/signals.js'
import { ErrorSchema, KillTaskBody, TaskIdParams } from '../../../protocol/schemas.js'

/** POST /v1/tasks/:id/kill — stops the whole tree; answers once no process of it is left. */
export function registerKillTaskRoute(app: TendApp, context: DaemonContext): void {
  app.post(
    '/v1/tasks/:id/kill',
    { schema: { summary: 'Kill a task and its whole process tree', params: TaskIdParams, body: Type.Optional(KillTaskBody), response: { 200: Type.Ref('Task'), 400: ErrorSchema, 404: ErrorSchema } } },
    async (request) => {
      const { id } = request.params as TaskIdParams
      const body = (request.body ?? {}) as KillTaskBody
      visibleTask(context.store, request, id)
      // Who stops it is known from who asks: an agent's client acts for its owner, the CLI for nobody.
      const stoppedBy = body.stoppedBy ?? (requestOwner(request) === null ? 'operator' : 'owner')
      return context.supervisor.kill(id, { signal: normalizeSignal(body.signal), graceMs: body.graceMs, note: body.reason, stoppedBy })
    },
  )
}
