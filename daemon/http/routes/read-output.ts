import { isFinished, TendError, type ReadResult } from '../../../protocol/index.js'
import { ErrorSchema, ReadOutputQuery, ReadResultSchema, TaskIdParams } from '../../../protocol/schemas.js'
import type { TaskStore } from '../../store/task-store.js'
import type { OutputWatch } from '../../tasks/output/output-watch.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'
import { incompleteUtf8Tail, outputPath, tailOffset, taskOutput, type OutputSource } from '../../../spool/index.js'
import { compileLinePattern } from '../../tasks/output/line-pattern.js'
import { createLineScan, type LineMatch, type LineScan } from '../../tasks/output/line-scan.js'

const DEFAULT_READ_BYTES = 1024 * 1024
/** How long a read waits for the record of a task whose output has begun to say it started. */
const START_RECORD_WAIT_MS = 5000

export interface ReadOutputDeps {
  config: { layout: { spool: string } }
  store: Pick<TaskStore, 'get' | 'find' | 'whenState'>
  supervisor: Pick<Supervisor, 'outputs'>
  outputWatch: Pick<OutputWatch, 'waitForChange'>
  /** Aborted when the daemon stops: a long-poll answers at once. */
  closing: AbortSignal
}

/**
 * GET /v1/tasks/:id/output — reads output.log from a byte offset without consuming it. With
 * waitMs, answers as soon as there is output past `from` or the task has ended; with waitFor too,
 * only once a new complete line matches it (matched in linear time: the pattern is an agent's),
 * answering the output up to and including that line. An output.log that
 * is gone or replaced is TEND_ERR_OUTPUT_MISSING (410), never an empty output; one under a lease is
 * TEND_ERR_OUTPUT_BUSY (409) at once.
 */
export function registerReadOutputRoute(app: TendApp, { config, store, supervisor, outputWatch, closing }: ReadOutputDeps): void {
  typedRoutes(app).get(
    '/v1/tasks/:id/output',
    {
      schema: {
        summary: 'Read task output',
        params: TaskIdParams,
        headers: OwnerHeaders,
        querystring: ReadOutputQuery,
        response: { 200: ReadResultSchema, 400: ErrorSchema, 404: ErrorSchema, 409: ErrorSchema, 410: ErrorSchema, 503: ErrorSchema },
      },
    },
    async (request): Promise<ReadResult> => {
      const { id } = request.params
      const { query } = request
      visibleTask(store, request, id)
      const file = outputPath(config.layout.spool, id)
      // A running task's output through the descriptor the daemon holds; a finished one's by its path.
      const output = () => supervisor.outputs.source(id, taskOutput(config.layout.spool, id))
      const from = query.tail !== undefined ? await tailOffset(output(), query.tail) : (query.from ?? 0)
      const maxBytes = query.maxBytes ?? DEFAULT_READ_BYTES
      const encoding = query.encoding ?? 'utf8'
      const deadline = Date.now() + (query.waitMs ?? 0)
      const abort = new AbortController()
      request.raw.once('close', () => abort.abort())
      const pattern = query.waitFor === undefined ? null : compileLinePattern(query.waitFor, 'waitFor')
      const scan = pattern && createLineScan(pattern, from)
      let startAwaited = false
      for (;;) {
        // State first, size second: once a finished state is seen, the size read after it is final.
        const task = store.get(id)
        const finished = isFinished(task)
        const source = output()
        const size = await source.size()
        // Its process writes before the daemon has handled the spawner's answer: output is never
        // answered beside a state that says the task has yet to start.
        if (task.state === 'queued' && size > 0 && !startAwaited) {
          startAwaited = true
          await store.whenState(id, (now) => now.state !== 'queued', START_RECORD_WAIT_MS, abort.signal)
          continue
        }
        const remainingMs = deadline - Date.now()
        const giveUp = finished || remainingMs <= 0 || abort.signal.aborted
        const answer = (limit: number, matched?: LineMatch) => readAnswer(source, { from, limit, size, encoding, finished, state: task.state, matched })
        // A file cut back below `from` (the task truncated its stdout) answers at once: no byte past
        // an end that is gone may be waited for, and outputBytes < from tells the reader.
        if (scan && size >= from) {
          // The answer ends with the matching line, or, on giving up, is what came without one.
          const matched = (await scanTo(source, scan, size)) ?? (finished ? scan.finish() : null)
          if (matched) return answer(Math.min(maxBytes, matched.end - from), matched)
          if (giveUp) return answer(maxBytes)
        } else if (size !== from || giveUp) {
          const result = await answer(maxBytes)
          if (result.next > from || size <= from || giveUp) return result
        }
        const endedSince = () => {
          const now = store.find(id)
          return now === undefined || isFinished(now)
        }
        // A stopping daemon (a restart) never waits out a long-poll: the client asks the next one.
        if (closing.aborted) throw new TendError('TEND_ERR_SHUTTING_DOWN', { detail: 'read again from the next daemon (the task goes on)' })
        // The file the keeper writes is watched (through the held descriptor), whatever is at its name.
        const held = supervisor.outputs.held(id)
        const watched = held ? `/proc/self/fd/${held.fd}` : file
        const signal = AbortSignal.any([abort.signal, closing])
        await outputWatch.waitForChange(id, watched, {
          sizeSeen: size,
          endedSince,
          timeoutMs: remainingMs,
          signal,
          ...(held ? { sizeNow: () => source.size() } : {}),
        })
      }
    },
  )
}

