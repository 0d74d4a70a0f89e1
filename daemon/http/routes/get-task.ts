import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { ErrorSchema, TaskIdParams } from '../../../protocol/schemas.js'
import { requestOwner, visibleTask } from '../owner-scope.js'
import { withLiveOutput } from '../../tasks/live-output.js'

/** GET /v1/tasks/:id — one task, or a corrupt spool entry (state `corrupt`, with its reason). */
export function registerGetTaskRoute(app: TendApp, context: DaemonContext): void {
  app.get(
    '/v1/tasks/:id',
    { schema: { summary: 'Show a task', params: TaskIdParams, response: { 200: Type.Ref('Task'), 400: ErrorSchema, 404: ErrorSchema } } },
    async (request) => {
      const { id } = request.params as TaskIdParams
      return context.corrupt.visible(id, requestOwner(request)) ?? withLiveOutput(context.supervisor.outputs, context.config.layout.spool, visibleTask(context.store, request, id))
    },
  )
}
