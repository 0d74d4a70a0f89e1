import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { TendError } from '../../../protocol/index.js'
import { ErrorSchema, StopBody } from '../../../protocol/schemas.js'
import { requireOperator } from '../owner-scope.js'

/** POST /v1/stop — stops the daemon after answering: running tasks are stopped first. Operator only. */
export function registerStopRoute(app: TendApp, context: DaemonContext): void {
  app.post(
    '/v1/stop',
    {
      schema: {
        summary: 'Stop the daemon (operator only); with keepTasks its running tasks go on, for the next daemon',
        body: Type.Optional(StopBody),
        response: { 202: Type.Object({ stopping: Type.Boolean(), pid: Type.Integer(), keepTasks: Type.Boolean() }), 400: ErrorSchema, 403: ErrorSchema },
      },
    },
    async (request, reply) => {
      requireOperator(request, 'stopping the daemon')
      const keepTasks = (request.body as StopBody | undefined)?.keepTasks === true
      if (keepTasks && !context.supervisor.tasksOutliveDaemon) {
        throw new TendError('TEND_ERR_VALIDATION', { detail: `body/keepTasks: this daemon's tasks cannot outlive it (spawner ${context.supervisor.spawnerKind}, without keepers); stop without keepTasks` })
      }
      reply.raw.once('finish', () => context.requestStop({ keepTasks }))
      return reply.status(202).send({ stopping: true, pid: process.pid, keepTasks })
    },
  )
}
