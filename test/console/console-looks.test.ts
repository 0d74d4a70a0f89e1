import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { copyFileSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { ConsoleInfo } from '../../client/index.js'
import { launchBrowser, SCREENSHOT_DIR } from '../helpers/browser.js'
import { openConsole } from '../helpers/console.js'
import { openConsolePage } from '../helpers/console-page.js'
import { isAlive } from '../helpers/processes.js'
import { createTempHome, REPO_ROOT, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * How the console looks to an operator who keeps it open: failures that look like failures (a
 * pill each, a filter, a count in the header), when a finished task ended and how long it ran,
 * columns that show whole and resize, terminal colours that read on both themes (measured), a
 * spool chart drawn from the first answer, and the screenshot for docs/console.md.
 */

let daemon: TestDaemon
let browser: Browser
let info: ConsoleInfo
let context: BrowserContext
let page: Page
const pageErrors: string[] = []
const ids: Record<string, string> = {}

/** A task lost the real way: its daemon and keeper killed while it ran; the next daemon records it lost. */
async function startWithLostTask(): Promise<TestDaemon> {
  const home = createTempHome()
  const first = await startTestDaemon({ home })
  const running = await first.client.start({ command: ['sleep', '1000'], name: 'lost with its keeper' })
  const keeper = await waitFor('the running record, with its keeper, on disk', () => {
    const record = JSON.parse(readFileSync(join(home, 'spool', running.id, 'task.json'), 'utf8')) as { state: string; keeper?: { pid: number } }
    return record.state === 'running' ? record.keeper : undefined
  })
  first.client.close()
  await first.crash()
  process.kill(keeper.pid, 'SIGKILL')
  await waitFor('the keeper to be gone', () => !isAlive(keeper.pid))
  ids.lost = running.id
  return startTestDaemon({ home })
}

beforeAll(async () => {
  daemon = await startWithLostTask()
  const client = daemon.client
  const finished = async (name: string, request: Parameters<typeof client.start>[0]) => {
    const task = await client.start({ name, ...request })
    ids[name] = task.id
    return task
  }
  await finished('ok', { command: 'echo fine; sleep 0.3', shell: true })
  await finished('exit 3', { command: 'echo broken >&2; exit 3', shell: true })
  await finished('killed', { command: ['sleep', '1000'] })
  await finished('timed out', { command: ['sleep', '1000'], timeoutMs: 500 })
  await finished('failed', { command: ['echo', 'never'], after: [ids['exit 3']!] })
  await finished('colours', {
    command:
      'for c in 30 31 32 33 34 35 36 37 90 91 92 93 94 95 96 97; do printf "\\033[%smcolour-%s\\033[0m\\n" $c $c; done; printf "\\033[7mREVERSED\\033[27m plain \\033[1;34mbold blue\\033[0m\\n"',
    shell: true,
  })
  await finished('web', { command: 'exec python3 -m http.server "$PORT" --bind 127.0.0.1', shell: true, port: 'auto', sandbox: 'off' })
  await finished('running', { command: ['sleep', '1000'] })
  await client.kill(ids.killed!, { signal: 'KILL' })
  for (const name of ['ok', 'exit 3', 'killed', 'timed out', 'failed', 'colours']) await client.wait(ids[name]!)
  await waitFor('the web task to listen', async () => ((await client.get(ids.web!)).ports ?? []).length > 0)
  info = await openConsole(daemon.env)
  browser = await launchBrowser()
})
afterAll(async () => {
  await browser?.close()
  await daemon?.stop()
})

afterEach(async () => {
  await context?.close()
  expect(pageErrors.splice(0), 'errors in the page (scripts, CSP)').toEqual([])
})

async function openPage(width = 1600, colorScheme: 'light' | 'dark' = 'light'): Promise<Page> {
  ;({ context, page } = await openConsolePage(browser, info.url!, pageErrors, width, colorScheme))
  await page.waitForSelector(`#tasks tbody tr[data-task-id="${ids.lost}"][data-state="lost"]`)
  return page
}

/** What the callbacks run in the page use of it: the tests compile without the DOM's types. */
interface PageElement {
  textContent: string | null
  className: string
  classList: { contains: (name: string) => boolean }
  dataset: Record<string, string>
  width: number
  height: number
  querySelector: (selector: string) => PageElement | null
  querySelectorAll: (selector: string) => Iterable<PageElement>
  getContext: (kind: '2d') => { getImageData: (x: number, y: number, width: number, height: number) => { data: Uint8ClampedArray } }
}
interface PageWindow {
  document: PageElement
  getComputedStyle: (element: PageElement) => { color: string; backgroundColor: string }
}

/** WCAG 2's contrast ratio of two computed colours, `rgb(r, g, b)` as the browser gives them. */
function contrastRatio(first: string, second: string): number {
  const luminance = (colour: string) => {
    const [r, g, b] = (colour.match(/[\d.]+/g) ?? []).slice(0, 3).map((c) => {
      const v = Number(c) / 255
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4
    })
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!
  }
  const [high, low] = [luminance(first), luminance(second)].sort((x, y) => y - x)
  return (high! + 0.05) / (low! + 0.05)
}

const row = (id: string) => `#tasks tbody tr[data-task-id="${id}"]`
const cell = (name: string, column: string) => `${row(ids[name]!)} td[data-col="${column}"]`
const FAILURES = ['exit 3', 'killed', 'timed out', 'failed', 'lost']

describe('how the console looks', () => {
  test('a non-zero exit, a kill, a timeout, a failed start and a lost task each have a pill and colour of their own; exit 0 stays calm', async () => {
    await openPage()
    const pill = async (name: string) =>
      page.$eval(`${cell(name, 'state')} .badge`, (badge) => ({
        text: badge.textContent,
        failure: badge.classList.contains('failure'),
        colour: (globalThis as unknown as PageWindow).getComputedStyle(badge as unknown as PageElement).backgroundColor,
        textColour: (globalThis as unknown as PageWindow).getComputedStyle(badge as unknown as PageElement).color,
      }))
    const calm = await pill('ok')
    expect(calm).toMatchObject({ text: 'exited', failure: false })
    const failures = await Promise.all(FAILURES.map(pill))
    expect(failures.map((look) => look.text)).toEqual(['exited 3', 'killed', 'timed_out', 'failed', 'lost'])
    expect(failures.every((look) => look.failure)).toBe(true)
    const colours = [calm.colour, ...failures.map((look) => look.colour)]
    expect(new Set(colours).size, colours.join(', ')).toBe(colours.length)
    const hard = [calm, ...failures].filter((look) => contrastRatio(look.textColour, look.colour) < 4.5).map((look) => `${look.text}: ${look.colour}`)
    expect(hard, 'pills whose text has less than 4.5:1').toEqual([])
    // Why it stopped is marked on a failure's row only.
    expect(await page.$eval(row(ids['exit 3']!), (tr) => tr.classList.contains('failure'))).toBe(true)
    expect(await page.$eval(row(ids.ok!), (tr) => tr.classList.contains('failure'))).toBe(false)
    // The task's view shows the same pill, and its run time to the tenth.
    await page.click(cell('exit 3', 'command'))
    await page.waitForSelector('#task-view:not([hidden]) [data-field="state"].state-exited-nonzero.failure:has-text("exited 3")')
    expect(await page.textContent('#task-view [data-field="runtime"]')).toMatch(/^\d+\.\d s$/)
  })

  test('the header counts the failures, live; the "failed" filter shows exactly them', async () => {
    await openPage()
    await page.waitForSelector('#failure-count:has-text("5 failed")')
    const another = await daemon.client.start({ command: 'exit 1', shell: true, name: 'fails later' })
    await page.waitForSelector('#failure-count:has-text("6 failed")', { timeout: 10_000 })
    await page.click('#failure-count')
    expect(await page.inputValue('#filter-state')).toBe('failures')
    const shown = await page.$$eval('#tasks tbody tr:not([hidden])', (rows) => rows.map((tr) => (tr as unknown as PageElement).dataset.taskId))
    expect(shown.sort()).toEqual([...FAILURES.map((name) => ids[name]), another.id].sort())
    await daemon.client.remove(another.id)
    await page.waitForSelector('#failure-count:has-text("5 failed")')
  })

  test('a finished task shows when it ended and how long it ran; a running one for how long it runs', async () => {
    await openPage()
    expect(await page.textContent(`${cell('ok', 'age')} .age-when`)).toMatch(/^ended (just now|\d+ s ago|\d+ min ago)$/)
    expect(await page.textContent(`${cell('ok', 'age')} .age-ran`)).toMatch(/^ran 0\.[3-9] s$/)
    expect(await page.getAttribute(cell('ok', 'age'), 'title')).toMatch(/\nended \S.*\nran 0\.[3-9] s$/)
    expect(await page.textContent(`${cell('running', 'age')} .age-when`)).toMatch(/^running \d+ s$|^running \d+ min$/)
    expect(await page.textContent(`${cell('running', 'age')} .age-ran`)).toBe('')
  })

  test('owner and sandbox show whole on hover; columns resize by dragging the header edge or by keys, and keep their width on reload', async () => {
    await openPage()
    expect(await page.getAttribute(cell('web', 'owner'), 'title')).toBe(await page.textContent(cell('web', 'owner')))
    expect(await page.getAttribute(cell('running', 'sandbox'), 'title')).toBe(await page.textContent(cell('running', 'sandbox')))
    const width = (selector: string) => page.$eval(selector, (element) => element.getBoundingClientRect().width)
    const before = await width('#tasks th.col-owner')
    const edge = (await page.$('#tasks th.col-owner .col-resize'))!
    const box = (await edge.boundingBox())!
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    await page.mouse.down()
    await page.mouse.move(box.x + box.width / 2 + 40, box.y + box.height / 2, { steps: 4 })
    await page.mouse.move(box.x + box.width / 2 + 80, box.y + box.height / 2, { steps: 4 })
    await page.mouse.up()
    expect(Math.round(await width('#tasks th.col-owner'))).toBe(Math.round(before + 80))
    expect(Math.round(await width(cell('web', 'owner')))).toBe(Math.round(before + 80))
    await edge.focus()
    await page.keyboard.press('ArrowRight')
    expect(Math.round(await width('#tasks th.col-owner'))).toBe(Math.round(before + 96))
    await page.reload()
    await page.waitForSelector(row(ids.web!))
    expect(Math.round(await width(cell('web', 'owner')))).toBe(Math.round(before + 96))
  })

  for (const theme of ['light', 'dark'] as const) {
    test(`every one of the 16 terminal colours has a contrast of at least 4.5:1 on the output (${theme} theme); reverse video shows`, async () => {
      await openPage(1600, theme)
      await page.click(cell('colours', 'command'))
      await page.waitForSelector('#output span:has-text("REVERSED")')
      const measured = await page.evaluate(() => {
        const { document, getComputedStyle } = globalThis as unknown as PageWindow
        const output = document.querySelector('#output')!
        const background = getComputedStyle(output).backgroundColor
        const colours = [...output.querySelectorAll('span[class*="-fg"]')]
          .filter((span) => /^colour-\d+$/.test(span.textContent ?? ''))
          .map((span) => ({ name: `${span.className} (${span.textContent})`, colour: getComputedStyle(span).color }))
        const reversed = [...output.querySelectorAll('span')].find((span) => span.textContent === 'REVERSED')!
        return {
          background,
          text: getComputedStyle(output).color,
          colours,
          reversed: { colour: getComputedStyle(reversed).color, background: getComputedStyle(reversed).backgroundColor },
        }
      })
      expect(measured.colours).toHaveLength(16)
      const low = measured.colours
        .map((colour) => ({ ...colour, ratio: contrastRatio(colour.colour, measured.background) }))
        .filter((colour) => colour.ratio < 4.5)
        .map((colour) => `${colour.name} ${colour.colour}: ${colour.ratio.toFixed(2)}`)
      expect(low, `colours below 4.5:1 on ${measured.background}`).toEqual([])
      expect(measured.reversed).toEqual({ colour: measured.background, background: measured.text })
      await page.screenshot({ path: join(SCREENSHOT_DIR, `console-colours-${theme}.png`) })
    })
  }

  test('the spool chart draws the first status answer at once, across its box', async () => {
    await openPage()
    await page.waitForSelector('#spool-use:has-text("of")')
    const drawn = await page.$eval('#spool-chart canvas', (element) => {
      const canvas = element as unknown as PageElement
      const { width, height } = canvas
      const pixels = canvas.getContext('2d').getImageData(0, 0, width, height).data
      let columns = 0
      for (let x = 0; x < width; x++) {
        for (let y = 0; y < height; y++) {
          if (pixels[(y * width + x) * 4 + 3]! > 0) {
            columns++
            break
          }
        }
      }
      return columns / width
    })
    expect(drawn).toBeGreaterThan(0.9)
  })

  test('a rich table for docs/console.md: failures, a running task, a port (TEND_DOCS_SCREENSHOT=1 writes docs/console.png)', async () => {
    await openPage(1600)
    await page.waitForSelector(`${cell('web', 'ports')} a`)
    // The running tasks' first live figures, so that the picture has them.
    await expect.poll(() => page.textContent(cell('web', 'mem')), { timeout: 10_000 }).toMatch(/iB$/)
    const shot = join(SCREENSHOT_DIR, 'console-table.png')
    const table = (await page.$eval('#tasks', (element) => element.getBoundingClientRect().bottom))!
    await page.screenshot({ path: shot, clip: { x: 0, y: 0, width: 1600, height: Math.ceil(table) + 16 } })
    if (process.env.TEND_DOCS_SCREENSHOT === '1') copyFileSync(shot, join(REPO_ROOT, 'docs', 'console.png'))
  })
})
