import { afterAll, describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli } from '../helpers/cli.js'
import { createTempHome, startTestDaemon, stopKeepingHome, type TestDaemon } from '../helpers/test-daemon.js'

/*
 * Issue 25, the second adversarial pass: what operators do to a home that the guards against
 * hostile tasks must not break. A hard-link backup of the home (`cp -al`, rsnapshot), a spool
 * moved to a bigger disk behind a link, a spool on a file system of its own (with its
 * lost+found), a home whose disk is full when the daemon starts.
 */

function run(command: string, args: string[]): void {
  const result = spawnSync(command, args, { encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status}): ${result.stderr}${result.error?.message ?? ''}`)
}

const folders: string[] = []
const mounts: string[] = []
afterAll(() => {
  for (const mount of mounts.reverse()) spawnSync('umount', ['-l', mount])
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
})

function scratch(prefix: string): string {
  const folder = mkdtempSync(join('/var/tmp', prefix))
  folders.push(folder)
  return folder
}

describe('a hard-link backup of the home (cp -al)', () => {
  test('every finished task stays a task (not corrupt) and removable; gc takes nothing; an idempotent retry after rm is still answered 410', async () => {
    const home = createTempHome()
    folders.push(home)
    const work = scratch('tend-setups-work-')
    const marks = join(work, 'runs')
    const first = await startTestDaemon({ home })
    const kept = await first.client.start({ command: 'echo kept', shell: true, cwd: work })
    await first.client.wait(kept.id, { timeoutMs: 20_000 })
    const keyed = { command: `echo ran >> ${marks}`, shell: true, cwd: work, idempotencyKey: 'backup-key' }
    const removed = await first.client.start(keyed)
    await first.client.wait(removed.id, { timeoutMs: 20_000 })
    await first.client.remove(removed.id)
    await stopKeepingHome(first)
    // Every file of the home now has a second name, in the backup.
    const backup = join(scratch('tend-setups-backup-'), 'home')
    run('cp', ['-al', home, backup])

    const second = await startTestDaemon({ home })
    try {
      const listed = await second.client.list({ all: true })
      expect(listed.map((task) => `${task.id} ${task.state} ${task.reason ?? ''}`)).toEqual([`${kept.id} exited `])
      expect(existsSync(join(home, 'spool', kept.id, 'task.json'))).toBe(true)
      // Its output is not read through a second name (a task could plant one to another file): said, not guessed.
      await expect(second.client.read(kept.id)).rejects.toMatchObject({ code: 'TEND_ERR_OUTPUT_MISSING' })
      const gc = await runCli(['gc', '--json'], second.env)
      expect(gc.exitCode, gc.stderr).toBe(0)
      expect(existsSync(join(home, 'spool', kept.id, 'task.json'))).toBe(true)
      await expect(second.client.start(keyed)).rejects.toMatchObject({ code: 'TEND_ERR_SUBMISSION_REMOVED' })
      expect(readFileSync(marks, 'utf8')).toBe('ran\n')
      // Written through no second name: the backup's copies are as they were.
      expect(JSON.parse(readFileSync(join(backup, 'spool', kept.id, 'task.json'), 'utf8'))).toMatchObject({ id: kept.id, state: 'exited' })
      await second.client.remove(kept.id)
      expect(existsSync(join(home, 'spool', kept.id))).toBe(false)
      expect(readFileSync(join(backup, 'spool', kept.id, 'output.log'), 'utf8')).toBe('kept\n')
    } finally {
      await stopKeepingHome(second)
    }
  })
})

describe('a spool moved behind a link by its operator', () => {
  test('tasks run and are recorded in the folder the link names', async () => {
    const home = createTempHome()
    folders.push(home)
    const disk = scratch('tend-setups-disk-')
    mkdirSync(home, { recursive: true, mode: 0o700 })
    symlinkSync(disk, join(home, 'spool'))
    const daemon = await startTestDaemon({ home })
    try {
      const task = await daemon.client.start({ command: 'echo behind a link', shell: true, cwd: disk })
      const ended = await daemon.client.wait(task.id, { timeoutMs: 20_000 })
      expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
      expect(readFileSync(join(disk, task.id, 'output.log'), 'utf8')).toBe('behind a link\n')
    } finally {
      await stopKeepingHome(daemon)
    }
  })
})

describe('a spool on a file system of its own', () => {
  test('its lost+found is no stray: gc leaves it, and it is not counted as one', async () => {
    const home = createTempHome()
    folders.push(home)
    // What mkfs.ext4 leaves at the top of the file system (the test makes it by hand: a folder of root's).
    mkdirSync(join(home, 'spool', 'lost+found'), { recursive: true, mode: 0o700 })
    const daemon = await startTestDaemon({ home })
    try {
      const task = await daemon.client.start({ command: 'true', shell: true })
      await daemon.client.wait(task.id, { timeoutMs: 20_000 })
      const status = await daemon.client.status()
      expect(status.spool.strayEntries ?? []).toEqual([])
      const gc = await runCli(['gc'], daemon.env)
      expect(gc.exitCode, gc.stderr).toBe(0)
      expect(existsSync(join(home, 'spool', 'lost+found'))).toBe(true)
    } finally {
      await stopKeepingHome(daemon)
    }
  })
})

describe('a home whose disk is full when the daemon starts', () => {
  test('the daemon starts (without its pid file), answers, and the operator can free space with tend', async () => {
    const home = scratch('tend-setups-full-')
    run('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', home])
    mounts.push(home)
    const first = await startTestDaemon({ home, env: { TEND_SPOOL_RESERVE: '0' } })
    const task = await first.client.start({ command: 'echo hello', shell: true })
    await first.client.wait(task.id, { timeoutMs: 20_000 })
    await stopKeepingHome(first)
    // Filled from outside, to the last block.
    spawnSync('dd', ['if=/dev/zero', `of=${join(home, 'filler')}`, 'bs=64k'], { encoding: 'utf8' })
    rmSync(join(home, 'daemon.pid'), { force: true })
    const second = await startTestDaemon({ home, env: { TEND_SPOOL_RESERVE: '0' } })
    try {
      expect((await second.client.get(task.id)).state).toBe('exited')
      expect(readdirSync(home)).not.toContain('daemon.pid')
      await second.client.remove(task.id)
      expect(existsSync(join(home, 'spool', task.id))).toBe(false)
    } finally {
      await stopKeepingHome(second)
      writeFileSync(join(home, 'filler'), '')
    }
  })
})
