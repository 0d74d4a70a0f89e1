import { INPUT_MAX_BYTES, TendError } from '../../../protocol/index.js'
import { ErrorSchema, TaskIdParams, TaskInputBody, TaskInputResultSchema } from '../../../protocol/schemas.js'
import type { TaskStore } from '../../store/task-store.js'
import type { TaskInput } from '../../tasks/input/task-input.js'
import { OwnerHeaders, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface TaskInputDeps {
  store: Pick<TaskStore, 'get'>
  /** Writes to tasks' stdin pipes. */
  input: Pick<TaskInput, 'send'>
}

/** POST /v1/tasks/:id/input — writes to the task's stdin pipe (and input.log); `eof` closes it after. */
export function registerTaskInputRoute(app: TendApp, { store, input }: TaskInputDeps): void {
  typedRoutes(app).post(
    '/v1/tasks/:id/input',
    {
      schema: {
        summary: "Write to a task's stdin (started with stdin: pipe)",
        params: TaskIdParams,
        headers: OwnerHeaders,
        body: TaskInputBody,
        response: { 200: TaskInputResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 410: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params
      const { body } = request
      visibleTask(store, request, id)
      return input.send(id, inputBytes(body), body.eof ?? false)
    },
  )
}

/** The bytes of the body: its text (UTF-8) or its base64, never both; nothing at all only with eof. */
function inputBytes(body: TaskInputBody): Buffer {
  if (body.text !== undefined && body.base64 !== undefined) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: 'body: give text or base64, not both' })
  }
  if (body.text === undefined && body.base64 === undefined && !body.eof) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: 'body: expected text, base64 or eof: true, got none of them' })
  }
  const bytes = body.base64 !== undefined ? Buffer.from(body.base64, 'base64') : Buffer.from(body.text ?? '', 'utf8')
  if (bytes.length > INPUT_MAX_BYTES) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: `body/text: at most ${INPUT_MAX_BYTES} bytes per input, got ${bytes.length}` })
  }
  return bytes
}
