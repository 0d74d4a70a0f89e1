import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { requestOwner, visibleTask } from '../owner-scope.js'
import { ErrorSchema, RemoveResultSchema, TaskIdParams } from '../../../protocol/schemas.js'

/** DELETE /v1/tasks/:id — forgets a finished task (or a corrupt spool entry) and deletes its spool folder. */
export function registerRemoveTaskRoute(app: TendApp, context: DaemonContext): void {
  app.delete(
    '/v1/tasks/:id',
    { schema: { summary: 'Remove a finished task', params: TaskIdParams, response: { 200: RemoveResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema } } },
    async (request) => {
      const { id } = request.params as TaskIdParams
      if (!context.corrupt.visible(id, requestOwner(request))) visibleTask(context.store, request, id)
      return { removed: id, freedBytes: await context.cleanup.remove(id) }
    },
  )
}
