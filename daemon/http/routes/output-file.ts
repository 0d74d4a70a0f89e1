import { Readable } from 'node:stream'
import { Type } from 'typebox'
import type { FileHandle } from 'node:fs/promises'
import { TendError } from '../../../protocol/index.js'
import { ErrorSchema, TaskIdParams } from '../../../protocol/schemas.js'
import type { TaskStore } from '../../store/task-store.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'
import { requestedRange } from '../byte-range.js'
import { openTaskOutputSnapshot } from '../../../spool/index.js'

export interface OutputFileDeps {
  config: { layout: { spool: string } }
  store: Pick<TaskStore, 'get'>
  supervisor: Pick<Supervisor, 'outputs'>
}

/** How much of the file is read at a time while it is sent. */
const PIECE_BYTES = 64 * 1024

/**
 * GET /v1/tasks/:id/output.log — output.log as it is now, raw bytes, as a download; one byte range
 * of it with `Range` (206; 416 past its end). The file is streamed from a descriptor opened for
 * the request, never held in memory, and ends at the size it had when asked (Content-Length): a
 * task still writing does not make the download endless. A file cut back meanwhile (the task
 * truncates its own stdout) cannot give the bytes announced: the answer is cut off where the file
 * ends (the connection closed), so the client sees a short body at once instead of waiting for
 * bytes that will never come.
 */
export function registerOutputFileRoute(app: TendApp, { config, store, supervisor }: OutputFileDeps): void {
  typedRoutes(app).get(
    '/v1/tasks/:id/output.log',
    {
      schema: {
        summary: "Download a task's output.log (or one byte range of it)",
        params: TaskIdParams,
        headers: OwnerHeaders,
        response: {
          206: Type.Unknown({ description: 'the byte range asked for with Range (Content-Range says which)' }),
          400: ErrorSchema,
          404: ErrorSchema,
          409: ErrorSchema,
          410: ErrorSchema,
          416: Type.Unknown({ description: 'the range starts past the end of output.log (Content-Range: bytes */size)' }),
        },
      },
    },
    async (request, reply) => {
      const { id } = request.params
      visibleTask(store, request, id)
      // A running task's output through the descriptor the daemon holds (the file its keeper
      // writes, whatever is at its name), a finished one's by its path.
      const held = await supervisor.outputs.reopen(id)
      const { handle, size } = held ? { handle: held, size: (await held.stat()).size } : await openTaskOutputSnapshot(config.layout.spool, id)
      // Without validators to compare, a conditional range (If-Range) is answered whole.
      const range = request.headers['if-range'] === undefined ? requestedRange(request.headers.range, size) : null
      void reply.header('accept-ranges', 'bytes').header('cache-control', 'no-store')
      if (range === 'unsatisfiable') {
        await handle.close()
        return reply.status(416).header('content-range', `bytes */${size}`).type('application/octet-stream').send('')
      }
      const { start, end } = range ?? { start: 0, end: size - 1 }
      void reply
        .type('application/octet-stream')
        .header('content-length', end - start + 1)
        .header('content-disposition', `attachment; filename="tend-${id}-output.log"`)
      if (range) void reply.status(206).header('content-range', `bytes ${start}-${end}/${size}`)
      if (end < start) {
        await handle.close()
        return reply.send('')
      }
      return reply.send(Readable.from(pieces(handle, id, start, end), { objectMode: false }))
    },
  )
}

/**
 * Bytes [start, end] of the open file, piece by piece, closing it when done or abandoned. The end
 * of the file before `end` fails the stream: the answer is then cut off, never ended as if whole.
 */
async function* pieces(handle: FileHandle, id: string, start: number, end: number): AsyncGenerator<Buffer> {
  try {
    for (let at = start; at <= end; ) {
      const piece = Buffer.allocUnsafe(Math.min(PIECE_BYTES, end - at + 1))
      const { bytesRead } = await handle.read(piece, 0, piece.length, at)
      if (bytesRead === 0) {
        throw new TendError('TEND_ERR_OUTPUT_MISSING', {
          id,
          detail: `output.log was cut back to ${at} bytes while bytes ${start}-${end} of it were sent (truncated by the task, or outside tend)`,
        })
      }
      at += bytesRead
      yield piece.subarray(0, bytesRead)
    }
  } finally {
    await handle.close()
  }
}
