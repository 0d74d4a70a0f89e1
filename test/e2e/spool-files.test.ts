import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseExitRecord } from '../../daemon/spawn/exit-file.js'
import { startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

let daemon: TestDaemon

beforeAll(async () => {
  daemon = await startTestDaemon()
})
afterAll(async () => {
  await daemon.stop()
})

/** The attribute letters lsattr prints for a folder, or null where the file system has none. */
function attributes(path: string): string | null {
  try {
    return execFileSync('lsattr', ['-d', path], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split(/\s+/)[0]!
  } catch {
    return null
  }
}

describe('spool files', () => {
  test('on ext4 the spool folder is a top directory (chattr +T), so task folders spread over block groups', async (context) => {
    const spool = join(daemon.home, 'spool')
    const flags = attributes(spool)
    if (flags === null) context.skip('lsattr cannot read attributes on this file system')
    expect(flags).toContain('T')
  })

  test('many tasks at once: every record is whole, in its final state, with no temporary file left', async () => {
    const started = await Promise.all(Array.from({ length: 60 }, (_, index) => daemon.client.start({ command: ['sh', '-c', `exit ${index % 5}`] })))
    const ended = await Promise.all(started.map((task) => daemon.client.wait(task.id)))
    for (const [index, task] of ended.entries()) {
      expect(task).toMatchObject({ state: 'exited', exitCode: index % 5 })
      const folder = join(daemon.home, 'spool', task.id)
      // The record on disk is the final one (a running record never lands after it).
      expect(JSON.parse(readFileSync(join(folder, 'task.json'), 'utf8'))).toMatchObject({ schemaVersion: 1, id: task.id, state: 'exited', exitCode: index % 5 })
      // And the keeper's exit file, written whole right after it reported the exit.
      const exit = await waitFor(`exit.json of ${task.id}`, () =>
        existsSync(join(folder, 'exit.json')) ? parseExitRecord(readFileSync(join(folder, 'exit.json'), 'utf8')) : null,
      )
      expect(exit).toMatchObject({ pid: task.pid, exitCode: index % 5, signal: null })
      expect(readdirSync(folder).sort()).toEqual(['exit.json', 'output.log', 'task.json'])
    }
  })

  test('a task is reported ended once its keeper has written its exit file: removing it right after wait finds nothing still being written', async () => {
    for (let round = 0; round < 30; round++) {
      const task = await daemon.client.wait((await daemon.client.start({ command: ['true'] })).id)
      const folder = join(daemon.home, 'spool', task.id)
      expect(readdirSync(folder).sort(), task.id).toEqual(['exit.json', 'output.log', 'task.json'])
      expect(parseExitRecord(readFileSync(join(folder, 'exit.json'), 'utf8'))).toMatchObject({ pid: task.pid, exitCode: 0 })
      await daemon.client.remove(task.id)
      expect(existsSync(folder), task.id).toBe(false)
    }
  })
})
