import { Type } from 'typebox'
import { TendError } from '../../../protocol/index.js'
import { ErrorSchema, StopBody } from '../../../protocol/schemas.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, requireOperator } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface StopDeps {
  supervisor: Pick<Supervisor, 'tasksOutliveDaemon' | 'spawnerKind'>
  /** Asks the daemon to stop (answers at once; the stop happens after the reply is sent). */
  requestStop: (options?: { keepTasks?: boolean }) => void
}

/** POST /v1/stop — stops the daemon after answering: running tasks are stopped first. Operator only. */
export function registerStopRoute(app: TendApp, { supervisor, requestStop }: StopDeps): void {
  typedRoutes(app).post(
    '/v1/stop',
    {
      schema: {
        summary: 'Stop the daemon (operator only); with keepTasks its running tasks go on, for the next daemon',
        headers: OwnerHeaders,
        body: Type.Optional(StopBody),
        response: { 202: Type.Object({ stopping: Type.Boolean(), pid: Type.Integer(), keepTasks: Type.Boolean() }), 400: ErrorSchema, 403: ErrorSchema },
      },
    },
    async (request, reply) => {
      requireOperator(request, 'stopping the daemon')
      const keepTasks = request.body?.keepTasks === true
      if (keepTasks && !supervisor.tasksOutliveDaemon) {
        throw new TendError('TEND_ERR_VALIDATION', {
          detail: `body/keepTasks: this daemon's tasks cannot outlive it (spawner ${supervisor.spawnerKind}, without keepers); stop without keepTasks`,
        })
      }
      reply.raw.once('finish', () => requestStop({ keepTasks }))
      return reply.status(202).send({ stopping: true, pid: process.pid, keepTasks })
    },
  )
}
