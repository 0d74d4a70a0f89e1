import type { TendApp } from '../server.js'
import type { DaemonContext } from '../context.js'
import { ErrorSchema, StartTaskBody } from '../../protocol/index.js'
import { Type } from 'typebox'

/** POST /v1/tasks — admits a task and answers with its record (usually `queued`). */
export function registerStartTaskRoute(app: TendApp, context: DaemonContext): void {
  app.post(
    '/v1/tasks',
    {
      schema: {
        summary: 'Start a task',
        body: StartTaskBody,
        response: { 201: Type.Ref('Task'), 400: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request, reply) => {
      const task = await context.supervisor.start(request.body as StartTaskBody)
      return reply.status(201).send(task)
    },
  )
}
