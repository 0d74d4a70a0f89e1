import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { waitFor } from '../helpers/wait-for.js'
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Task } from '../../protocol/index.js'
import { OutputWatch, type WakeReason } from '../../daemon/tasks/output/output-watch.js'
import { registerReadOutputRoute } from '../../daemon/http/routes/read-output.js'
import { HeldOutputs } from '../../daemon/tasks/output/held-outputs.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'

// The seam: whatever is set here runs inside fs.watch, right before the watch is armed, that is
// after the reader has looked at the file's size. Writing there is the race, every time.
// beforeStat runs when a size is looked at (fs/promises stat): the reader has already looked at the task's state.
const seam = vi.hoisted(() => ({ beforeWatch: undefined as ((file: string) => void) | undefined, beforeStat: undefined as (() => void) | undefined }))
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>()
  const stat = ((...args: Parameters<typeof actual.stat>) => {
    const hook = seam.beforeStat
    seam.beforeStat = undefined
    hook?.()
    return actual.stat(...args)
  }) as typeof actual.stat
  return { ...actual, stat, default: { ...actual, stat } }
})
vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>()
  const watch = ((...args: Parameters<typeof actual.watch>) => {
    const hook = seam.beforeWatch
    seam.beforeWatch = undefined
    hook?.(String(args[0]))
    return actual.watch(...args)
  }) as typeof actual.watch
  return { ...actual, watch, default: { ...actual, watch } }
})

/** Resolves with `promise`, or fails naming `what` after timeoutMs: a bound, not a fixed sleep. */
async function within<T>(what: string, promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs}ms waiting for ${what}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}

describe('long-poll wake-ups', () => {
  const spool = mkdtempSync(join(tmpdir(), 'tend-long-poll-'))
  afterAll(() => rmSync(spool, { recursive: true, force: true }))

  /** The read route alone, on a spool holding the task's output.log, its store answering `task()`. */
  async function readRoute(id: string, output: string, task: () => Task): Promise<{ app: FastifyInstance; outputWatch: OutputWatch }> {
    mkdirSync(join(spool, id))
    writeFileSync(join(spool, id, 'output.log'), output)
    const outputWatch = new OutputWatch()
    // No output.log held open (as for a task no daemon holds): the route reads it by its path.
    const app = Fastify()
    registerReadOutputRoute(app, {
      config: { layout: { spool } },
      store: { get: task, find: task, whenState: async () => task() },
      outputWatch,
      closing: new AbortController().signal,
      supervisor: { outputs: new HeldOutputs() },
    })
    await app.ready()
    return { app, outputWatch }
  }

  test('bytes written after the reader looked at the file but before its watch was armed wake the long-poll at once', async () => {
    const id = 'racewrite001'
    const task = { id, owner: 'default', state: 'running', maxOutputBytes: 1024 } as unknown as Task
    const { app, outputWatch } = await readRoute(id, '', () => task)
    const reasons: WakeReason[] = []
    const wait = outputWatch.waitForChange.bind(outputWatch)
    outputWatch.waitForChange = async (...args) => {
      const reason = await wait(...args)
      reasons.push(reason)
      return reason
    }
    try {
      seam.beforeWatch = (watched) => appendFileSync(watched, 'late bytes\n')
      // Without the wake-up it would wait out its 20 s.
      const answer = await within(
        'the long-poll to wake for bytes written while its watch was being armed',
        app.inject({ url: `/v1/tasks/${id}/output?waitMs=20000` }),
        5000,
      )
      expect(answer.statusCode).toBe(200)
      expect(answer.json()).toMatchObject({ data: 'late bytes\n', from: 0, next: 11, done: false })
      expect(reasons).toEqual(['changed'])
    } finally {
      seam.beforeWatch = undefined
      outputWatch.close()
      await app.close()
    }
  })

  test('a task that ends after the reader looked at its state but before it began to wait wakes the long-poll at once', async () => {
    const id = 'raceended001'
    let task = { id, owner: 'default', state: 'running', maxOutputBytes: 1024 } as unknown as Task
    const { app, outputWatch } = await readRoute(id, 'all of it\n', () => task)
    try {
      // The end is recorded and every waiting reader woken after this reader looked at the state, before it waits.
      seam.beforeStat = () => {
        task = { ...task, state: 'exited' } as Task
        outputWatch.wakeAll(id)
      }
      const answer = await within(
        'the long-poll to wake for a task that ended before it began to wait',
        app.inject({ url: `/v1/tasks/${id}/output?from=10&waitMs=20000` }),
        5000,
      )
      expect(answer.json()).toMatchObject({ data: '', from: 10, next: 10, done: true, state: 'exited' })
    } finally {
      seam.beforeStat = undefined
      outputWatch.close()
      await app.close()
    }
  })
})

describe('a deleted output.log', () => {
  let daemon: TestDaemon
  beforeAll(async () => {
    daemon = await startTestDaemon()
  })
  afterAll(async () => {
    await daemon.stop()
  })

  test('reading a finished task whose output.log was deleted answers 410 TEND_ERR_OUTPUT_MISSING, not an empty output', async () => {
    const started = await daemon.client.start({ command: ['echo', 'hello'] })
    const task = await daemon.client.wait(started.id)
    expect((await daemon.client.read(started.id)).data).toBe('hello\n')
    rmSync(join(task.spool, 'output.log'))
    await expect(daemon.client.read(started.id)).rejects.toMatchObject({ code: 'TEND_ERR_OUTPUT_MISSING', statusCode: 410 })
    await expect(daemon.client.read(started.id, { tail: 3 })).rejects.toMatchObject({ code: 'TEND_ERR_OUTPUT_MISSING', statusCode: 410 })
    // The task itself is still there to show and list.
    expect(await daemon.client.get(started.id)).toMatchObject({ state: 'exited', outputBytes: 6 })
  })

  test('output.log deleted under a long-poll of a running task: the poll gets what the task writes next (the daemon holds the file); once it ended, a read answers 410', async () => {
    const go = join(mkdtempSync(join(tmpdir(), 'tend-long-poll-go-')), 'go')
    const started = await daemon.client.start({ command: `while [ ! -e ${go} ]; do sleep 0.02; done; echo still here; exec sleep 1000`, shell: true })
    const spool = (
      await waitFor('the task to run', async () => {
        const task = await daemon.client.get(started.id)
        return task.state === 'running' ? task : null
      })
    ).spool
    try {
      const read = daemon.client.read(started.id, { waitMs: 20_000 })
      rmSync(join(spool, 'output.log'))
      writeFileSync(go, '')
      expect(await within('the long-poll to answer with what the task wrote after its output.log was deleted', read, 10_000)).toMatchObject({
        data: 'still here\n',
        from: 0,
        next: 11,
      })
      expect((await daemon.client.get(started.id)).state).toBe('running')
      await daemon.client.kill(started.id)
      await expect(daemon.client.read(started.id)).rejects.toMatchObject({ code: 'TEND_ERR_OUTPUT_MISSING', statusCode: 410 })
    } finally {
      rmSync(dirname(go), { recursive: true, force: true })
      if ((await daemon.client.get(started.id)).state === 'running') await daemon.client.kill(started.id)
    }
  })
})
