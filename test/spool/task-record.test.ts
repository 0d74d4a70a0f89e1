import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SCHEMA_VERSION } from '../../protocol/index.js'
import { readSpoolEntry } from '../../spool/index.js'

let spoolRoot = ''
beforeAll(() => {
  spoolRoot = mkdtempSync(join(tmpdir(), 'tend-record-read-'))
})
afterAll(() => rmSync(spoolRoot, { recursive: true, force: true }))

/** A folder `id` whose task.json holds `text`; answers the reason it is corrupt. */
async function reasonFor(id: string, plant: (record: string) => void): Promise<string | undefined> {
  mkdirSync(join(spoolRoot, id))
  plant(join(spoolRoot, id, 'task.json'))
  return (await readSpoolEntry(spoolRoot, id)).corrupt?.reason
}

describe('reading a spool entry', () => {
  test("an older record's stoppedBy cluster-lease reads as lease-expired", async () => {
    const id = 'oldlease0001'
    const task = {
      schemaVersion: SCHEMA_VERSION,
      id,
      name: null,
      owner: 'operator',
      command: ['sleep', '9'],
      shell: false,
      cwd: '/',
      envKeys: [],
      timeoutMs: null,
      maxOutputBytes: 1024,
      outputBytes: 0,
      lifetime: 'owner',
      sandbox: 'off',
      network: 'host',
      writablePaths: [],
      sandboxWritable: [],
      memoryBytes: null,
      pidsMax: null,
      createdAt: '2026-01-01T00:00:00.000Z',
      spool: join(spoolRoot, id),
      state: 'killed',
      startedAt: '2026-01-01T00:00:01.000Z',
      pid: 4242,
      endedAt: '2026-01-01T00:00:02.000Z',
      exitCode: null,
      signal: 'SIGKILL',
      reason: 'its worker lost its lease on the job',
      stoppedBy: 'cluster-lease',
    }
    mkdirSync(join(spoolRoot, id))
    writeFileSync(join(spoolRoot, id, 'task.json'), JSON.stringify(task))
    const entry = await readSpoolEntry(spoolRoot, id)
    expect(entry.corrupt).toBeUndefined()
    expect(entry.task).toMatchObject({ state: 'killed', stoppedBy: 'lease-expired' })
  })

  test('a reason never quotes the text of a record that is not JSON', async () => {
    expect(await reasonFor('notjson00001', (record) => writeFileSync(record, 'root:x:0:0:secret-ish:/root:/bin/bash\n'))).toBe(
      "task.json is not valid JSON: Unexpected token 'r'",
    )
  })

  test('control characters in a reason are escaped for terminals', async () => {
    expect(await reasonFor('control00001', (record) => writeFileSync(record, '\u001b[31m'))).toBe("task.json is not valid JSON: Unexpected token '\\u001b'")
  })

  test('a FIFO in place of task.json does not block the read', async () => {
    const made = await reasonFor('fifo00000001', (record) => spawnSync('mkfifo', [record]))
    expect(made).toBe('task.json is a FIFO, not a regular file')
  })

  test('a record too large to be one is not read into memory', async () => {
    expect(await reasonFor('toolarge0001', (record) => truncateSync((writeFileSync(record, ''), record), 17 * 1024 * 1024))).toBe(
      `task.json is too large: ${17 * 1024 * 1024} bytes, more than a record's ${16 * 1024 * 1024}`,
    )
  })

  test('an empty record says so', async () => {
    expect(await reasonFor('emptyrecord1', (record) => writeFileSync(record, '\n'))).toBe('task.json is empty')
  })
})
