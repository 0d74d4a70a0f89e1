import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { isFinished, TendError, type ReadResult } from '../../../protocol/index.js'
import { ErrorSchema, ReadOutputQuery, ReadResultSchema, TaskIdParams } from '../../../protocol/schemas.js'
import { visibleTask } from '../owner-scope.js'
import { incompleteUtf8Tail, outputPath, readableOutputSize, readOutputRange, tailOffset } from '../../../spool/index.js'

const DEFAULT_READ_BYTES = 1024 * 1024

/**
 * GET /v1/tasks/:id/output — reads output.log from a byte offset without consuming it. With
 * waitMs, answers as soon as there is output past `from` or the task has ended. An output.log that
 * is gone or replaced is TEND_ERR_OUTPUT_MISSING (410), never an empty output; one under a lease is
 * TEND_ERR_OUTPUT_BUSY (409) at once.
 */
export function registerReadOutputRoute(app: TendApp, context: DaemonContext): void {
  app.get(
    '/v1/tasks/:id/output',
    { schema: { summary: 'Read task output', params: TaskIdParams, querystring: ReadOutputQuery, response: { 200: ReadResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 410: ErrorSchema, 503: ErrorSchema } } },
    async (request): Promise<ReadResult> => {
      const { id } = request.params as TaskIdParams
      const query = request.query as ReadOutputQuery
      visibleTask(context.store, request, id)
      const file = outputPath(context.config.layout.spool, id)
      const from = query.tail !== undefined ? await tailOffset(file, query.tail) : (query.from ?? 0)
      const maxBytes = query.maxBytes ?? DEFAULT_READ_BYTES
      const encoding = query.encoding ?? 'utf8'
      const deadline = Date.now() + (query.waitMs ?? 0)
      const abort = new AbortController()
      request.raw.once('close', () => abort.abort())
      for (;;) {
        // State first, size second: once a finished state is seen, the size read after it is final.
        const task = context.store.get(id)
        const finished = isFinished(task)
        const size = await readableOutputSize(file)
        const remainingMs = deadline - Date.now()
        if (size > from || finished || remainingMs <= 0 || abort.signal.aborted) {
          const available = Math.max(0, size - from)
          let chunk = await readOutputRange(file, from, Math.min(maxBytes, available))
          if (encoding === 'utf8' && chunk.length < available) chunk = await keepCharactersWhole(file, from, chunk, available)
          const next = from + chunk.length
          return {
            data: chunk.toString(encoding),
            encoding,
            from,
            next,
            done: finished && next >= size,
            truncated: next < size,
            outputBytes: size,
            state: task.state,
          }
        }
        const endedSince = () => {
          const now = context.store.find(id)
          return now === undefined || isFinished(now)
        }
        // A stopping daemon (a restart) never waits out a long-poll: the client asks the next one.
        if (context.closing.aborted) throw new TendError('TEND_ERR_SHUTTING_DOWN', { detail: 'read again from the next daemon (the task goes on)' })
        await context.outputWatch.waitForChange(id, file, { sizeSeen: size, endedSince, timeoutMs: remainingMs, signal: AbortSignal.any([abort.signal, context.closing]) })
      }
    },
  )
}

/**
 * A text read stops before a character it would cut in two, leaving it for the next read; when
 * maxBytes is smaller than that one character, the read grows to hold it whole.
 */
async function keepCharactersWhole(file: string, from: number, chunk: Buffer, available: number): Promise<Buffer> {
  const cut = incompleteUtf8Tail(chunk)
  if (cut === 0) return chunk
  if (cut < chunk.length) return chunk.subarray(0, chunk.length - cut)
  const lead = chunk[0]!
  const width = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  return readOutputRange(file, from, Math.min(width, available))
}
