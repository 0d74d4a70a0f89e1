import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import type { NetworkDecision } from '../../protocol/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { openConsole } from '../helpers/console.js'
import { openConsolePage } from '../helpers/console-page.js'
import { startLedgerDaemon, type LedgerDaemon } from '../helpers/network-ledger-daemon.js'

/*
 * The console shows a task's network in real headless Chromium: its mode in its row and its
 * detail, and its network.log as a table that follows new decisions, blocked ones marked apart
 * with why. The egress proxy is not in the daemon yet: decisions are fed to the real daemon's
 * ledger as the proxy calls it (test/fixtures/network-ledger-daemon.mjs).
 */

let daemon: LedgerDaemon
let browser: Browser
let info: ConsoleInfo
let context: BrowserContext
let page: Page
const pageErrors: string[] = []

beforeAll(async () => {
  daemon = await startLedgerDaemon()
  info = await openConsole(daemon.env)
  browser = await launchBrowser()
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await daemon?.stop()
})

afterEach(async () => {
  await context?.close()
  expect(pageErrors.splice(0), 'errors in the page (scripts, CSP)').toEqual([])
})

async function openPage(): Promise<Page> {
  ;({ context, page } = await openConsolePage(browser, info.url!, pageErrors))
  return page
}

const row = (id: string) => `#tasks tbody tr[data-task-id="${id}"]`

function decision(fields: Partial<NetworkDecision> & Pick<NetworkDecision, 'name' | 'decision'>): NetworkDecision {
  return { time: new Date().toISOString(), port: 443, via: 'connect', sentBytes: 0, receivedBytes: 0, ...fields }
}

describe("the console's network view", () => {
  test("a task's mode is in its row and detail, its decisions in a table that follows, blocked ones marked", async () => {
    const task = await daemon.client.start({ command: ['sleep', '300'], sandbox: 'workspace', name: 'fetcher' })
    await daemon.feed(task.id, [
      decision({ name: 'registry.example', decision: 'allowed', address: '127.0.0.1', sentBytes: 512, receivedBytes: 4096 }),
      decision({ name: 'evil\u001b[2J.example', decision: 'blocked', reason: 'not on the allowlist' }),
    ])
    await openPage()
    await page.waitForSelector(row(task.id))
    await expect.poll(() => page.textContent(`${row(task.id)} td[data-col="sandbox"]`)).toBe('workspace · loopback')
    await page.click(row(task.id))
    await page.waitForSelector('#task-view:not([hidden])')
    await expect.poll(() => page.textContent('[data-field="network"]'), { timeout: 5000 }).toBe('loopback · 1 blocked')
    await page.waitForSelector('#network-log:not([hidden]) tbody tr >> nth=1', { timeout: 5000 })
    const rows = () =>
      page.$$eval('#network-log tbody tr', (trs) =>
        trs.map((tr) => ({
          decision: (tr as unknown as { dataset: { decision: string } }).dataset.decision,
          text: Array.from((tr as unknown as { cells: ArrayLike<{ textContent: string }> }).cells).map((cell) => cell.textContent),
        })),
      )
    const shown = await rows()
    expect(shown).toHaveLength(2)
    expect(shown[0]).toMatchObject({ decision: 'allowed', text: [expect.any(String), 'registry.example:443', 'connect', 'allowed', '512 B', '4 KiB'] })
    // The name the task asked for is shown, its control character made visible, never acted on.
    expect(shown[1]).toMatchObject({
      decision: 'blocked',
      text: [expect.any(String), 'evil\u241b[2J.example:443', 'connect', 'blocked: not on the allowlist', '0 B', '0 B'],
    })
    const colours = await page.$$eval('#network-log tbody tr', (trs) =>
      trs
        .map((tr) => (globalThis as unknown as { getComputedStyle: (element: unknown) => { backgroundColor: string; color: string } }).getComputedStyle(tr))
        .map((style) => `${style.backgroundColor}/${style.color}`),
    )
    expect(colours[1], 'a blocked line is drawn apart from an allowed one').not.toBe(colours[0])
    await expect.poll(() => page.textContent('#network-summary')).toContain('1 allowed, 1 blocked')

    // New decisions reach the open view without a reload.
    await daemon.feed(task.id, [decision({ name: '10.0.0.7', port: 6379, via: 'transparent', decision: 'blocked', reason: 'a private address not listed' })])
    await page.waitForSelector('#network-log tbody tr >> nth=2', { timeout: 5000 })
    expect((await rows())[2]).toMatchObject({
      decision: 'blocked',
      text: [expect.any(String), '10.0.0.7:6379', 'transparent', 'blocked: a private address not listed', '0 B', '0 B'],
    })
    await expect.poll(() => page.textContent('[data-field="network"]')).toBe('loopback · 2 blocked')
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-network.png') })
    await daemon.client.kill(task.id, { signal: 'SIGKILL', graceMs: 0 })
  })

  test("a task on the host's network says that nothing is recorded for it", async () => {
    const task = await daemon.client.start({ command: ['sleep', '300'], sandbox: 'off' })
    await openPage()
    await page.waitForSelector(row(task.id))
    expect(await page.textContent(`${row(task.id)} td[data-col="sandbox"]`)).toBe('off')
    await page.click(row(task.id))
    await expect.poll(() => page.textContent('[data-field="network"]')).toBe('host')
    await expect.poll(() => page.textContent('#network-note')).toContain('no proxy sees')
    expect(await page.isHidden('#network-log')).toBe(true)
    await daemon.client.kill(task.id, { signal: 'SIGKILL', graceMs: 0 })
  })
})
