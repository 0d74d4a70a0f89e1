import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { Scheduler } from '../../../../daemon/tasks/admission/scheduler.js'
import { startTestDaemon, type TestDaemon } from '../../../helpers/test-daemon.js'
import { waitFor } from '../../../helpers/wait-for.js'

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_CONCURRENCY: '3', TEND_PER_OWNER_CONCURRENCY: '2' } })
})
afterAll(async () => {
  await daemon.stop()
})

const states = async (ids: string[]) => Promise.all(ids.map(async (id) => (await daemon.client.get(id)).state))

describe('scheduling', () => {
  test('tasks past the global limit wait as queued and start as slots free up', async () => {
    const owners = ['a', 'b', 'c', 'd']
    const tasks = await Promise.all(owners.map((owner) => daemon.client.start({ command: ['sleep', '1000'], owner })))
    const ids = tasks.map((task) => task.id)
    await waitFor('three tasks to run', async () => (await states(ids)).filter((state) => state === 'running').length === 3)
    expect((await states(ids)).filter((state) => state === 'queued')).toHaveLength(1)
    const listed = await daemon.client.list()
    expect(listed.filter((task) => task.state === 'queued')).toHaveLength(1)
    const firstRunning = ids[(await states(ids)).indexOf('running')]!
    await daemon.client.kill(firstRunning)
    await waitFor('the queued task to start', async () => (await states(ids)).filter((state) => state === 'running').length === 3)
    for (const id of ids) await daemon.client.kill(id)
  })

  test('one owner cannot run more than its cap even when global slots are free', async () => {
    const tasks = []
    for (let index = 0; index < 3; index += 1) tasks.push(await daemon.client.start({ command: ['sleep', '1000'], owner: 'greedy' }))
    const ids = tasks.map((task) => task.id)
    await waitFor('two of greedy tasks to run', async () => (await states(ids)).filter((state) => state === 'running').length === 2)
    const other = await daemon.client.start({ command: ['sleep', '1000'], owner: 'polite' })
    await waitFor('the other owner to get the free slot', async () => (await daemon.client.get(other.id)).state === 'running')
    expect(await states(ids)).toEqual(['running', 'running', 'queued'])
    expect((await daemon.client.list({ owner: 'greedy' })).map((task) => task.id)).toEqual(ids)
    await daemon.client.kill(ids[0]!)
    await waitFor("greedy's third task to start", async () => (await daemon.client.get(ids[2]!)).state === 'running')
    for (const id of [...ids, other.id]) await daemon.client.kill(id)
  })
})

describe('the scheduler alone', () => {
  /** Runs `body` while counting the unhandled rejections of this process. */
  async function countingUnhandled(body: () => Promise<void>): Promise<unknown[]> {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      await body()
      // Unhandled rejections are reported once the microtask queue drains; a turn of the loop passes that.
      await new Promise((resolve) => setImmediate(resolve))
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
    return unhandled
  }

  test('a job that rejects or throws does not escape: it is reported, its slot is freed and later jobs run', async () => {
    const failures: string[] = []
    const ran: string[] = []
    const unhandled = await countingUnhandled(async () => {
      const scheduler = new Scheduler(1, 1, (error, owner) => failures.push(`${owner}: ${(error as Error).message}`))
      scheduler.submit('a', async () => {
        throw new Error('cgroup write failed')
      })
      scheduler.submit('a', async () => void ran.push('a2'))
      scheduler.submit('b', () => Promise.reject(new Error('rejected')))
      scheduler.submit('b', () => {
        throw new Error('thrown before any promise')
      })
      scheduler.submit('c', async () => void ran.push('c'))
      await scheduler.idle()
    })
    expect(unhandled).toEqual([])
    expect(failures).toEqual(['a: cgroup write failed', 'b: rejected', 'b: thrown before any promise'])
    expect(ran.sort()).toEqual(['a2', 'c'])
  })

  test('a reporter that throws is contained too', async () => {
    const ran: string[] = []
    const unhandled = await countingUnhandled(async () => {
      const scheduler = new Scheduler(2, 1, () => {
        throw new Error('the reporter failed')
      })
      scheduler.submit('a', () => Promise.reject(new Error('job failed')))
      scheduler.submit('a', async () => void ran.push('after'))
      await scheduler.idle()
    })
    expect(unhandled).toEqual([])
    expect(ran).toEqual(['after'])
  })
})
