import { afterEach, expect, test } from 'vitest'
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { checkUnprivilegedUser } from '../helpers/test-daemon.js'
import { createFakeMachine, everyCommandBut, EVERY_COMMAND, type FakeMachineSpec } from '../helpers/fake-packages.js'

/* `tend setup`: the shipped bin/system-setup.sh's runtime set, for a global install, on a fake machine. */

const folders: string[] = []
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true })
})

async function tendSetup(spec: FakeMachineSpec, args: string[] = []) {
  const machine = createFakeMachine(spec)
  folders.push(machine.root)
  const home = join(machine.root, 'home')
  const result = await runCli(['setup', ...args], { PATH: machine.bin, TMPDIR: machine.root, TEND_HOME: home })
  return { ...result, calls: machine.calls(), homeMade: existsSync(home) }
}

test('tend setup never runs bash (or anything) from a folder another user can write, first on PATH', async () => {
  const other = checkUnprivilegedUser()
  const machine = createFakeMachine({ present: everyCommandBut('bwrap') })
  folders.push(machine.root)
  const planted = join(machine.root, 'planted')
  const marks = join(machine.root, 'ran')
  mkdirSync(planted)
  mkdirSync(marks)
  chmodSync(marks, 0o777)
  for (const name of ['bash', 'env', 'id', 'apt-get']) {
    writeFileSync(join(planted, name), `#!/bin/sh\n: > ${marks}/${name}\nexit 1\n`)
    chmodSync(join(planted, name), 0o755)
  }
  chownSync(planted, other.uid, other.gid)
  const result = await runCli(['setup'], { PATH: `${planted}:${machine.bin}`, TMPDIR: machine.root, TEND_HOME: join(machine.root, 'home') })
  expect(readdirSync(marks)).toEqual([])
  expect(result.exitCode).toBe(0)
  expect(machine.calls()).toEqual([expect.stringMatching(/^apt-get install .* bubblewrap$/)])
})

test('tend setup --help says what it installs and how', async () => {
  const result = await tendSetup({ present: EVERY_COMMAND }, ['--help'])
  expect(result.exitCode).toBe(0)
  expect(result.stdout).toContain('bubblewrap')
  expect(result.stdout).toContain('sudo -n')
})

test('tend setup with everything there says nothing, calls no package manager and starts no daemon', async () => {
  const result = await tendSetup({ present: EVERY_COMMAND })
  expect(result).toMatchObject({ exitCode: 0, stdout: '', stderr: '', calls: [], homeMade: false })
})

test('tend setup installs bubblewrap where it is missing, and only what tend needs to run', async () => {
  const result = await tendSetup({ present: everyCommandBut('bwrap', 'redis-server') })
  expect(result.exitCode).toBe(0)
  expect(result.calls).toEqual([expect.stringMatching(/^apt-get install .* bubblewrap$/)])
  expect(result.stderr).toBe('tend setup: installed bubblewrap (apt-get)\n')
})

test('tend setup --json, where it cannot install, prints the document with the command to run and exits 1', async () => {
  const result = await tendSetup({ present: everyCommandBut('bwrap'), uid: 1000, sudo: 'password' }, ['--json'])
  expect(result.exitCode).toBe(1)
  expect(JSON.parse(result.stdout)).toEqual({
    set: 'runtime',
    manager: 'apt-get',
    installed: [],
    missing: ['bubblewrap'],
    command: 'sudo apt-get install -y bubblewrap',
  })
  expect(result.stderr).toContain('sudo apt-get install -y bubblewrap')
})
