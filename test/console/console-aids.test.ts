import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { openConsole } from '../helpers/console.js'
import { openConsolePage } from '../helpers/console-page.js'
import { freePort } from '../helpers/ports.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * What the console shows of issue 28 in real headless Chromium: a task's readiness, live from the
 * event stream; its ports, linked where the browser can reach them; its CPU and memory while it runs
 * (with a chart) and what it used once ended; and what a queued task waits for.
 */

let daemon: TestDaemon
let browser: Browser
let info: ConsoleInfo
let context: BrowserContext
let page: Page
let scratch: string
const pageErrors: string[] = []

beforeAll(async () => {
  daemon = await startTestDaemon()
  info = await openConsole(daemon.env)
  browser = await launchBrowser()
  scratch = mkdtempSync(join(tmpdir(), 'tend-console-aids-'))
  // Tasks run as their own user: they enter it and read what is in it.
  chmodSync(scratch, 0o755)
})
afterAll(async () => {
  await browser?.close()
  await daemon?.stop()
  if (scratch) rmSync(scratch, { recursive: true, force: true })
})

afterEach(async () => {
  await context?.close()
  expect(pageErrors.splice(0), 'errors in the page (scripts, CSP)').toEqual([])
})

async function openPage(): Promise<Page> {
  ;({ context, page } = await openConsolePage(browser, info.url!, pageErrors, 1600))
  return page
}

const row = (id: string) => `#tasks tbody tr[data-task-id="${id}"]`
const cell = (id: string, column: string) => `${row(id)} td[data-col="${column}"]`

async function openView(id: string): Promise<void> {
  await page.click(cell(id, 'command'))
  await page.waitForSelector(`#task-view:not([hidden]) [data-field="id"]:has-text("${id}")`)
}

