import { afterAll, beforeAll, expect, test } from 'vitest'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { openConsole } from '../helpers/console.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The console under load: 1,000 tasks in the table and a 1 GiB output followed for 10 s. The
 * page's JavaScript heap (Chrome DevTools Protocol) must stay under 100 MiB and the daemon's
 * resident memory (/proc) must grow by less than 10 MiB. The figures are written to
 * .tend-test-screenshots/console-load.json for docs/benchmarks.md.
 */

const TASKS = 1000
const GiB = 1024 ** 3
const MiB = 1024 ** 2
const FOLLOW_MS = 10_000

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

function residentBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((each) => each.startsWith('VmRSS:'))!
  return Number(/(\d+)/.exec(line)![1]) * 1024
}

test('1,000 tasks in the table and a 1 GiB output followed for 10 s: page heap under 100 MiB, daemon RSS +10 MiB at most', async () => {
  for (let started = 0; started < TASKS; started += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, n) => daemon.client.start({ command: ['true'], name: `load ${started + n}` })))
  }
  await waitFor('every task to finish', async () => (await daemon.client.list()).length === 0, 120_000)
  const { pid } = await daemon.client.status()
  // Paced so that it is still writing while the page follows it: ~100 MiB/s for 1 GiB.
  const writer = await daemon.client.start({
    // 128 times 65,536 lines of 128 bytes: exactly 1 GiB.
    command: 'line=$(printf "%0127d" 0 | tr 0 x); i=0; while [ $i -lt 128 ]; do yes "$line" | head -n 65536; i=$((i+1)); sleep 0.05; done',
    shell: true,
    maxOutputBytes: 2 * GiB,
    name: 'one GiB',
  })
  const baseline = residentBytes(pid)

  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
  try {
    const page = await context.newPage()
    const errors: string[] = []
    page.on('pageerror', (error) => errors.push(error.message))
    await page.goto(info.url!)
    // (The page's CSP forbids evaluating strings: the rows are counted from the test's side.)
    await waitFor(`${TASKS + 1} rows in the table`, async () => (await page.locator('#tasks tbody tr').count()) >= TASKS + 1, 30_000)
    const cdp = await context.newCDPSession(page)
    await cdp.send('Performance.enable')
    const heapUsed = async () => {
      const { metrics } = await cdp.send('Performance.getMetrics')
      return metrics.find((metric) => metric.name === 'JSHeapUsedSize')!.value
    }
    await page.click(`#tasks tbody tr[data-task-id="${writer.id}"]`)
    await page.waitForSelector('#task-view:not([hidden])')
    const followedFrom = Date.now()
    let peakHeap = 0
    let peakResident = 0
    // Sampled while the page follows the output (the duration is what is measured, not a wait for something).
    await waitFor(
      `${FOLLOW_MS} ms of following the 1 GiB output`,
      async () => {
        peakHeap = Math.max(peakHeap, await heapUsed())
        peakResident = Math.max(peakResident, residentBytes(pid))
        return Date.now() - followedFrom >= FOLLOW_MS
      },
      FOLLOW_MS + 30_000,
    )
    const ended = await daemon.client.wait(writer.id, { timeoutMs: 120_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0, outputBytes: GiB })
    // The page is still following: it shows the end of the output, not its beginning.
    await waitFor('the page to show the last bytes', async () => (await page.textContent('#output-range'))?.includes(`of ${GiB}`))
    expect(await page.$$eval('#tasks tbody tr', (rows) => rows.length)).toBe(TASKS + 1)
    expect(errors).toEqual([])
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-load.png') })
    const figures = {
      tasks: TASKS + 1,
      outputBytes: GiB,
      followedMs: Date.now() - followedFrom,
      pageHeapPeakMiB: +(peakHeap / MiB).toFixed(1),
      daemonResidentBaselineMiB: +(baseline / MiB).toFixed(1),
      daemonResidentPeakMiB: +(peakResident / MiB).toFixed(1),
      daemonResidentGrowthMiB: +((peakResident - baseline) / MiB).toFixed(1),
    }
    writeFileSync(join(SCREENSHOT_DIR, 'console-load.json'), `${JSON.stringify(figures, null, 2)}\n`)
    console.log(`console load: ${JSON.stringify(figures)}`)
    expect(peakHeap, 'page heap').toBeLessThan(100 * MiB)
    expect(peakResident - baseline, 'daemon RSS growth').toBeLessThan(10 * MiB)
  } finally {
    await context.close()
  }
})
