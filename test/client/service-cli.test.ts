import { afterEach, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { isAlive } from '../helpers/processes.js'
import { execa } from 'execa'
import { checkUnprivilegedUser, createTempHome, daemonEnv, REPO_ROOT, setprivArgs, startTestDaemon, TEND_BIN } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

// `tend service` against a stand-in systemctl that records its calls, a temp unit folder and a temp
// "running systemd" marker (--unit-dir, --systemd-runtime-dir): the machine's own systemd is never
// touched. test/client/service-unit-verify.test.ts checks the unit itself with systemd-analyze.

const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function tempFolder(prefix: string): string {
  const folder = mkdtempSync(join(tmpdir(), `tend-test-service-${prefix}-`))
  folders.push(folder)
  return folder
}

interface FakeSystemd {
  env: Record<string, string>
  /** Flags that point tend service at the fake's folders. */
  flags: string[]
  unitDir: string
  /** Each systemctl call's arguments, in order. */
  calls: () => string[]
}

/** A systemctl that records its arguments (and fails, printing `failWith`, when given). */
function fakeSystemd(options: { failWith?: string } = {}): FakeSystemd {
  const root = tempFolder('systemd')
  const bin = join(root, 'bin')
  const runtimeDir = join(root, 'run-systemd-system')
  const unitDir = join(root, 'units')
  const log = join(root, 'calls.log')
  mkdirSync(bin)
  mkdirSync(runtimeDir)
  const fail = options.failWith ? `echo '${options.failWith}' >&2; exit 1\n` : ''
  writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${log}'\n${fail}`)
  chmodSync(join(bin, 'systemctl'), 0o755)
  const home = createTempHome()
  folders.push(home)
  return {
    env: daemonEnv(home, { PATH: `${bin}:${process.env.PATH}` }),
    flags: ['--unit-dir', unitDir, '--systemd-runtime-dir', runtimeDir],
    unitDir,
    calls: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []),
  }
}

describe('tend service install --print', () => {
  test('prints the unit for this copy of tend and its home, writing and calling nothing, on a machine without systemd', async () => {
    const home = createTempHome()
    folders.push(home)
    const env = daemonEnv(home, { PATH: '/nonexistent' })
    const printed = await runCli(['service', 'install', '--print', '--user'], env)
    expect(printed.stderr).toBe('')
    expect(printed.exitCode).toBe(0)
    expect(printed.stdout).toContain(`ExecStart=${process.execPath} ${TEND_BIN} daemon\n`)
    expect(printed.stdout).toContain(`Environment="TEND_HOME=${home}"\n`)
    // No folder of that PATH is there: the unit gets the system's.
    expect(printed.stdout).toContain('Environment="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n')
    expect(printed.stdout).toContain(`Documentation=file://${join(REPO_ROOT, 'docs', 'service.md')}\n`)
    expect(printed.stdout).toMatch(/^Type=notify$/m)
    expect(printed.stdout).toMatch(/^WantedBy=default\.target$/m)
  })

  test('--system prints a system unit that runs the daemon as the installing user; with --json, the unit and where it would go', async () => {
    const home = createTempHome()
    folders.push(home)
    const printed = await runCli(['service', 'install', '--print', '--system', '--json'], daemonEnv(home))
    expect(printed.exitCode).toBe(0)
    const answer = JSON.parse(printed.stdout) as { scope: string; unitPath: string; unit: string }
    expect(answer.scope).toBe('system')
    expect(answer.unitPath).toBe('/etc/systemd/system/tend.service')
    const { username } = await import('node:os').then((os) => os.userInfo())
    expect(answer.unit).toMatch(new RegExp(`^User=${username}$`, 'm'))
    expect(answer.unit).toMatch(/^WantedBy=multi-user\.target$/m)
  })

  test('without --user or --system it is a system unit as root and a user unit otherwise', async () => {
    const home = createTempHome()
    folders.push(home)
    const printed = await runCli(['service', 'install', '--print', '--json'], daemonEnv(home, { XDG_CONFIG_HOME: '/config' }))
    const answer = JSON.parse(printed.stdout) as { scope: string; unitPath: string }
    if (process.getuid!() === 0) expect(answer).toMatchObject({ scope: 'system', unitPath: '/etc/systemd/system/tend.service' })
    else expect(answer).toMatchObject({ scope: 'user', unitPath: '/config/systemd/user/tend.service' })
  })

  test('a user unit goes to $XDG_CONFIG_HOME/systemd/user', async () => {
    const home = createTempHome()
    folders.push(home)
    const printed = await runCli(['service', 'install', '--print', '--user', '--json'], daemonEnv(home, { XDG_CONFIG_HOME: '/config' }))
    expect(JSON.parse(printed.stdout)).toMatchObject({ scope: 'user', unitPath: '/config/systemd/user/tend.service' })
  })
})

