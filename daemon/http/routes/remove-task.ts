import { ErrorSchema, RemoveResultSchema, TaskIdParams } from '../../../protocol/schemas.js'
import type { CorruptEntries } from '../../store/corrupt-entries.js'
import type { SpoolCleanup } from '../../store/spool-cleanup.js'
import type { TaskStore } from '../../store/task-store.js'
import { OwnerHeaders, requestOwner, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface RemoveTaskDeps {
  store: Pick<TaskStore, 'get'>
  corrupt: Pick<CorruptEntries, 'visible'>
  cleanup: Pick<SpoolCleanup, 'remove'>
}

/** DELETE /v1/tasks/:id — forgets a finished task (or a corrupt spool entry) and deletes its spool folder. */
export function registerRemoveTaskRoute(app: TendApp, { store, corrupt, cleanup }: RemoveTaskDeps): void {
  typedRoutes(app).delete(
    '/v1/tasks/:id',
    {
      schema: {
        summary: 'Remove a finished task',
        params: TaskIdParams,
        headers: OwnerHeaders,
        response: { 200: RemoveResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params
      if (!corrupt.visible(id, requestOwner(request))) visibleTask(store, request, id)
      return { removed: id, freedBytes: await cleanup.remove(id) }
    },
  )
}
