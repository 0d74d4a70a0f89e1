import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { createServer, type Server } from 'node:http'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { cliRunId } from '../helpers/cli.js'
import { openConsole } from '../helpers/console.js'
import { openConsolePage } from '../helpers/console-page.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The operator console in real headless Chromium: the page opened with its token, tasks started
 * through the CLI appearing live, a task's output followed as it grows, a kill from the page, the
 * owner filter, and another site's page trying to drive it.
 */

let daemon: TestDaemon
let browser: Browser
let info: ConsoleInfo
let context: BrowserContext
let page: Page
const pageErrors: string[] = []

beforeAll(async () => {
  daemon = await startTestDaemon()
  info = await openConsole(daemon.env)
  browser = await launchBrowser()
})
afterAll(async () => {
  await browser?.close()
  await daemon?.stop()
})

async function openPage(): Promise<Page> {
  ;({ context, page } = await openConsolePage(browser, info.url!, pageErrors))
  return page
}

afterEach(async () => {
  await context?.close()
  expect(pageErrors.splice(0), 'errors in the page (scripts, CSP)').toEqual([])
})

const cliRun = (...args: string[]) => cliRunId(daemon.env, ...args)

const row = (id: string) => `#tasks tbody tr[data-task-id="${id}"]`

describe('the console page', () => {
  test('opens with its token and shows the daemon; without the token the page and the API answer 401', async () => {
    const anonymous = await browser.newContext()
    try {
      const bare = await anonymous.newPage()
      expect((await bare.goto(info.origin!))?.status()).toBe(401)
      expect((await anonymous.request.get(`${info.origin}/v1/tasks`)).status()).toBe(401)
    } finally {
      await anonymous.close()
    }
    await openPage()
    // The token is gone from the address bar once the session cookie is set.
    expect(page.url()).toBe(`${info.origin}/`)
    const status = await daemon.client.status()
    await expect.poll(() => page.textContent('#daemon-version')).toContain(status.version)
    expect(await page.textContent('#concurrency')).toContain(String(status.concurrency))
    expect(await page.textContent('#sandbox-capability')).toContain(status.sandbox.default)
    expect(await page.textContent('#spool-use')).toMatch(/of/)
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-opened.png') })
  })

  // How soon a row appears is a target, measured by bench/console-load.js.
  test('tasks started through the CLI appear without a reload, and their state changes in place', async () => {
    await openPage()
    const id = await cliRun('--name', 'appears', '--', 'sleep', '1000')
    await page.waitForSelector(row(id), { timeout: 5000 })
    await page.waitForSelector(`${row(id)}[data-state="running"]`, { timeout: 5000 })
    const element = await page.$(row(id))
    await daemon.client.kill(id, { signal: 'KILL' })
    await page.waitForSelector(`${row(id)}[data-state="killed"]`, { timeout: 5000 })
    // The same row, updated, not a new one.
    expect(await element!.evaluate((node) => node.isConnected)).toBe(true)
    expect(await page.$$(row(id))).toHaveLength(1)
    const quick = await Promise.all([1, 2, 3].map((n) => cliRun('--', 'echo', `quick ${n}`)))
    for (const each of quick) await page.waitForSelector(`${row(each)}[data-state="exited"]`, { timeout: 5000 })
  })

  test("a task's output is followed as it grows, in colour, with its byte range", async () => {
    // A build log in colour: a cyan step, bold text, a green line N, a yellow warning every 5th.
    const id = await cliRun(
      '--name',
      'build & test',
      '-c',
      'i=0; while [ $i -lt 400 ]; do printf "\\033[36m[step %s]\\033[0m \\033[1mcompiling\\033[0m module_%s.ts \\033[32mline %s ok\\033[0m\\n" $i $i $i; [ $((i % 5)) = 4 ] && printf "\\033[33mwarning:\\033[0m unused variable x%s\\n" $i; i=$((i+1)); sleep 0.05; done',
    )
    await openPage()
    await page.click(row(id))
    await page.waitForSelector('#task-view:not([hidden])')
    await page.waitForSelector('#output:has-text("line 3")', { timeout: 10_000 })
    const before = await page.textContent('#output-range')
    // The task prints for 20 s: however late the page came, the range it shows grows.
    await expect.poll(() => page.textContent('#output-range'), { timeout: 10_000 }).not.toBe(before)
    expect(await page.textContent('#output-range')).toMatch(/bytes \d+–\d+ of \d+/)
    await page.waitForSelector('#output:has-text("line 40")', { timeout: 10_000 })
    // Terminal colours are rendered, not printed as escape codes.
    const text = (await page.textContent('#output')) ?? ''
    expect(text).not.toContain('\u001b[')
    // Whether by classes or styles, some text of the output is drawn green.
    const green = await page.$eval('#output', (node) =>
      [...node.querySelectorAll('span')].some((span) => {
        const [r, g, b] = (
          (globalThis as unknown as { getComputedStyle: (element: unknown) => { color: string } }).getComputedStyle(span).color.match(/\d+/g) ?? []
        ).map(Number)
        return span.textContent?.includes('line') === true && g! > 100 && g! > 2 * r! && g! > 2 * b!
      }),
    )
    expect(green, 'the green lines are rendered green').toBe(true)
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-output.png') })
    await page.fill('#output-search', 'line 7')
    await expect.poll(() => page.textContent('#output-search-count')).toMatch(/[1-9]\d* match/)
    expect(await page.getAttribute('#download', 'href')).toBe(`/v1/tasks/${id}/output.log`)
    await daemon.client.kill(id, { signal: 'KILL' })
  })

  test('kill from the page, with its signal: the state changes and says who stopped it', async () => {
    const id = await cliRun('--', 'sleep', '1000')
    await openPage()
    await page.waitForSelector(`${row(id)}[data-state="running"]`, { timeout: 5000 })
    await page.click(row(id))
    await page.waitForSelector('#task-view:not([hidden]) [data-field="state"]:has-text("running")')
    await page.selectOption('#kill-signal', 'SIGTERM')
    await page.fill('#kill-grace', '1000')
    await page.click('#kill-button')
    await page.waitForSelector('#confirm[open]')
    expect(await page.textContent('#confirm-text')).toContain(id)
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-confirm.png') })
    await page.click('#confirm-ok')
    await page.waitForSelector('#task-view [data-field="state"]:has-text("killed")', { timeout: 10_000 })
    expect(await page.textContent('#task-view [data-field="stoppedBy"]')).toContain('operator')
    await page.waitForSelector(`${row(id)}[data-state="killed"]`)
    expect(await page.textContent(`${row(id)} td[data-col="stopped"]`)).toContain('operator')
    expect(await daemon.client.get(id)).toMatchObject({ state: 'killed', stoppedBy: 'operator', signal: 'SIGTERM' })
  })

  test('remove and gc from the page, each after its confirmation; a cancelled one changes nothing', async () => {
    const finished = await cliRun('--', 'echo', 'to remove')
    const others = await Promise.all([1, 2].map((n) => cliRun('--', 'echo', `to collect ${n}`)))
    const running = await cliRun('--', 'sleep', '1000')
    await openPage()
    for (const id of [finished, ...others]) await page.waitForSelector(`${row(id)}[data-state="exited"]`, { timeout: 5000 })
    await page.click(row(finished))
    await page.waitForSelector('#task-view:not([hidden]) [data-field="state"]:has-text("exited")')
    await page.click('#remove-button')
    await page.waitForSelector('#confirm[open]')
    await page.click('#confirm-cancel')
    expect((await daemon.client.get(finished)).state).toBe('exited')
    await page.click('#remove-button')
    await page.waitForSelector('#confirm[open]')
    await page.click('#confirm-ok')
    await page.waitForSelector(row(finished), { state: 'detached', timeout: 5000 })
    await expect(daemon.client.get(finished)).rejects.toMatchObject({ code: 'TEND_ERR_TASK_NOT_FOUND' })
    await page.click('#gc-button')
    await page.waitForSelector('#confirm[open]')
    await page.click('#confirm-ok')
    for (const id of others) await page.waitForSelector(row(id), { state: 'detached', timeout: 10_000 })
    // gc removes finished tasks only.
    expect(await page.isVisible(row(running))).toBe(true)
    expect((await daemon.client.list({ all: true })).map((task) => task.id)).toEqual([running])
    await daemon.client.kill(running, { signal: 'KILL' })
  })

  test("the owner filter shows only that owner's tasks; the search finds by command", async () => {
    const alice = await cliRun('--owner', 'alice', '--', 'echo', 'from-alice')
    const bob = await cliRun('--owner', 'bob', '--', 'echo', 'from-bob')
    await openPage()
    await page.waitForSelector(row(alice))
    await page.waitForSelector(row(bob))
    await page.selectOption('#filter-owner', 'alice')
    await expect.poll(() => page.isVisible(row(bob))).toBe(false)
    expect(await page.isVisible(row(alice))).toBe(true)
    const visibleOwners = await page.$$eval('#tasks tbody tr:not([hidden]) td[data-col="owner"]', (cells) => [
      ...new Set(cells.map((cell) => cell.textContent?.trim())),
    ])
    expect(visibleOwners).toEqual(['alice'])
    await page.selectOption('#filter-owner', '')
    await page.fill('#search', 'from-bob')
    await expect.poll(() => page.isVisible(row(alice))).toBe(false)
    expect(await page.isVisible(row(bob))).toBe(true)
  })

  test("another site's page cannot drive the console, though the browser holds its session", async () => {
    const id = await cliRun('--', 'sleep', '1000')
    await waitFor('the task to run', async () => (await daemon.client.get(id)).state === 'running')
    await openPage()
    // A page of another origin on this machine (same site as far as cookies go: another port).
    const foreign = await foreignSite(info.origin!, id)
    try {
      const refused: number[] = []
      page.on('response', (response) => {
        if (response.url().startsWith(info.origin!)) refused.push(response.status())
      })
      await page.goto(foreign.url)
      await page.waitForSelector('#done', { state: 'attached', timeout: 10_000 })
      await expect.poll(() => refused.length).toBeGreaterThanOrEqual(2)
      expect(
        refused.every((status) => status === 403),
        `statuses ${refused.join(',')}`,
      ).toBe(true)
      expect((await daemon.client.get(id)).state).toBe('running')
      // And without a browser: a foreign Origin with a valid token.
      const direct = await context.request.post(`${info.origin}/v1/tasks/${id}/kill`, {
        headers: { origin: 'http://evil.example', authorization: `Bearer ${info.token}` },
        data: {},
      })
      expect(direct.status()).toBe(403)
      expect((await direct.json()) as { code: string }).toMatchObject({ code: 'TEND_ERR_FOREIGN_ORIGIN' })
      expect((await daemon.client.get(id)).state).toBe('running')
      // The refusals show in the foreign page's console: they are the attack failing, nothing else.
      const refusals = pageErrors.splice(0)
      expect(
        refusals.every((message) => message.includes('status of 403')),
        refusals.join('\n'),
      ).toBe(true)
    } finally {
      await foreign.close()
      await daemon.client.kill(id, { signal: 'KILL' })
    }
  })
})

/** Serves one page that tries to kill the task through the console (a fetch and a form post), then marks #done. */
async function foreignSite(consoleOrigin: string, id: string): Promise<{ url: string; close: () => Promise<void> }> {
  const html = `<!doctype html><html><body>
<form id="f" method="POST" action="${consoleOrigin}/v1/tasks/${id}/kill" target="sink"><input name="signal" value="SIGKILL"></form>
<iframe name="sink"></iframe>
<script>
fetch(${JSON.stringify(`${consoleOrigin}/v1/tasks/${id}/kill`)}, { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{"signal":"SIGKILL"}' })
  .catch(() => undefined)
  .then(() => {
    document.querySelector('iframe').addEventListener('load', () => { const d = document.createElement('p'); d.id = 'done'; document.body.append(d) }, { once: true })
    document.getElementById('f').submit()
  })
</script></body></html>`
  const server: Server = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end(html))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((resolve) => server.close(() => resolve())) }
}
