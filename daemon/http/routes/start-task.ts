import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_PATTERN, TendError } from '../../../protocol/index.js'
import { ErrorSchema, StartTaskBody } from '../../../protocol/schemas.js'
import { requestOwner } from '../owner-scope.js'
import { noteStartedTask } from '../audit.js'
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
      const task = await context.supervisor.start({ ...body, owner: owner ?? body.owner }, { idempotencyKey: idempotencyKey(request.headers[IDEMPOTENCY_HEADER]), actingForOwner: owner !== null })
      noteStartedTask(request, task)
      return reply.status(201).send(task)
    },
  )
}

const KEY = new RegExp(IDEMPOTENCY_KEY_PATTERN)

function idempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined
  const key = Array.isArray(header) ? header[0] : header
  if (key === undefined || !KEY.test(key)) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: `headers/${IDEMPOTENCY_HEADER}: expected 1 to 128 letters, digits or ._:-, got ${JSON.stringify(key?.slice(0, 140))}` })
  }
  return key
}
