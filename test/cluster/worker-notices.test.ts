import { afterEach, describe, expect, test } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { socketAnswers } from '../../client/ensure-daemon.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { waitFor } from '../helpers/wait-for.js'
import { assertNothingLeft, createTempHome, daemonEnv, TEND_BIN } from '../helpers/test-daemon.js'

/*
 * `tend worker` tells its operator, on stderr, where it is connected (the Redis URL without its
 * password), its name, labels and queues, and then each change: Redis lost, Redis back, once each.
 */

const PASSWORD = 'n0tice-s3cret-pw'

interface RunningWorker {
  home: string
  child: ChildProcess
  stderr: () => string
  exited: Promise<void>
}

let redis: TestRedis | undefined
let worker: RunningWorker | undefined

afterEach(async () => {
  if (worker) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGTERM')
    await worker.exited
    await assertNothingLeft(worker.home)
    rmSync(worker.home, { recursive: true, force: true })
    worker = undefined
  }
  await redis?.stop()
  redis = undefined
})

async function startWorker(url: string, extra: string[]): Promise<RunningWorker> {
  const home = createTempHome()
  const urlFile = join(home, 'redis-url')
  writeFileSync(urlFile, `${url}\n`, { mode: 0o600 })
  const child = spawn(
    process.execPath,
    [TEND_BIN, 'worker', '--redis-url-file', urlFile, '--stall', '2s', '--allow-sandbox', 'off', '--name', 'noticed', '--labels', 'gpu=1', ...extra],
    { env: daemonEnv(home), stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const started = { home, child, stderr: () => stderr, exited }
  await waitFor(`the worker's socket (stderr: ${stderr})`, () => socketAnswers(join(home, 'tend.sock')), 30_000)
  return started
}

function linesWith(text: string, needle: string): string[] {
  return text.split('\n').filter((line) => line.includes(needle))
}

describe('tend worker says where it is and each change', () => {
  test('on start: the URL without its password, its name, labels and queues; then Redis lost and back, once each', async () => {
    redis = await startRedis({ password: PASSWORD })
    const shown = `redis://:***@127.0.0.1:${redis.port}`
    worker = await startWorker(redis.url, [])
    const current = worker
    await waitFor(`the connected line (stderr: ${current.stderr()})`, () => current.stderr().includes('connected'), 30_000)
    const [connected] = linesWith(current.stderr(), 'connected')
    expect(connected).toBe(`tend worker: connected to ${shown} as noticed (labels gpu=1; queues tend, tend~gpu=1)`)
    await redis.stop()
    await waitFor(`the lost line (stderr: ${current.stderr()})`, () => current.stderr().includes('lost'), 30_000)
    await redis.restart()
    await waitFor(`the back line (stderr: ${current.stderr()})`, () => current.stderr().includes('back'), 30_000)
    const stderr = current.stderr()
    expect(linesWith(stderr, 'lost'), stderr).toHaveLength(1)
    expect(linesWith(stderr, 'lost')[0]).toMatch(new RegExp(`^tend worker: lost the cluster's Redis ${shown.replace(/[*.]/g, '\\$&')} \\(`))
    expect(linesWith(stderr, 'back'), stderr).toEqual([`tend worker: the cluster's Redis ${shown} is back`])
    expect(stderr).not.toContain(PASSWORD)
  })

  test('with --json, each notice is a line of JSON', async () => {
    redis = await startRedis()
    worker = await startWorker(redis.url, ['--json'])
    const current = worker
    await waitFor(`the connected line (stderr: ${current.stderr()})`, () => current.stderr().includes('"connected"'), 30_000)
    const line = linesWith(current.stderr(), '"connected"')[0]!
    expect(JSON.parse(line)).toEqual({
      event: 'connected',
      redis: redis.url,
      name: 'noticed',
      labels: { gpu: '1' },
      queues: ['tend', 'tend~gpu=1'],
    })
  })
})
