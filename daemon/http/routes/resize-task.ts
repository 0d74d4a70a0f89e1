import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { visibleTask } from '../owner-scope.js'
import { ErrorSchema, TaskIdParams, TerminalSizeBody } from '../../../protocol/schemas.js'
import { resizeTerminal } from '../../tasks/task-terminal.js'

/** POST /v1/tasks/:id/resize — sets the size of a terminal task's terminal (its programs get SIGWINCH). */
export function registerResizeTaskRoute(app: TendApp, context: DaemonContext): void {
  app.post(
    '/v1/tasks/:id/resize',
    {
      schema: {
        summary: "Resize a task's terminal (started with tty)",
        description:
          'The new size reaches the terminal at once; its foreground programs get SIGWINCH and read it (stty size). Answers the task, its tty the new size. A terminal whose keeper has not read the requests before (stopped) answers TEND_ERR_TERMINAL_BUSY, 503 with Retry-After.',
        params: TaskIdParams,
        body: TerminalSizeBody,
        response: { 200: Type.Ref('Task'), 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 410: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params as TaskIdParams
      const size = request.body as TerminalSizeBody
      visibleTask(context.store, request, id)
      return resizeTerminal(context.store, context.config.layout.spool, id, size)
    },
  )
}
