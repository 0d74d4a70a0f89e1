import { describe, expect, test } from 'vitest'
import { TendClient } from '../../../client/client.js'
import { followOnCluster } from '../../../client/cluster/cli-follow.js'
import type { ClusterClient, ClusterTask } from '../../../client/cluster/cluster-client.js'
import { TendError, type ReadResult } from '../../../protocol/index.js'
import { waitFor } from '../../helpers/wait-for.js'

/**
 * `logs -f --cluster` against a scripted queue and scripted workers, read through the real
 * TendClient.follow. The queue's job record lags the worker that took the job: a look at the queue
 * (`wait`) can still name the lost attempt's worker while a lookup made a moment later
 * (`workerClient`) already names the next attempt's. Each attempt's output must be printed once,
 * whole, in order, whichever answer comes when.
 */
class Script {
  /** What a look at the queue says. */
  view: ClusterTask = where(1, 'left')
  /** What the lookup of the task's worker says. */
  fresh: ClusterTask = where(1, 'left')
  readonly workers: Record<string, { output: string; ended: boolean; alive: boolean; reads: number }> = {
    left: { output: '', ended: false, alive: true, reads: 0 },
    right: { output: '', ended: false, alive: true, reads: 0 },
  }
  /** Lookups of the task's worker so far. */
  lookups = 0
  private waiters: Array<() => void> = []

  changed(): void {
    for (const wake of this.waiters.splice(0)) wake()
  }

  /** Until the next change, or a short while (the real look lasts up to a second). */
  private nextChange(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, 20)
      this.waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  workerClient(name: string): TendClient {
    const client = Object.create(TendClient.prototype) as TendClient
    const worker = this.workers[name]!
    Object.assign(client, {
      close: () => {},
      read: async (_id: string, options: { from?: number }): Promise<ReadResult> => {
        for (;;) {
          if (!worker.alive) throw new TendError('TEND_ERR_DAEMON_UNAVAILABLE', { detail: `worker ${name} is gone` })
          worker.reads += 1
          const bytes = Buffer.from(worker.output)
          const from = options.from ?? 0
          if (bytes.length !== from || worker.ended) {
            const chunk = bytes.subarray(Math.min(from, bytes.length))
            const next = from + chunk.length
            const done = worker.ended && next >= bytes.length
            return { data: chunk.toString('base64'), encoding: 'base64', from, next, done, truncated: false, outputBytes: bytes.length, state: 'running' }
          }
          await this.nextChange()
        }
      },
    })
    return client
  }

  cluster(): ClusterClient {
    return {
      get: async () => this.view,
      wait: async () => {
        await this.nextChange()
        return this.view
      },
      workerClient: async () => {
        this.lookups += 1
        const fresh = this.fresh
        if (!fresh.worker) throw new TendError('TEND_ERR_CLUSTER_QUEUED', { id: 'task', what: 'output' })
        return { cluster: fresh, client: this.workerClient(fresh.worker) }
      },
    } as unknown as ClusterClient
  }
}

function where(attempt: number, worker: string | null, state = 'running'): ClusterTask {
  const ended = state !== 'running' && state !== 'queued'
  return {
    id: 'task',
    queue: 'tend',
    owner: 'agent',
    name: null,
    command: ['true'],
    shell: false,
    state,
    worker,
    task: ended ? ({ id: 'task', state } as ClusterTask['task']) : null,
    reason: null,
    attempt,
    earlier: attempt > 1 ? [{ attempt: 1, worker: 'left', reason: 'worker left stopped answering' }] : [],
  }
}

function startFollow(script: Script) {
  const printed = { out: '', err: [] as string[] }
  const io = { json: false, out: () => {}, err: (text: string) => printed.err.push(text), writeRaw: async () => {}, colour: false }
  const done = followOnCluster(script.cluster(), io, 'task', {}, async (chunk) => {
    printed.out += Buffer.from(chunk.data, 'base64').toString()
  })
  return { printed, done }
}

describe('logs -f on a queue: each attempt is printed once, whole', () => {
  test('a look at the queue that still names the lost worker while the lookup names the retry’s: the retry is read once, from its first byte', async () => {
    const script = new Script()
    const left = script.workers.left!
    const right = script.workers.right!
    left.output = 'attempt 0 on left\n'
    const { printed, done } = startFollow(script)
    await waitFor('the first attempt to be printed', () => printed.out === 'attempt 0 on left\n')
    // Left dies; right runs attempt 2 and has printed a line; the queue's look still says left.
    left.alive = false
    right.output = 'attempt 1\n'
    const lookups = script.lookups
    script.fresh = where(2, 'right')
    script.changed()
    await waitFor('the follow to look up the task’s worker again, while the queue’s look still names left', () => script.lookups > lookups)
    script.view = where(2, 'right')
    script.changed()
    await waitFor('the retry’s first line to be printed', () => printed.out.includes('attempt 1\n'))
    right.output += 'done\n'
    right.ended = true
    script.view = where(2, 'right', 'exited')
    script.fresh = script.view
    script.changed()
    expect(await done).toBe(0)
    expect(printed.out).toBe('attempt 0 on left\nattempt 1\ndone\n')
    expect(printed.err.filter((line) => line.includes('was lost'))).toEqual([
      'tend: attempt 1 was lost on worker left: worker left stopped answering; following attempt 2 on worker right',
    ])
  })

  test('the retry’s worker stops answering after a line and answers again: the rest only, once', async () => {
    const script = new Script()
    const left = script.workers.left!
    const right = script.workers.right!
    left.output = 'attempt 0\n'
    const { printed, done } = startFollow(script)
    await waitFor('the first attempt to be printed', () => printed.out === 'attempt 0\n')
    left.alive = false
    script.view = where(2, 'right')
    script.fresh = script.view
    right.output = 'attempt 1\n'
    script.changed()
    await waitFor('the retry’s first line to be printed', () => printed.out === 'attempt 0\nattempt 1\n')
    right.alive = false
    script.changed()
    const readsBefore = right.reads
    right.output += 'done\n'
    right.ended = true
    right.alive = true
    script.view = where(2, 'right', 'exited')
    script.fresh = script.view
    script.changed()
    expect(await done).toBe(0)
    expect(right.reads).toBeGreaterThan(readsBefore)
    expect(printed.out).toBe('attempt 0\nattempt 1\ndone\n')
  })
})
