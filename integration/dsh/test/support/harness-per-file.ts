import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll } from 'vitest'
import { createHarness, type Harness } from './harness.js'
import { startTestDaemon, type TestDaemon } from './daemon.js'
import { runCalls, type ToolCallSpec } from './obedient.js'

export interface HarnessPerFile {
  /** Set once the file's beforeAll has run. */
  daemon: TestDaemon
  harness: Harness
  /** A folder for the commands' cwd. */
  scratch: string
  /** Has the obedient model of agent `agentId` make these tool calls, in turn (support/obedient.ts). */
  run: (agentId: string, calls: ToolCallSpec[]) => ReturnType<typeof runCalls>
}

/**
 * One real daemon and one harness with tend loaded (with `config`, beside the daemon's home) for a
 * whole test file, and a folder for the commands; all of them are gone after the file. Call it at
 * the top of the file.
 */
export function harnessPerFile(label: string, config: Record<string, unknown> = {}): HarnessPerFile {
  const shared = { run: (agentId: string, calls: ToolCallSpec[]) => runCalls(shared.harness, agentId, calls) } as HarnessPerFile
  beforeAll(async () => {
    shared.daemon = await startTestDaemon()
    shared.scratch = mkdtempSync(join(tmpdir(), `tend-dsh-${label}-`))
    shared.harness = await createHarness()
    await shared.harness.loadTend({ home: shared.daemon.home, ...config })
  })
  afterAll(async () => {
    await shared.harness?.dispose()
    await shared.daemon?.stop()
    if (shared.scratch) rmSync(shared.scratch, { recursive: true, force: true })
  })
  return shared
}
