// Bench: the operator console under load, in headless Chromium (Debian's chromium, through
// playwright-core): how soon a task started through the CLI shows in the table, then 1,000 finished
// tasks in the table and a 1 GiB output followed for 10 s, with the page's JavaScript heap (CDP
// Performance.getMetrics) and the daemon's RSS growth sampled over those 10 s.
// test/console/console-load.test.ts and console-page.test.ts hold what the page must do.
import { execFileSync } from 'node:child_process'
import { rmSync } from 'node:fs'
import { setTimeout as delay } from 'node:timers/promises'
import { chromium } from 'playwright-core'
import { elapsedMs, GiB, median, MiB, row, rssBytes, runCli, runIfMain, startDaemon, tempDir, tendEnv } from './lib.js'

const TASKS = 1000
const FOLLOW_MS = 10_000
const SHOWN = 5
const SHOWN_TARGET_MS = 1000
const HEAP_TARGET_MIB = 100
const GROWTH_TARGET_MIB = 10

function chromiumPath() {
  try {
    return execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim().split('\n')[0]
  } catch {
    throw new Error('chromium is not installed: the console bench needs it (apt-get install chromium)')
  }
}

/** Polls until `check()` is true; fails naming `what` after `timeoutMs`. */
async function waitUntil(what, timeoutMs, check) {
  for (const deadline = Date.now() + timeoutMs; !(await check()); ) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await delay(20)
  }
}

export async function consoleLoad({ log = console.log } = {}) {
  const daemon = await startDaemon('console', { TEND_CONCURRENCY: '64', TEND_PER_OWNER_CONCURRENCY: '64' })
  const { client, pid, home } = daemon
  const workspace = tempDir('console-ws')
  const env = tendEnv(home)
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] })
  try {
    const info = JSON.parse((await runCli(['console', '--json', '--no-open'], { env })).stdout)
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
    const page = await context.newPage()
    await page.goto(info.url)
    await page.waitForSelector('#tasks')

    // From the CLI's answer that a task started until its row is in the table.
    const shownMs = []
    for (let i = 0; i < SHOWN; i++) {
      const { id } = JSON.parse((await runCli(['run', '--json', '--name', `shown ${i}`, '--', 'true'], { env, cwd: workspace })).stdout)
      const start = process.hrtime.bigint()
      await page.waitForSelector(`#tasks tbody tr[data-task-id="${id}"]`, { timeout: 30_000 })
      shownMs.push(elapsedMs(start))
    }

    for (let started = 0; started < TASKS; started += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, n) => client.start({ command: ['true'], name: `load ${started + n}`, cwd: workspace })))
    }
    await waitUntil('every task to finish', 120_000, async () => (await client.list()).length === 0)
    // Paced so that it is still writing while the page follows it: ~100 MiB/s for 1 GiB.
    const writer = await client.start({
      command: 'line=$(printf "%0127d" 0 | tr 0 x); i=0; while [ $i -lt 128 ]; do yes "$line" | head -n 65536; i=$((i+1)); sleep 0.05; done',
      shell: true,
      cwd: workspace,
      maxOutputBytes: 2 * GiB,
      name: 'one GiB',
    })
    const baseline = rssBytes(pid)
    await page.reload()
    await waitUntil(`${TASKS} rows in the table`, 30_000, async () => (await page.locator('#tasks tbody tr').count()) >= TASKS + SHOWN + 1)
    const cdp = await context.newCDPSession(page)
    await cdp.send('Performance.enable')
    const heapUsed = async () => (await cdp.send('Performance.getMetrics')).metrics.find((metric) => metric.name === 'JSHeapUsedSize').value
    await page.click(`#tasks tbody tr[data-task-id="${writer.id}"]`)
    await page.waitForSelector('#task-view:not([hidden])')
    let peakHeap = 0
    let peakResident = 0
    for (const end = Date.now() + FOLLOW_MS; Date.now() < end; await delay(20)) {
      peakHeap = Math.max(peakHeap, await heapUsed())
      peakResident = Math.max(peakResident, rssBytes(pid))
    }
    const ended = await client.wait(writer.id, { timeoutMs: 120_000 })
    if (ended.state !== 'exited' || ended.outputBytes !== GiB) throw new Error(`the writer ended ${ended.state} with ${ended.outputBytes} bytes`)
    await context.close()

    const shown = median(shownMs)
    const heap = peakHeap / MiB
    const growth = (peakResident - baseline) / MiB
    log(
      `  console: rows shown after ${shownMs.map((ms) => ms.toFixed(0)).join(', ')} ms; page heap peak ${heap.toFixed(1)} MiB; daemon RSS ${(baseline / MiB).toFixed(1)} → ${(peakResident / MiB).toFixed(1)} MiB`,
    )
    return [
      row({
        bench: 'console: a CLI task shown in the table',
        value: shown,
        baseline: undefined,
        unit: 'ms',
        target: `< ${SHOWN_TARGET_MS} ms`,
        pass: shown < SHOWN_TARGET_MS,
      }),
      row({
        bench: `console: page heap, ${TASKS} rows + 1 GiB followed`,
        value: heap,
        baseline: undefined,
        unit: 'MiB',
        target: `< ${HEAP_TARGET_MIB} MiB`,
        pass: heap < HEAP_TARGET_MIB,
      }),
      row({
        bench: 'console: daemon RSS growth while followed',
        value: growth,
        baseline: baseline / MiB,
        unit: 'MiB',
        target: `< ${GROWTH_TARGET_MIB} MiB`,
        pass: growth < GROWTH_TARGET_MIB,
      }),
    ]
  } finally {
    await browser.close()
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
}

await runIfMain(import.meta.url, consoleLoad)
