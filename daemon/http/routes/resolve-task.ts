import { ErrorSchema, ResolveQuery, ResolveResultSchema } from '../../../protocol/schemas.js'
import type { CorruptEntries } from '../../store/corrupt-entries.js'
import { resolveTaskRef } from '../../store/task-refs.js'
import type { TaskStore } from '../../store/task-store.js'
import { OwnerHeaders, requestOwner } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface ResolveTaskDeps {
  store: Pick<TaskStore, 'list'>
  corrupt: Pick<CorruptEntries, 'visible'>
}

/**
 * GET /v1/tasks/resolve?ref=X — the id of the task a reference names (store/task-refs.ts: id, then
 * name, then a unique id prefix), among the tasks the caller may see: an owner never learns of
 * another owner's task, not even that a prefix would be ambiguous.
 */
export function registerResolveTaskRoute(app: TendApp, { store, corrupt }: ResolveTaskDeps): void {
  typedRoutes(app).get(
    '/v1/tasks/resolve',
    {
      schema: {
        summary: 'Find the task a reference names',
        headers: OwnerHeaders,
        querystring: ResolveQuery,
        response: { 200: ResolveResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema },
      },
    },
    async (request) => {
      const { ref } = request.query
      const owner = requestOwner(request)
      // A corrupt entry is named by its id alone: it has no record to hold a name.
      if (corrupt.visible(ref, owner)) return { id: ref }
      return { id: resolveTaskRef(store.list({ all: true, ...(owner === null ? {} : { owner }) }), ref) }
    },
  )
}
