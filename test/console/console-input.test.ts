import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { cliRunId } from '../helpers/cli.js'
import { openConsole } from '../helpers/console.js'
import { openConsolePage } from '../helpers/console-page.js'
import { createTempHome, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * The task view's actions in real headless Chromium: the input box of a --stdin task (a line,
 * Ctrl-D) and of a --tty task (Ctrl-C), the live terminal of a --tty task (its output, keys typed
 * into it, its size sent as a resize), run again on a finished task, and a read-only session that
 * sees these and the header's gc disabled with the reason.
 */

let daemon: TestDaemon
let browser: Browser
let info: ConsoleInfo
let context: BrowserContext
let page: Page
let workDir: string
const pageErrors: string[] = []
/** A read-scope token, in the tokens file before the daemon starts (as a cluster worker's would be). */
const readToken = randomBytes(32).toString('base64url')

beforeAll(async () => {
  const home = createTempHome()
  const digest = createHash('sha256').update(readToken).digest('hex')
  writeFileSync(join(home, 'console-tokens.json'), JSON.stringify({ tokens: [{ digest, createdAt: new Date().toISOString(), scope: 'read' }] }), {
    mode: 0o600,
  })
  daemon = await startTestDaemon({ home })
  info = await openConsole(daemon.env)
  browser = await launchBrowser()
  workDir = mkdtempSync(join(tmpdir(), 'tend-console-input-'))
})
afterAll(async () => {
  await browser?.close()
  await daemon?.stop()
  if (workDir) rmSync(workDir, { recursive: true, force: true })
})

async function openPage(url = info.url!, width = 1400): Promise<Page> {
  ;({ context, page } = await openConsolePage(browser, url, pageErrors, width))
  return page
}

afterEach(async () => {
  await context?.close()
  expect(pageErrors.splice(0), 'errors in the page (scripts, CSP)').toEqual([])
})

const cliRun = (...args: string[]) => cliRunId(daemon.env, ...args)

/** What the page's callbacks use of the browser (the tests compile without the DOM library). */
type Computed = { getComputedStyle: (element: unknown) => { backgroundColor: string } }

const row = (id: string) => `#tasks tbody tr[data-task-id="${id}"]`

async function openTaskView(id: string, state = 'running'): Promise<void> {
  await page.waitForSelector(`${row(id)}[data-state="${state}"]`, { timeout: 10_000 })
  await page.click(row(id))
  await page.waitForSelector(`#task-view:not([hidden]) [data-field="state"]:has-text("${state}")`)
}

describe('the input box', () => {
  test('a --stdin task gets a line from the box (Enter and the button) and echoes it; Ctrl-D ends it', async () => {
    const id = await cliRun('--stdin', '--', 'cat')
    await openPage()
    await openTaskView(id)
    await page.waitForSelector('#input-box:not([hidden])')
    expect(await page.isDisabled('#input-ctrl-c'), 'a pipe carries no Ctrl-C').toBe(true)
    await page.fill('#input-line', 'hello from the box')
    await page.press('#input-line', 'Enter')
    await page.waitForSelector('#output:has-text("hello from the box")', { timeout: 10_000 })
    expect(await page.inputValue('#input-line')).toBe('')
    await page.fill('#input-line', 'and the button')
    await page.click('#input-send')
    await page.waitForSelector('#output:has-text("and the button")', { timeout: 10_000 })
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-input.png') })
    await page.click('#input-ctrl-d')
    const task = await daemon.client.wait(id, { timeoutMs: 10_000 })
    expect(task.state).toBe('exited')
    expect(task.exitCode).toBe(0)
    await page.waitForSelector('#input-box[hidden]', { state: 'attached', timeout: 10_000 })
  })

  test.each([
    { how: 'its button', send: () => page.click('#input-ctrl-c') },
    {
      how: 'typed in the box',
      send: async () => {
        await page.focus('#input-line')
        await page.keyboard.press('Control+c')
      },
    },
  ])('a --tty task gets Ctrl-C from the box ($how): its foreground process ends by SIGINT', async ({ send }) => {
    const id = await cliRun('--tty', '--', 'sleep', '1000')
    await openPage()
    await openTaskView(id)
    await page.waitForSelector('#input-box:not([hidden])')
    await send()
    expect((await daemon.client.wait(id, { timeoutMs: 10_000 })).signal).toBe('SIGINT')
  })
})

