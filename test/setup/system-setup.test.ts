import { afterEach, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * bin/system-setup.sh run with a PATH built for each case: the few real tools it uses, a stand-in
 * (an empty program) for each command it checks that the case says is there, and fake apt-get,
 * dnf, sudo and id that record their arguments and succeed or fail as the case needs. A fake
 * package manager "installs" a package by making the commands that package brings.
 */

const SCRIPT = join(REPO_ROOT, 'bin', 'system-setup.sh')
const BASH = '/bin/bash'
/** What the script itself runs, taken from the machine. */
const REAL_TOOLS = ['env', 'mktemp', 'cat', 'rm', 'true']
/** Every command the script checks, for the cases where all is there. */
const EVERY_COMMAND = ['bwrap', 'cc', 'setpriv', 'useradd', 'chromium', 'openssl', 'redis-server', 'make', 'git', 'strace', 'curl', 'ip', 'python3']
/** The commands each package brings, under its Debian and its Fedora name. */
const PACKAGE_COMMANDS: Record<string, string[]> = {
  bubblewrap: ['bwrap'],
  gcc: ['cc'],
  'redis-server': ['redis-server'],
  redis: ['redis-server'],
  chromium: ['chromium'],
}

interface Machine {
  /** Commands present (stand-ins). */
  present: string[]
  /** The user's uid as the fake `id -u` answers it. */
  uid?: number
  manager?: 'apt-get' | 'dnf' | 'none'
  /** `working`: `sudo -n` runs the command; `password`: it asks for one (and so fails); absent: no sudo. */
  sudo?: 'working' | 'password'
  /** The package manager fails every install, printing why. */
  installFails?: boolean
  /** Where the script is run from: the repository (its C built), or a copy in a bare folder. */
  scriptAt?: 'repository' | 'bare-package'
}

const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function writeProgram(path: string, body: string): void {
  writeFileSync(path, `#!/bin/sh\n${body}\n`)
  chmodSync(path, 0o755)
}

function runSetup(machine: Machine, args: string[] = []) {
  const root = mkdtempSync(join(tmpdir(), 'tend-system-setup-'))
  folders.push(root)
  const bin = join(root, 'bin')
  mkdirSync(bin)
  const calls = join(root, 'calls.log')
  for (const tool of REAL_TOOLS) symlinkSync(realPath(tool), join(bin, tool))
  for (const command of machine.present) writeProgram(join(bin, command), 'exit 0')
  writeProgram(join(bin, 'id'), `[ "$1" = -u ] && echo ${machine.uid ?? 0}`)
  const manager = machine.manager ?? 'apt-get'
  if (manager !== 'none') {
    const installs = Object.entries(PACKAGE_COMMANDS)
      .map(
        ([name, commands]) =>
          `${name}) ${commands.map((command) => `printf '#!/bin/sh\\n' >"${bin}/${command}"; chmod 755 "${bin}/${command}"`).join('; ')} ;;`,
      )
      .join('\n    ')
    const outcome = machine.installFails
      ? `echo "E: Unable to locate package $last (fake ${manager})"; exit 100`
      : `for package in "$@"; do case $package in\n    ${installs}\n  esac; done`
    writeProgram(
      join(bin, manager),
      `echo "${manager} $*" >>"${calls}"\nfor last in "$@"; do :; done\ncase " $* " in *" install "*) ${outcome} ;; esac\nexit 0`,
    )
  }
  if (machine.sudo === 'working') writeProgram(join(bin, 'sudo'), `echo "sudo $*" >>"${calls}"\n[ "$1" = -n ] && shift\nexec "$@"`)
  if (machine.sudo === 'password') writeProgram(join(bin, 'sudo'), `echo "sudo $*" >>"${calls}"\necho "sudo: a password is required" >&2\nexit 1`)
  let script = SCRIPT
  if (machine.scriptAt === 'bare-package') {
    mkdirSync(join(root, 'package', 'bin'), { recursive: true })
    script = join(root, 'package', 'bin', 'system-setup.sh')
    copyFileSync(SCRIPT, script)
  }
  const result = spawnSync(BASH, [script, ...args], { env: { PATH: bin, TMPDIR: root }, encoding: 'utf8', timeout: 20_000 })
  const recorded = existsSync(calls) ? readFileSync(calls, 'utf8').trim().split('\n') : []
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls: recorded }
}

function realPath(tool: string): string {
  const found = spawnSync(BASH, ['-c', `type -P ${tool}`], { encoding: 'utf8' }).stdout.trim()
  if (!found) throw new Error(`the test needs ${tool} on this machine`)
  return found
}

const without = (...absent: string[]) => EVERY_COMMAND.filter((command) => !absent.includes(command))

test('with everything there it calls no package manager, prints nothing and exits 0', () => {
  for (const args of [[], ['--tests']]) {
    const result = runSetup({ present: EVERY_COMMAND, sudo: 'working' }, args)
    expect(result).toMatchObject({ status: 0, stdout: '', stderr: '', calls: [] })
  }
})

