import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { ErrorSchema, TaskIdParams } from '../../../protocol/schemas.js'
import { visibleTask } from '../owner-scope.js'
import { openOutputSnapshot, outputPath } from '../../../spool/index.js'

/**
 * GET /v1/tasks/:id/output.log — the whole output.log as it is now, raw bytes, as a download. The
 * file is streamed from disk, never held in memory, and ends at the size it had when asked
 * (Content-Length): a task still writing does not make the download endless.
 */
export function registerOutputFileRoute(app: TendApp, context: DaemonContext): void {
  app.get(
    '/v1/tasks/:id/output.log',
    { schema: { summary: "Download a task's output.log", params: TaskIdParams, response: { 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 410: ErrorSchema } } },
    async (request, reply) => {
      const { id } = request.params as TaskIdParams
      visibleTask(context.store, request, id)
      const { handle, size } = await openOutputSnapshot(outputPath(context.config.layout.spool, id))
      void reply
        .type('application/octet-stream')
        .header('content-length', size)
        .header('content-disposition', `attachment; filename="tend-${id}-output.log"`)
        .header('cache-control', 'no-store')
      if (size === 0) {
        await handle.close()
        return reply.send('')
      }
      return reply.send(handle.createReadStream({ start: 0, end: size - 1 }))
    },
  )
}