describe('the live terminal', () => {
  test("a --tty task's output is written into a terminal, keys typed there are its input, and its size follows the page", async () => {
    const id = await cliRun('--tty', '--', 'sh', '-c', 'echo terminal-ready; stty size; read line; echo "got:$line"; stty size; sleep 1000')
    await openPage(info.url!, 1500)
    await openTaskView(id)
    await page.waitForSelector('#terminal:not([hidden]) .xterm', { timeout: 10_000 })
    expect(await page.isHidden('#output'), 'a terminal task shows no log view').toBe(true)
    // xterm draws only while it is on screen.
    await page.locator('#terminal').scrollIntoViewIfNeeded()
    await page.waitForSelector('#terminal .xterm-rows:has-text("terminal-ready")', { timeout: 10_000 })
    // Fitted to the page: a size other than the 80x24 it started with, sent as a resize.
    const resized = await waitFor('the terminal resized to the page', async () => {
      const tty = (await daemon.client.get(id)).tty
      return tty && (tty.cols !== 80 || tty.rows !== 24) ? tty : undefined
    })
    const shown = await page.$eval('#terminal', (node) => node.dataset.size)
    expect(shown).toBe(`${resized.cols}x${resized.rows}`)
    await page.click('#terminal .xterm')
    await page.keyboard.type('typed here')
    await page.keyboard.press('Enter')
    await page.waitForSelector('#terminal .xterm-rows:has-text("got:typed here")', { timeout: 10_000 })
    await page.waitForSelector(`#terminal .xterm-rows:has-text("${resized.rows} ${resized.cols}")`, { timeout: 10_000 })
    // Drawn in the log view's colours, whatever the theme: its background is the log view's.
    const termBg = await page.$eval('#output', (output) => (globalThis as unknown as Computed).getComputedStyle(output).backgroundColor)
    const drawnBg = await page.$eval(
      '#terminal .xterm-scrollable-element',
      (screen) => (globalThis as unknown as Computed).getComputedStyle(screen).backgroundColor,
    )
    expect(drawnBg).toBe(termBg)
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-terminal.png') })
    // A narrower page: a narrower terminal.
    await page.setViewportSize({ width: 1200, height: 900 })
    await waitFor('the terminal resized again', async () => {
      const tty = (await daemon.client.get(id)).tty
      return tty && tty.cols < resized.cols ? tty : undefined
    })
    await daemon.client.kill(id, { signal: 'KILL' })
  })

  test('output written before the page looked gets no answer from the terminal: only keys typed there are sent', async () => {
    // \e[6n asks the terminal where its cursor is; \e[c, what kind of terminal it is.
    const id = await cliRun('--tty', '--', 'sh', '-c', 'printf "asking\\033[6n\\033[c\\n"; sleep 1000')
    await waitFor('the question written', async () => ((await daemon.client.get(id)).outputBytes > 0 ? true : undefined))
    await openPage()
    await openTaskView(id)
    await page.locator('#terminal').scrollIntoViewIfNeeded()
    await page.waitForSelector('#terminal .xterm-rows:has-text("asking")', { timeout: 10_000 })
    await page.click('#terminal .xterm')
    await page.keyboard.type('k')
    const input = join((await daemon.client.get(id)).spool, 'input.log')
    const sent = await waitFor('the key sent', async () => (existsSync(input) && statSync(input).size > 0 ? readFileSync(input, 'utf8') : undefined))
    expect(sent).toBe('k')
    expect(await page.isHidden('#output-search'), "the search is the log view's").toBe(true)
    await daemon.client.kill(id, { signal: 'KILL' })
  })

  test('a task without a terminal keeps the log view', async () => {
    const id = await cliRun('--', 'sh', '-c', 'echo plain-log; sleep 1000')
    await openPage()
    await openTaskView(id)
    await page.waitForSelector('#output:has-text("plain-log")', { timeout: 10_000 })
    expect(await page.isHidden('#terminal')).toBe(true)
    expect(await page.isHidden('#input-box'), 'a task without --stdin takes no input').toBe(true)
    await daemon.client.kill(id, { signal: 'KILL' })
  })
})