test('as root with bubblewrap missing it installs bubblewrap with apt-get and says so in one line', () => {
  const result = runSetup({ present: without('bwrap') })
  expect(result.status).toBe(0)
  expect(result.calls).toHaveLength(1)
  expect(result.calls[0]).toMatch(/^apt-get install .*-y.* bubblewrap$/)
  expect(result.stderr.trim().split('\n')).toEqual(['tend setup: installed bubblewrap (apt-get)'])
  expect(result.stdout).toBe('')
})

test('what only the tests need is left alone unless --tests asks for it', () => {
  const runtime = runSetup({ present: without('redis-server', 'chromium') })
  expect(runtime).toMatchObject({ status: 0, calls: [] })
  const tests = runSetup({ present: without('redis-server', 'chromium') }, ['--tests'])
  expect(tests.status).toBe(0)
  expect(tests.calls).toEqual([expect.stringMatching(/^apt-get install .* chromium redis-server$/)])
})

test("the C compiler is asked for only where tend's C is not built yet", () => {
  expect(runSetup({ present: without('cc') })).toMatchObject({ status: 0, calls: [] })
  const bare = runSetup({ present: without('cc'), scriptAt: 'bare-package' })
  expect(bare.status).toBe(0)
  expect(bare.calls).toEqual([expect.stringMatching(/^apt-get install .* gcc libc6-dev$/)])
})

test('not root, with sudo that needs no password, it installs through sudo -n', () => {
  const result = runSetup({ present: without('bwrap'), uid: 1000, sudo: 'working' })
  expect(result.status).toBe(0)
  expect(result.calls.filter((call) => call.startsWith('sudo ') && call.includes(' install '))).toEqual([
    expect.stringMatching(/^sudo -n (env DEBIAN_FRONTEND=noninteractive )?apt-get install .*-y.* bubblewrap$/),
  ])
  expect(result.stderr).toContain('installed bubblewrap')
})

test('not root and without a usable sudo it prints the one command to run and exits non-zero', () => {
  for (const sudo of ['password', undefined] as const) {
    const result = runSetup({ present: without('bwrap', 'redis-server'), uid: 1000, sudo }, ['--tests'])
    expect(result.status).toBe(1)
    expect(result.calls.filter((call) => call.includes(' install '))).toEqual([])
    const commands = result.stderr.split('\n').filter((line) => line.includes('apt-get'))
    expect(commands).toEqual([sudo === 'password' ? 'sudo apt-get install -y bubblewrap redis-server' : "su -c 'apt-get install -y bubblewrap redis-server'"])
    expect(result.stderr).toContain('bubblewrap redis-server')
  }
})

test('on Fedora (dnf only) it installs the Fedora names of the packages', () => {
  const result = runSetup({ present: without('bwrap', 'redis-server'), manager: 'dnf' }, ['--tests'])
  expect(result.status).toBe(0)
  expect(result.calls).toEqual([expect.stringMatching(/^dnf install -y .*bubblewrap redis$/)])
  expect(result.stderr.trim()).toBe('tend setup: installed bubblewrap redis (dnf)')
})

test("when the install fails the package manager's whole output is shown, then the command to run", () => {
  const result = runSetup({ present: without('bwrap'), installFails: true })
  expect(result.status).toBe(1)
  expect(result.stderr).toContain('E: Unable to locate package bubblewrap (fake apt-get)')
  expect(result.stderr.trim().split('\n').at(-1)).toBe('apt-get install -y bubblewrap')
})

test('without apt-get or dnf it names the missing packages and exits non-zero', () => {
  const result = runSetup({ present: without('bwrap'), manager: 'none' })
  expect(result.status).toBe(1)
  expect(result.calls).toEqual([])
  expect(result.stderr).toMatch(/no apt-get or dnf.*bubblewrap/)
})

test('--json prints one document with what it installed and what is missing', () => {
  const installed = runSetup({ present: without('bwrap') }, ['--json'])
  expect(JSON.parse(installed.stdout)).toEqual({ set: 'runtime', manager: 'apt-get', installed: ['bubblewrap'], missing: [], command: null })
  const refused = runSetup({ present: without('bwrap'), uid: 1000 }, ['--json', '--tests'])
  expect(refused.status).toBe(1)
  expect(JSON.parse(refused.stdout)).toEqual({
    set: 'tests',
    manager: 'apt-get',
    installed: [],
    missing: ['bubblewrap'],
    command: "su -c 'apt-get install -y bubblewrap'",
  })
})

test('an unknown option is a usage error naming it', () => {
  const result = runSetup({ present: EVERY_COMMAND }, ['--frobnicate'])
  expect(result.status).toBe(2)
  expect(result.stderr).toContain('--frobnicate')
  expect(result.calls).toEqual([])
})
