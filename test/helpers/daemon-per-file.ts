import { afterAll, afterEach, beforeAll, expect } from 'vitest'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { isTendError } from '../../client/index.js'
import { isAlive, processesWithEnv } from './processes.js'
import { startTestDaemon, type TestDaemon, type TestDaemonOptions } from './test-daemon.js'

export interface DaemonPerFile {
  /** Set once the file's beforeAll has run. */
  daemon: TestDaemon
  /** A folder for the tasks' cwd, under /var/tmp (a sandboxed task gets a private /tmp). */
  workspace: string
  /** Marks a task as this test's: after the test it is killed if it still runs, and must leave no process. */
  track(id: string): string
}

/**
 * One real daemon for a whole test file, and a folder for its tasks: after each test, every task
 * the test tracked that still runs is killed, and none may leave a process behind; after the file,
 * the daemon is stopped and the folder deleted. Call it at the top of the file.
 */
export function daemonPerFile(label: string, options: TestDaemonOptions = {}): DaemonPerFile {
  const tracked: string[] = []
  const shared = {
    track(id: string) {
      tracked.push(id)
      return id
    },
  } as DaemonPerFile
  beforeAll(async () => {
    shared.daemon = await startTestDaemon(options)
    shared.workspace = mkdtempSync(`/var/tmp/tend-${label}-`)
  })
  afterEach(async () => {
    for (const id of tracked.splice(0)) {
      const task = await shared.daemon.client.get(id).catch(() => null)
      if (task && (task.state === 'running' || task.state === 'queued')) await shared.daemon.client.kill(id, { signal: 'KILL' })
      expect(processesWithEnv(`TEND_TASK_ID=${id}`).filter(isAlive), `processes of task ${id}`).toEqual([])
    }
  })
  afterAll(async () => {
    await shared.daemon?.stop()
    if (shared.workspace) rmSync(shared.workspace, { recursive: true, force: true })
  })
  return shared
}

/**
 * A new folder under the file's workspace, for a sandboxed task's cwd: writable by all, since a
 * root daemon's tasks run on a uid of their own (the workspace itself must then be 0711).
 */
export function sandboxedCwd(shared: DaemonPerFile): string {
  const cwd = mkdtempSync(join(shared.workspace, 'ws-'))
  chmodSync(cwd, 0o777)
  return cwd
}

/** Expects the promise to reject with this tend error code (and a message matching `message`). */
export async function expectTendError(promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  )
  expect(isTendError(error), `expected ${code}, got ${String(error)}`).toBe(true)
  expect((error as { code: string }).code).toBe(code)
  if (message) expect((error as Error).message).toMatch(message)
}