describe('run again', () => {
  test('on an exited task: after a confirmation that shows what will run, a second task with the same command and cwd', async () => {
    const id = await cliRun('--cwd', workDir, '--name', 'rerun me', '--env', 'SECRET_KEY=x', '--', 'sh', '-c', 'echo ran in $(pwd)')
    await daemon.client.wait(id, { timeoutMs: 10_000 })
    await openPage()
    await openTaskView(id, 'exited')
    expect(await page.isDisabled('#run-again-button')).toBe(false)
    await page.click('#run-again-button')
    await page.waitForSelector('#confirm[open]')
    const text = (await page.textContent('#confirm-text')) ?? ''
    expect(text).toContain('echo ran in $(pwd)')
    expect(text).toContain(workDir)
    expect(text).toContain('SECRET_KEY')
    await page.screenshot({ path: join(SCREENSHOT_DIR, 'console-run-again.png') })
    await page.click('#confirm-ok')
    const again = await waitFor('a second task', async () => (await daemon.client.list({ all: true })).find((task) => task.id !== id && task.cwd === workDir))
    expect(again.command).toEqual(['sh', '-c', 'echo ran in $(pwd)'])
    expect(again.cwd).toBe(workDir)
    expect(again.name).toBe('rerun me (again)')
    await page.waitForSelector(row(again.id), { timeout: 10_000 })
    // The page opens the new task.
    await page.waitForURL(`**/#/tasks/${again.id}`)
  })

  test('is disabled while a task runs', async () => {
    const id = await cliRun('--', 'sleep', '1000')
    await openPage()
    await openTaskView(id)
    expect(await page.isDisabled('#run-again-button')).toBe(true)
    await daemon.client.kill(id, { signal: 'KILL' })
  })
})

describe('a read-only session', () => {
  test('sees the input box, run again, kill and gc disabled, with the reason', async () => {
    const running = await cliRun('--stdin', '--', 'cat')
    const finished = await cliRun('--', 'true')
    await daemon.client.wait(finished, { timeoutMs: 10_000 })
    await openPage(`${info.origin}/?token=${readToken}`)
    await openTaskView(running)
    await page.waitForSelector('#input-box:not([hidden])')
    expect(await page.isDisabled('#input-line')).toBe(true)
    expect(await page.isDisabled('#input-send')).toBe(true)
    expect(await page.isDisabled('#input-ctrl-d')).toBe(true)
    expect(await page.textContent('#input-note')).toMatch(/read-only/)
    expect(await page.isDisabled('#kill-button'), 'nor may it kill').toBe(true)
    expect(await page.getAttribute('#kill-button', 'title')).toMatch(/read-only/)
    expect(await page.isDisabled('#gc-button'), 'nor remove finished tasks').toBe(true)
    expect(await page.getAttribute('#gc-button', 'title')).toMatch(/read-only/)
    await page.click('#close-task')
    await openTaskView(finished, 'exited')
    expect(await page.isDisabled('#run-again-button')).toBe(true)
    expect(await page.getAttribute('#run-again-button', 'title')).toMatch(/read-only/)
    await daemon.client.kill(running, { signal: 'KILL' })
  })
})