describe("the console's readiness, ports, usage and dependencies", () => {
  test('readiness: waiting, then ready by its pattern with the line, without a reload; a condition that times out says so', async () => {
    const go = join(scratch, 'go')
    const server = await daemon.client.start({
      command: `while [ ! -e ${go} ]; do sleep 0.05; done; echo "server listening on 8080"; sleep 300`,
      shell: true,
      name: 'dev server',
      ready: { pattern: 'listening on \\d+', timeoutMs: 60_000 },
    })
    await openPage()
    await page.waitForSelector(`${row(server.id)} .state-note[data-kind="waiting"]`, { timeout: 10_000 })
    await openView(server.id)
    expect(await page.textContent('[data-field="ready"]')).toMatch(/^waiting for a line matching \/listening on \\d\+\/ \(up to 1m 00s\)$/)
    writeFileSync(go, '')
    await page.waitForSelector(`${row(server.id)} .state-note[data-kind="ready"]`, { timeout: 10_000 })
    await expect.poll(() => page.textContent('[data-field="ready"]')).toMatch(/^ready at .+ by pattern: “server listening on 8080”$/)
    expect(await page.getAttribute(`${row(server.id)}`, 'data-state')).toBe('running')
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-ready.png') })

    const never = await daemon.client.start({ command: ['sleep', '300'], name: 'never ready', ready: { pattern: 'never printed', timeoutMs: 1000 } })
    await page.waitForSelector(`${row(never.id)} .state-note[data-kind="failed"]:has-text("not ready")`, { timeout: 10_000 })
    expect(await page.getAttribute(`${row(never.id)} .state-note`, 'title')).toMatch(/^not ready: timed out/)
    await daemon.client.kill(server.id, { signal: 'KILL' })
    await daemon.client.kill(never.id, { signal: 'KILL' })
  })

  test("a server's port links to its page in a new tab, with no way back to the console; a sandboxed task's port is shown, not linked", async () => {
    const site = mkdtempSync(join(scratch, 'site-'))
    chmodSync(site, 0o755)
    writeFileSync(join(site, 'index.html'), '<!doctype html><title>task page</title><p id="hello">hello from the task</p>')
    const web = await daemon.client.start({
      command: 'exec python3 -m http.server "$PORT" --bind 127.0.0.1',
      shell: true,
      port: 'auto',
      cwd: site,
      sandbox: 'off',
      name: 'web',
    })
    const port = web.port!
    const innerPort = await freePort()
    const inner = await daemon.client.start({
      command: ['python3', '-m', 'http.server', String(innerPort), '--bind', '127.0.0.1'],
      cwd: site,
      sandbox: 'workspace',
      name: 'inner web',
    })
    await openPage()
    const link = `${cell(web.id, 'ports')} a.port`
    await page.waitForSelector(link, { timeout: 15_000 })
    expect(await page.textContent(link)).toBe(String(port))
    expect(await page.getAttribute(link, 'href')).toBe(`http://127.0.0.1:${port}/`)
    expect(await page.getAttribute(link, 'target')).toBe('_blank')
    expect((await page.getAttribute(link, 'rel'))?.split(' ')).toContain('noopener')
    const [opened] = await Promise.all([context.waitForEvent('page'), page.click(link)])
    await opened.waitForSelector('#hello:has-text("hello from the task")')
    expect(await opened.evaluate(() => (globalThis as unknown as { opener: unknown }).opener)).toBeNull()
    await opened.close()

    // Its 127.0.0.1 is its owner's private network's, which the browser cannot reach.
    await page.waitForSelector(`${cell(inner.id, 'ports')} .port:has-text("${innerPort}")`, { timeout: 15_000 })
    expect(await page.$(`${cell(inner.id, 'ports')} a`)).toBeNull()
    await openView(web.id)
    expect(await page.textContent('[data-field="port"]')).toBe(String(port))
    expect(await page.getAttribute(`[data-field="ports"] a.port`, 'href')).toBe(`http://127.0.0.1:${port}/`)

    // Ended, it listens on nothing.
    await daemon.client.kill(web.id, { signal: 'KILL' })
    await page.waitForSelector(`${row(web.id)}[data-state="killed"]`)
    await expect.poll(() => page.textContent(cell(web.id, 'ports'))).toBe('')
    await daemon.client.kill(inner.id, { signal: 'KILL' })
  })

  test('CPU and memory while it runs, asked at most once a second, with a chart; what it used once it ended', async () => {
    const busy = await daemon.client.start({ command: ['python3', '-c', 'b = bytearray(64 * 1024 * 1024)\nwhile True: pass'], name: 'busy' })
    await openPage()
    const liveAsks: number[] = []
    page.on('request', (request) => {
      if (/\/v1\/tasks\?(.*&)?live=true/.test(request.url())) liveAsks.push(Date.now())
    })
    // A busy loop's share of a machine other tests load too: some CPU, not a set figure.
    await waitFor(
      'a live CPU figure',
      async () => {
        const text = (await page.textContent(cell(busy.id, 'cpu'))) ?? ''
        return text.endsWith('%') && Number.parseFloat(text) > 1
      },
      15_000,
    )
    await waitFor(
      'its memory at 64 MiB or more',
      async () => /^(6[4-9]|[7-9]\d|\d{3})(\.\d)? MiB$/.test((await page.textContent(cell(busy.id, 'mem'))) ?? ''),
      15_000,
    )
    await openView(busy.id)
    await page.waitForSelector('#usage:not([hidden]) #usage-chart canvas')
    await expect
      .poll(() => page.getAttribute('#usage-chart', 'aria-label'), { timeout: 10_000 })
      .toMatch(/over the last [1-9]\d* s: CPU up to \d+%, memory up to \d+/)
    expect(await page.textContent('[data-field="cpu"]')).toMatch(/% of a core$/)
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-usage.png') })
    const from = Date.now()
    await waitFor('four seconds of asking', () => Date.now() - from >= 4000)
    const inWindow = liveAsks.filter((at) => at >= from)
    expect(inWindow.length, 'live figures asked at most once a second').toBeLessThanOrEqual(5)
    expect(inWindow.length).toBeGreaterThanOrEqual(2)

    await daemon.client.kill(busy.id, { signal: 'KILL' })
    const ended = await daemon.client.wait(busy.id)
    expect(ended.usage).toBeDefined()
    await waitFor(
      'its CPU time in the CPU column',
      async () => /^\d+(\.\d+)?s$|^\d+m \d\ds$/.test((await page.textContent(cell(busy.id, 'cpu'))) ?? ''),
      10_000,
    )
    expect(await page.getAttribute(cell(busy.id, 'mem'), 'title')).toMatch(/peak memory .*(6[4-9]|[7-9]\d|\d{3})(\.\d)? MiB/)
    expect(await page.textContent('[data-field="usage"]')).toMatch(/^CPU .+ \(user .+, system .+\) · peak memory.* · read .+, written .+$/)
  })

  test('a queued task shows what it waits for, each dependency linked with its state; a failed dependency fails it', async () => {
    const first = await daemon.client.start({ command: ['sleep', '300'], name: 'build' })
    const second = await daemon.client.start({ command: ['echo', 'tests'], name: 'tests', after: [first.id] })
    expect(second.state).toBe('queued')
    await openPage()
    await page.waitForSelector(`${row(second.id)}[data-state="queued"] .state-note[data-kind="after"]:has-text("after 1")`)
    expect(await page.getAttribute(`${row(second.id)} .state-note`, 'title')).toBe(`waits for ${first.id}: starts once it ends with exit 0`)
    await openView(second.id)
    const dependency = `[data-field="after"] a[href="#/tasks/${first.id}"]`
    await page.waitForSelector(dependency)
    expect(await page.textContent('[data-field="after"]')).toBe(`${first.id} (running) · starts once it ends with exit 0`)
    await daemon.client.kill(first.id, { signal: 'KILL' })
    await page.waitForSelector(`${row(second.id)}[data-state="failed"]`, { timeout: 10_000 })
    expect(await page.textContent('[data-field="after"]')).toMatch(new RegExp(`^${first.id} \\(killed.*\\) · starts once it ends with exit 0$`))
    expect(await page.textContent(cell(second.id, 'stopped'))).toContain(`dependency ${first.id}`)
    await page.click(dependency)
    await page.waitForSelector(`#task-view [data-field="id"]:has-text("${first.id}")`)
  })
})
