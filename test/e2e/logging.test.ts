import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

const PLANTED_ENV_SECRET = 'tend-planted-secret-env-7f3a9c'
const PLANTED_OUTPUT_SECRET = 'tend-planted-secret-output-51bd02'
const PLANTED_DAEMON_SECRET = 'tend-planted-daemon-token-c0ffee'

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { DEPLOY_TOKEN: PLANTED_DAEMON_SECRET } })
})
afterAll(async () => {
  await daemon.stop()
})

describe('logging', () => {
  test('the daemon log records task lifecycles but never output, environments or tokens', async () => {
    const started = await daemon.client.start({ command: ['sh', '-c', `echo ${PLANTED_OUTPUT_SECRET}; exit 4`], env: { API_KEY: PLANTED_ENV_SECRET } })
    await daemon.client.wait(started.id)
    await daemon.client.read(started.id)
    const log = () => readFileSync(join(daemon.home, 'daemon.log'), 'utf8')
    await waitFor('the task end to be logged', () => log().includes('"msg":"task ended"'))
    const text = log()
    expect(text).toContain(`"taskId":"${started.id}"`)
    expect(text).not.toContain(PLANTED_OUTPUT_SECRET)
    expect(text).not.toContain(PLANTED_ENV_SECRET)
    expect(text).not.toContain(PLANTED_DAEMON_SECRET)
    expect(readFileSync(join(started.spool, 'task.json'), 'utf8')).not.toContain(PLANTED_ENV_SECRET)
  })
})
