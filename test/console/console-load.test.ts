import { afterAll, beforeAll, expect, test } from 'vitest'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { openConsole } from '../helpers/console.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The console under load: 1,000 tasks in the table and a 1 GiB output followed to its end, every
 * row there and the end shown. The page's heap and the daemon's memory meanwhile are targets,
 * measured by bench/console-load.js.
 */

const TASKS = 1000
const GiB = 1024 ** 3

let daemon: TestDaemon
let browser: Browser
let info: ConsoleInfo

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_CONCURRENCY: '64', TEND_PER_OWNER_CONCURRENCY: '64' } })
  info = await openConsole(daemon.env)
  browser = await launchBrowser()
})
afterAll(async () => {
  await browser?.close()
  await daemon?.stop()
})

test('1,000 tasks in the table and a 1 GiB output followed to its end: every row, the last bytes shown, no page error', async () => {
  for (let started = 0; started < TASKS; started += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, n) => daemon.client.start({ command: ['true'], name: `load ${started + n}` })))
  }
  await waitFor('every task to finish', async () => (await daemon.client.list()).length === 0, 120_000)
  // Paced so that it is still writing while the page follows it: ~100 MiB/s for 1 GiB.
  const writer = await daemon.client.start({
    // 128 times 65,536 lines of 128 bytes: exactly 1 GiB.
    command: 'line=$(printf "%0127d" 0 | tr 0 x); i=0; while [ $i -lt 128 ]; do yes "$line" | head -n 65536; i=$((i+1)); sleep 0.05; done',
    shell: true,
    maxOutputBytes: 2 * GiB,
    name: 'one GiB',
  })

  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
  try {
    const page = await context.newPage()
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(info.url!)
    // (The page's CSP forbids evaluating strings: the rows are counted from the test's side.)
    await waitFor(`${TASKS + 1} rows in the table`, async () => (await page.locator('#tasks tbody tr').count()) >= TASKS + 1, 30_000)
    await page.click(`#tasks tbody tr[data-task-id="${writer.id}"]`)
    await page.waitForSelector('#task-view:not([hidden])')
    const ended = await daemon.client.wait(writer.id, { timeoutMs: 120_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0, outputBytes: GiB })
    // The page is still following: it shows the end of the output, not its beginning.
    await waitFor('the page to show the last bytes', async () => (await page.textContent('#output-range'))?.includes(`of ${GiB}`))
    expect(await page.$$eval('#tasks tbody tr', (rows) => rows.length)).toBe(TASKS + 1)
    expect(errors).toEqual([])
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-load.png') })
  } finally {
    await context.close()
  }
})