/**
 * A text read stops before a character it would cut in two, leaving it for the next read; when
 * maxBytes is smaller than that one character, the read grows to hold it whole.
 */
async function keepCharactersWhole(source: OutputSource, from: number, chunk: Buffer, available: number): Promise<Buffer> {
  const cut = incompleteUtf8Tail(chunk)
  if (cut === 0) return chunk
  if (cut < chunk.length) return chunk.subarray(0, chunk.length - cut)
  const lead = chunk[0]!
  const width = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  return source.read(from, Math.min(width, available))
}

interface ReadAnswerOptions {
  from: number
  /** Most bytes to answer. */
  limit: number
  size: number
  encoding: 'utf8' | 'base64'
  finished: boolean
  state: ReadResult['state']
  matched: LineMatch | undefined
}

/** Output from `from`, at most `limit` bytes of it (and no more than there is), as a read answers it. */
async function readAnswer(source: OutputSource, { from, limit, size, encoding, finished, state, matched }: ReadAnswerOptions): Promise<ReadResult> {
  const available = Math.max(0, size - from)
  let chunk = await source.read(from, Math.min(limit, available))
  // The growing end of a running task's output: a character written only in part so far is
  // left for the next read (which waits for the rest of it), never decoded in halves.
  const growing = encoding === 'utf8' && !finished && chunk.length === available ? incompleteUtf8Tail(chunk) : 0
  if (encoding === 'utf8' && chunk.length < available) chunk = await keepCharactersWhole(source, from, chunk, available)
  else chunk = chunk.subarray(0, chunk.length - growing)
  const next = from + chunk.length
  return {
    data: chunk.toString(encoding),
    encoding,
    from,
    next,
    done: finished && next >= size,
    truncated: next < size - growing,
    outputBytes: size,
    state,
    ...(matched ? { matched } : {}),
  }
}

/** Bytes of one step of a waitFor scan: a large output is scanned a MiB at a time. */
const SCAN_STEP_BYTES = 1024 * 1024

/** Feeds the scan the output it has not seen, up to `size`; the first line it finds matching. */
async function scanTo(source: OutputSource, scan: LineScan, size: number): Promise<LineMatch | null> {
  while (scan.position < size) {
    const bytes = await source.read(scan.position, Math.min(SCAN_STEP_BYTES, size - scan.position))
    if (bytes.length === 0) return null
    const matched = scan.feed(bytes)
    if (matched) return matched
  }
  return null
}
