import { afterAll, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { createTempHome, daemonEnv } from '../helpers/test-daemon.js'

// systemd's own check of the unit `tend service install` writes: every key known, every value
// parsed, ExecStart's program there. It needs systemd-analyze (the systemd package; .ci/run
// installs it): without it this fails, never skips. Nothing here needs a running systemd.

const scratch = mkdtempSync(join(tmpdir(), 'tend-test-unit-verify-'))
const home = createTempHome()
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true })
  rmSync(home, { recursive: true, force: true })
})

/** systemd-analyze [--user] verify on `unit` saved as tend.service: its status and everything it printed. */
function verify(unit: string, scope: 'user' | 'system'): { status: number | null; printed: string } {
  const folder = mkdtempSync(join(scratch, `${scope}-`))
  const path = join(folder, 'tend.service')
  writeFileSync(path, unit)
  // A user manager's check needs a runtime folder of its own, as a login session has.
  const runtime = join(folder, 'runtime')
  mkdirSync(runtime, { mode: 0o700 })
  const run = spawnSync('systemd-analyze', [...(scope === 'user' ? ['--user'] : []), 'verify', path], {
    encoding: 'utf8',
    env: { ...process.env, XDG_RUNTIME_DIR: runtime, SYSTEMD_LOG_COLOR: '0' },
  })
  if (run.error)
    throw new Error(`systemd-analyze could not run (${run.error.message}): install the systemd package (npm test does first: bin/system-setup.sh --tests)`)
  return { status: run.status, printed: `${run.stdout}${run.stderr}`.trim() }
}

async function printedUnit(scope: 'user' | 'system'): Promise<string> {
  const printed = await runCli(['service', 'install', '--print', `--${scope}`], daemonEnv(home))
  expect(printed.exitCode, printed.stderr).toBe(0)
  return printed.stdout
}

test.each(['user', 'system'] as const)('systemd-analyze verify passes the %s unit, saying nothing', async (scope) => {
  expect(verify(await printedUnit(scope), scope)).toEqual({ status: 0, printed: '' })
})

test('the check is not empty: an unknown key or a bad value in the unit is reported', async () => {
  const unit = await printedUnit('system')
  const unknown = verify(unit.replace('KillMode=process\n', 'KillMode=process\nKillMod=process\n'), 'system')
  expect(unknown.printed).toContain("Unknown key 'KillMod'")
  const bad = verify(unit.replace('Restart=on-failure', 'Restart=sometimes'), 'system')
  expect(bad.printed).toMatch(/restart specifier.*sometimes/)
})
