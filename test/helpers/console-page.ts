import { expect } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'

/**
 * The console page in a fresh browser context, opened with its token's URL: answers once it says
 * it is live. Script errors, CSP refusals and failed loads are pushed to `errors` as they come,
 * for the test to check empty after each case.
 */
export async function openConsolePage(
  browser: Browser,
  url: string,
  errors: string[],
  width = 1400,
  colorScheme: 'light' | 'dark' = 'light',
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width, height: 900 }, colorScheme })
  const page = await context.newPage()
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`)
  })
  const answer = await page.goto(url)
  expect(answer?.status()).toBe(200)
  await page.waitForSelector('#connection:has-text("live")', { timeout: 10_000 })
  return { context, page }
}
