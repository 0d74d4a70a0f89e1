import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../context.js'
import { ErrorSchema } from '../../protocol/index.js'
import { requireOperator } from '../owner-scope.js'

/** POST /v1/stop — stops the daemon after answering: running tasks are stopped first. Operator only. */
export function registerStopRoute(app: TendApp, context: DaemonContext): void {
  app.post(
    '/v1/stop',
    { schema: { summary: 'Stop the daemon (operator only)', response: { 202: Type.Object({ stopping: Type.Boolean(), pid: Type.Integer() }), 403: ErrorSchema } } },
    async (request, reply) => {
      requireOperator(request, 'stopping the daemon')
      reply.raw.once('finish', () => context.requestStop())
      return reply.status(202).send({ stopping: true, pid: process.pid })
    },
  )
}
