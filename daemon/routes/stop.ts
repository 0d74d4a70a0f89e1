import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../context.js'

/** POST /v1/stop — stops the daemon after answering: running tasks are stopped first. */
export function registerStopRoute(app: TendApp, context: DaemonContext): void {
  app.post('/v1/stop', { schema: { summary: 'Stop the daemon', response: { 202: Type.Object({ stopping: Type.Boolean(), pid: Type.Integer() }) } } }, async (_request, reply) => {
    reply.raw.once('finish', () => context.requestStop())
    return reply.status(202).send({ stopping: true, pid: process.pid })
  })
}
