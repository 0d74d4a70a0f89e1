import { Type } from 'typebox'
import { ErrorSchema, TaskIdParams, TerminalSizeBody } from '../../../protocol/schemas.js'
import type { TaskStore } from '../../store/task-store.js'
import { resizeTerminal } from '../../tasks/input/task-terminal.js'
import { OwnerHeaders, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface ResizeTaskDeps {
  config: { layout: { spool: string } }
  store: TaskStore
}

/** POST /v1/tasks/:id/resize — sets the size of a terminal task's terminal (its programs get SIGWINCH). */
export function registerResizeTaskRoute(app: TendApp, { config, store }: ResizeTaskDeps): void {
  typedRoutes(app).post(
    '/v1/tasks/:id/resize',
    {
      schema: {
        summary: "Resize a task's terminal (started with tty)",
        description:
          'The new size reaches the terminal at once; its foreground programs get SIGWINCH and read it (stty size). Answers the task, ' +
          'its tty the new size. A terminal whose keeper has not read the requests before (stopped) answers TEND_ERR_TERMINAL_BUSY, 503 with Retry-After.',
        params: TaskIdParams,
        headers: OwnerHeaders,
        body: TerminalSizeBody,
        response: { 200: Type.Ref('Task'), 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 410: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request) => {
      const { id } = request.params
      visibleTask(store, request, id)
      return resizeTerminal(store, config.layout.spool, id, request.body)
    },
  )
}