/**
 * The npm case: a project under a sticky shared folder, node_modules/.bin above it the test
 * user's, holding `name` that would leave a mark. Returns that folder and the mark's folder.
 */
function plantedFolder(names: string[]): { planted: string; marks: string } {
  const other = checkUnprivilegedUser()
  const root = tempFolder('planted')
  chmodSync(root, 0o1777)
  const planted = join(root, 'node_modules', '.bin')
  const marks = join(root, 'ran')
  mkdirSync(planted, { recursive: true })
  mkdirSync(marks)
  for (const name of names) {
    writeFileSync(join(planted, name), `#!/bin/sh\n: > ${marks}/${name}\n`)
    chmodSync(join(planted, name), 0o755)
  }
  chownSync(join(root, 'node_modules'), other.uid, other.gid)
  chownSync(planted, other.uid, other.gid)
  return { planted, marks }
}

describe("the unit's PATH, and the systemctl that is run", () => {
  test('a --system unit gets the fixed system PATH, whatever the installer had', async () => {
    const { planted } = plantedFolder([])
    const home = tempFolder('home')
    const printed = await runCli(['service', 'install', '--print', '--system'], daemonEnv(home, { PATH: `${planted}:relative:/usr/bin:/bin` }))
    expect(printed.exitCode).toBe(0)
    expect(printed.stdout).toContain('Environment="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n')
    expect(printed.stdout).not.toContain(planted)
  })

  test("a --user unit gets the installer's PATH, but the folders only root or the installer can change", async () => {
    const { planted } = plantedFolder([])
    const home = tempFolder('home')
    const own = join(tempFolder('own'), 'bin')
    mkdirSync(own)
    const env = daemonEnv(home, { PATH: `${planted}:relative:${own}::/usr/bin` })
    const printed = await runCli(['service', 'install', '--print', '--user'], env)
    expect(printed.exitCode).toBe(0)
    expect(printed.stdout).toContain(`Environment="PATH=${own}:/usr/bin"\n`)
  })

  test('systemctl is never run from a folder another user can write', async () => {
    const systemd = fakeSystemd()
    const { planted, marks } = plantedFolder(['systemctl'])
    const env = { ...systemd.env, PATH: `${planted}:${systemd.env.PATH}` }
    const installed = await runCli(['service', 'install', '--user', ...systemd.flags], env)
    expect(installed.exitCode).toBe(0)
    expect(readdirSync(marks)).toEqual([])
    expect(systemd.calls()).toEqual(['--user daemon-reload', '--user enable --now tend.service'])
  })
})

