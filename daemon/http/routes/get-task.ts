import { Type } from 'typebox'
import { ErrorSchema, GetTaskQuery, TaskIdParams } from '../../../protocol/schemas.js'
import type { CorruptEntries } from '../../store/corrupt-entries.js'
import type { TaskStore } from '../../store/task-store.js'
import { withLiveOutput } from '../../tasks/output/live-output.js'
import type { PortWatch } from '../../tasks/ports/port-watch.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, requestOwner, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface GetTaskDeps {
  config: { layout: { spool: string } }
  store: Pick<TaskStore, 'get'>
  corrupt: Pick<CorruptEntries, 'visible'>
  supervisor: Pick<Supervisor, 'outputs'> & Partial<Pick<Supervisor, 'liveUsageOf'>> & { ports: Pick<PortWatch, 'refresh'> }
}

/** GET /v1/tasks/:id — one task, or a corrupt spool entry (state `corrupt`, with its reason); `live`: a running one's live figures too. */
export function registerGetTaskRoute(app: TendApp, { config, store, corrupt, supervisor }: GetTaskDeps): void {
  typedRoutes(app).get(
    '/v1/tasks/:id',
    {
      schema: {
        summary: 'Show a task',
        params: TaskIdParams,
        querystring: GetTaskQuery,
        headers: OwnerHeaders,
        response: { 200: Type.Ref('Task'), 400: ErrorSchema, 404: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params
      const found = corrupt.visible(id, requestOwner(request))
      if (found) return found
      // Its ports as they are now (looked at most once a second), for a running task the request may see.
      if (visibleTask(store, request, id).state === 'running') await supervisor.ports.refresh([id])
      const task = visibleTask(store, request, id)
      return withLiveOutput(supervisor.outputs, config.layout.spool, task, request.query.live ? supervisor.liveUsageOf?.(task) : undefined)
    },
  )
}
