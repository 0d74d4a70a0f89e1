import { afterEach, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { checkUnprivilegedUser } from '../helpers/test-daemon.js'
import { createFakeMachine, EVERY_COMMAND, everyCommandBut as without, type FakeMachineSpec } from '../helpers/fake-packages.js'

/* bin/system-setup.sh run on a fake machine (test/helpers/fake-packages.ts) for each case. */

const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function runSetup(spec: FakeMachineSpec, args: string[] = []) {
  const machine = createFakeMachine(spec)
  folders.push(machine.root)
  const result = spawnSync('/bin/bash', [machine.script, ...args], { env: machine.env, encoding: 'utf8', timeout: 20_000 })
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls: machine.calls(), cgroupBase: machine.cgroupBase }
}

test("run by its path as root, it never runs a program planted earlier on PATH in another user's folder, bash included", () => {
  // The npm case: node_modules/.bin of a folder above the project, the test user's, first on PATH.
  const other = checkUnprivilegedUser()
  const machine = createFakeMachine({ present: without('bwrap') })
  folders.push(machine.root)
  expect(statSync(machine.root).mode & 0o777).toBe(0o700)
  const planted = join(machine.root, 'node_modules', '.bin')
  const marks = join(machine.root, 'ran')
  mkdirSync(planted, { recursive: true })
  mkdirSync(marks)
  chmodSync(marks, 0o777)
  for (const name of ['id', 'env', 'bash', 'mktemp', 'cat', 'rm', 'stat', 'apt-get', 'sudo', 'bwrap']) {
    writeFileSync(join(planted, name), `#!/bin/sh\n: > ${marks}/${name}\nexit 1\n`)
    chmodSync(join(planted, name), 0o755)
  }
  chownSync(planted, other.uid, other.gid)
  chownSync(join(machine.root, 'node_modules'), other.uid, other.gid)
  const result = spawnSync(machine.script, [], { env: { ...machine.env, PATH: `${planted}:${machine.bin}` }, encoding: 'utf8', timeout: 20_000 })
  expect(readdirSync(marks)).toEqual([])
  expect(result.status).toBe(0)
  expect(machine.calls()).toEqual([expect.stringMatching(/^apt-get install .*-y.* bubblewrap$/)])
})

test('run by its path as root, it reads no start-up file and no function from its environment (BASH_ENV, ENV, exported functions)', () => {
  const machine = createFakeMachine({ present: EVERY_COMMAND })
  folders.push(machine.root)
  const marks = join(machine.root, 'ran')
  mkdirSync(marks)
  const startup = join(machine.root, 'startup.sh')
  writeFileSync(startup, `: > ${marks}/startup\n`)
  const env = {
    ...machine.env,
    BASH_ENV: startup,
    ENV: startup,
    // What `export -f cd` passes to a child bash: a function shadowing a builtin the script uses.
    'BASH_FUNC_cd%%': `() { : > ${marks}/cd; builtin cd "$@"; }`,
  }
  const result = spawnSync(machine.script, ['--tests'], { env, encoding: 'utf8', timeout: 20_000 })
  expect(readdirSync(marks)).toEqual([])
  expect(result.status, result.stderr).toBe(0)
})

test("a PATH entry through another user's symlink is kept as its real folder: re-pointing the link mid-run changes nothing", () => {
  const other = checkUnprivilegedUser()
  const machine = createFakeMachine({ present: without('bwrap') })
  folders.push(machine.root)
  const theirs = join(machine.root, 'theirs')
  const planted = join(theirs, 'planted')
  const marks = join(machine.root, 'ran')
  mkdirSync(planted, { recursive: true })
  mkdirSync(marks)
  chmodSync(marks, 0o777)
  writeFileSync(join(planted, 'apt-get'), `#!/bin/sh\n: > ${marks}/apt-get\nexit 1\n`)
  chmodSync(join(planted, 'apt-get'), 0o755)
  const link = join(theirs, 'bin')
  symlinkSync(machine.bin, link)
  chownSync(theirs, other.uid, other.gid)
  // The link's owner re-points it while the script runs: here, when the script first asks who it is.
  const id = join(machine.bin, 'id')
  writeFileSync(id, `#!/bin/sh\n/bin/ln -sfn ${planted} ${link}\n${readFileSync(id, 'utf8').replace('#!/bin/sh\n', '')}`)
  const result = spawnSync(machine.script, [], { env: { ...machine.env, PATH: link }, encoding: 'utf8', timeout: 20_000 })
  expect(readdirSync(marks)).toEqual([])
  expect(result.status, result.stderr).toBe(0)
  expect(machine.calls()).toEqual([expect.stringMatching(/^apt-get install .*-y.* bubblewrap$/)])
})

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

test("the tests' set makes the test user and its cgroup folders where missing, and leaves them be once made", () => {
  const made = runSetup({ present: EVERY_COMMAND, testUser: false, cgroupControllers: true }, ['--tests'])
  expect(made.status, made.stderr).toBe(0)
  expect(made.calls).toEqual(['useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin tend-test'])
  expect(made.stderr).toContain('made the test user tend-test and its cgroup folders')
  const uid = spawnSync('id', ['-u', 'tend-test'], { encoding: 'utf8' }).stdout.trim()
  for (const controller of ['memory', 'pids']) {
    const top = join(made.cgroupBase, controller, 'tend')
    expect(statSync(top)).toMatchObject({ uid: 0, mode: 0o40755 })
    expect(statSync(join(top, uid))).toMatchObject({ uid: Number(uid), mode: 0o40755 })
  }
  // Without controllers there is no folder to make; with the user there, nothing at all.
  expect(runSetup({ present: EVERY_COMMAND }, ['--tests'])).toMatchObject({ status: 0, stderr: '', calls: [] })
})

test("the tests' set as a user without sudo prints the commands that make the test user, as root, and exits 1", () => {
  const result = runSetup({ present: EVERY_COMMAND, testUser: false, uid: 1000 }, ['--tests'])
  expect(result.status).toBe(1)
  expect(result.calls).toEqual([])
  expect(result.stderr).toContain('Run as root:\nuseradd --system --user-group')
  // What tend itself needs asks for no test user.
  expect(runSetup({ present: EVERY_COMMAND, testUser: false, uid: 1000 })).toMatchObject({ status: 0, calls: [] })
})
