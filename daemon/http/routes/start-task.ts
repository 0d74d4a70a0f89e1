import { Type } from 'typebox'
import { IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY_PATTERN, TendError } from '../../../protocol/index.js'
import { ErrorSchema, StartTaskBody, TaskSchema } from '../../../protocol/schemas.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { noteStartedTask } from '../audit.js'
import { OwnerHeaders, requestOwner } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface StartTaskDeps {
  supervisor: Pick<Supervisor, 'start'>
}

const StartTaskHeaders = Type.Object({
  ...OwnerHeaders.properties,
  [IDEMPOTENCY_HEADER]: Type.Optional(
    Type.String({ pattern: IDEMPOTENCY_KEY_PATTERN, description: 'a retry with the same key and body answers the first task' }),
  ),
})

/** The task's record, and warnings beside its fields (protocol/started-task.ts). */
const StartedTaskSchema = Type.Object({
  ...TaskSchema.properties,
  warnings: Type.Optional(
    Type.Array(Type.String(), {
      description:
        "what the start deserves a word about: the record's warnings (writes that would vanish), " +
        'then a fixed port another running task of the same owner already listens on (never in task.json)',
    }),
  ),
})

/** POST /v1/tasks — admits a task and answers with its record (usually `queued`) and any warnings. */
export function registerStartTaskRoute(app: TendApp, { supervisor }: StartTaskDeps): void {
  typedRoutes(app).post(
    '/v1/tasks',
    {
      schema: {
        summary: 'Start a task',
        headers: StartTaskHeaders,
        body: StartTaskBody,
        response: { 201: StartedTaskSchema, 400: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request, reply) => {
      const { body } = request
      const owner = requestOwner(request)
      if (owner !== null && body.owner !== undefined && body.owner !== owner) {
        throw new TendError('TEND_ERR_VALIDATION', { detail: `body/owner: a request acting for ${owner} cannot start a task for ${body.owner}` })
      }
      const task = await supervisor.start(
        { ...body, owner: owner ?? body.owner },
        { idempotencyKey: request.headers[IDEMPOTENCY_HEADER], actingForOwner: owner !== null },
      )
      noteStartedTask(request, task)
      return reply.status(201).send(task)
    },
  )
}