describe('tend service install and uninstall', () => {
  test('install writes the unit it prints (0644), reloads systemd, then enables and starts it', async () => {
    const systemd = fakeSystemd()
    const printed = await runCli(['service', 'install', '--print', '--user'], systemd.env)
    const installed = await runCli(['service', 'install', '--user', ...systemd.flags], systemd.env)
    expect(installed.stderr).toBe('')
    expect(installed.exitCode).toBe(0)
    const unitPath = join(systemd.unitDir, 'tend.service')
    expect(installed.stdout).toContain(`wrote ${unitPath}; enabled and started it (systemctl --user status tend)`)
    expect(readFileSync(unitPath, 'utf8')).toBe(printed.stdout)
    expect(statSync(unitPath).mode & 0o777).toBe(0o644)
    expect(systemd.calls()).toEqual(['--user daemon-reload', '--user enable --now tend.service'])
  })

  test('a system install calls systemctl without --user, and --json says what it did', async () => {
    const systemd = fakeSystemd()
    const installed = await runCli(['service', 'install', '--system', '--json', ...systemd.flags], systemd.env)
    expect(installed.exitCode).toBe(0)
    expect(JSON.parse(installed.stdout)).toEqual({ scope: 'system', unitPath: join(systemd.unitDir, 'tend.service'), enabled: true, replacedPid: null })
    expect(systemd.calls()).toEqual(['daemon-reload', 'enable --now tend.service'])
  })

  test('uninstall stops and disables the unit, removes it, and reloads systemd; a second uninstall finds nothing to do', async () => {
    const systemd = fakeSystemd()
    await runCli(['service', 'install', '--user', ...systemd.flags], systemd.env)
    const removed = await runCli(['service', 'uninstall', '--user', ...systemd.flags], systemd.env)
    expect(removed.exitCode).toBe(0)
    expect(removed.stdout).toContain(`removed ${join(systemd.unitDir, 'tend.service')}`)
    expect(existsSync(join(systemd.unitDir, 'tend.service'))).toBe(false)
    expect(systemd.calls().slice(2)).toEqual(['--user disable --now tend.service', '--user daemon-reload'])
    const again = await runCli(['service', 'uninstall', '--user', '--json', ...systemd.flags], systemd.env)
    expect(again.exitCode).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ removed: false })
    expect(systemd.calls()).toHaveLength(4)
  })

  test("a daemon already serving the home stops, leaving its running tasks to the service's daemon", async () => {
    const systemd = fakeSystemd()
    const home = systemd.env.TEND_HOME!
    const daemon = await startTestDaemon({ home })
    const task = await daemon.client.start({ command: ['sleep', '300'] })
    const running = await waitFor('the task to run', async () => {
      const seen = await daemon.client.get(task.id)
      return seen.state === 'running' && seen.pid ? seen.pid : null
    })
    const installed = await runCli(['service', 'install', '--user', '--json', ...systemd.flags], systemd.env)
    expect(installed.exitCode, installed.stderr).toBe(0)
    expect(JSON.parse(installed.stdout)).toMatchObject({ replacedPid: daemon.process.pid })
    await waitFor('the daemon to exit', () => daemon.process.exitCode !== null)
    expect(isAlive(running)).toBe(true)
    // The next daemon (here, the test's) supervises the task again; its stop ends it.
    const next = await startTestDaemon({ home })
    expect((await next.client.get(task.id)).state).toBe('running')
    await next.stop()
    await daemon.stop()
  })

  test('a unit folder it may not write is exit 1, naming the folder and what to do', async () => {
    const systemd = fakeSystemd()
    const unitDir = join(systemd.unitDir, '..', 'root-only', 'units')
    mkdirSync(unitDir, { recursive: true, mode: 0o755 })
    // Root may write any folder: the folder is root's, and the CLI runs as the unprivileged test user.
    const user = checkUnprivilegedUser()
    chmodSync(join(systemd.unitDir, '..'), 0o755)
    const run = await execa(
      'setpriv',
      [...setprivArgs(user), '--', process.execPath, TEND_BIN, 'service', 'install', '--system', '--unit-dir', unitDir, ...systemd.flags.slice(2)],
      {
        env: systemd.env,
        extendEnv: false,
        reject: false,
        stdin: 'ignore',
      },
    )
    expect(run.exitCode, String(run.stderr)).toBe(1)
    expect(run.stderr).toContain(`the service could not be installed: ${join(unitDir, 'tend.service')} could not be written`)
    expect(run.stderr).toContain("a --system unit is root's: `sudo tend service install --system`, or --user for your own")
    expect(systemd.calls()).toEqual([])
  })

  test('a systemctl that fails is exit 1, quoting what it printed', async () => {
    const systemd = fakeSystemd({ failWith: 'Failed to connect to bus: No medium found' })
    const installed = await runCli(['service', 'install', '--user', ...systemd.flags], systemd.env)
    expect(installed.exitCode).toBe(1)
    expect(installed.stderr).toContain(
      'the service could not be installed: systemctl --user daemon-reload exited with 1: Failed to connect to bus: No medium found',
    )
  })
})

describe('a machine without systemd', () => {
  test('without systemctl on PATH, install and uninstall exit 3 naming it, and --json gives the code', async () => {
    const systemd = fakeSystemd()
    const env = { ...systemd.env, PATH: '/nonexistent' }
    for (const verb of ['install', 'uninstall']) {
      const refused = await runCli(['service', verb, '--user', ...systemd.flags], env)
      expect(refused.exitCode).toBe(3)
      expect(refused.stderr).toContain('no systemd to install the service with: systemctl was not found on PATH (/nonexistent)')
      expect(refused.stderr).toContain('tend service install --print')
    }
    const json = await runCli(['service', 'install', '--json', ...systemd.flags], env)
    expect(JSON.parse(json.stdout).error.code).toBe('TEND_ERR_SERVICE_UNAVAILABLE')
    expect(existsSync(systemd.unitDir)).toBe(false)
    expect(systemd.calls()).toEqual([])
  })

  test('with systemctl but systemd not the init, install exits 3 naming the missing folder, and writes nothing', async () => {
    const systemd = fakeSystemd()
    const missing = join(tempFolder('no-systemd'), 'system')
    const flags = ['--unit-dir', systemd.unitDir, '--systemd-runtime-dir', missing]
    const refused = await runCli(['service', 'install', '--user', ...flags], systemd.env)
    expect(refused.exitCode).toBe(3)
    expect(refused.stderr).toContain(`systemd is not this machine's init (${missing} is missing)`)
    expect(existsSync(systemd.unitDir)).toBe(false)
    expect(systemd.calls()).toEqual([])
  })
})

test('--user with --system, and --print with uninstall, are usage errors', async () => {
  const home = createTempHome()
  folders.push(home)
  const both = await runCli(['service', 'install', '--print', '--user', '--system'], daemonEnv(home))
  expect(both.exitCode).toBe(2)
  expect(both.stderr).toContain('choose one of --user and --system')
  const print = await runCli(['service', 'uninstall', '--print'], daemonEnv(home))
  expect(print.exitCode).toBe(2)
  expect(print.stderr).toContain('--print goes with install only')
  const unknown = await runCli(['service', 'enable'], daemonEnv(home))
  expect(unknown.exitCode).toBe(2)
})
