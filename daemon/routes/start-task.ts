import type { TendApp } from '../server.js'
import type { DaemonContext } from '../context.js'
import { ErrorSchema, StartTaskBody, TendError } from '../../protocol/index.js'
import { requestOwner } from '../owner-scope.js'
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
      const body = request.body as StartTaskBody
      const owner = requestOwner(request)
      if (owner !== null && body.owner !== undefined && body.owner !== owner) {
        throw new TendError('TEND_ERR_VALIDATION', { detail: `body/owner: a request acting for ${owner} cannot start a task for ${body.owner}` })
      }
      const task = await context.supervisor.start({ ...body, owner: owner ?? body.owner })
      return reply.status(201).send(task)
    },
  )
}
