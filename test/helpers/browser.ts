import { execFileSync } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { REPO_ROOT } from './test-daemon.js'

/** Where browser tests save their screenshots (ignored by git): .tend-test-screenshots/ in the checkout. */
export const SCREENSHOT_DIR = join(REPO_ROOT, '.tend-test-screenshots')

/** Debian's chromium, which .ci/run installs; a test that needs it fails, loudly, without it. */
function chromiumPath(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim().split('\n')[0]!
  } catch {
    throw new Error('chromium is not installed: the console browser tests need it (apt-get install chromium; .ci/run installs it)')
  }
}

/** Headless Chromium through playwright-core. Root has no user namespace sandbox for it: --no-sandbox. */
export async function launchBrowser(): Promise<Browser> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true })
  return chromium.launch({ executablePath: chromiumPath(), args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] })
}
