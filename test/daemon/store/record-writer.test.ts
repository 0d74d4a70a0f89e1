import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { spawnSync } from 'node:child_process'
import { closeSync, ftruncateSync, fstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Task } from '../../../protocol/index.js'
import { RecordWriter } from '../../../daemon/store/record-writer.js'
import { FS_DURABLE_WRITER, loadDurableWriter } from '../../../daemon/durable-write/durable-write.js'

const CREATED_AT = '2026-01-01T00:00:00.000Z'

function exitedTask(spoolRoot: string, id: string, command: string[]): Task {
  return {
    id,
    name: null,
    owner: 'operator',
    command,
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
    memoryBytes: null,
    pidsMax: null,
    createdAt: CREATED_AT,
    spool: join(spoolRoot, id),
    state: 'exited',
    startedAt: CREATED_AT,
    pid: 1,
    endedAt: CREATED_AT,
    exitCode: 0,
    signal: null,
    reason: null,
    stoppedBy: null,
  }
}

/** What a failed write leaves in a task's folder besides its files: nothing. */
const leftovers = (folder: string) => readdirSync(folder).filter((name) => name !== 'task.json' && name !== 'output.log')

const writers: RecordWriter[] = []
afterEach(async () => {
  while (writers.length > 0) await writers.pop()!.close()
})

test("the durable-write addon is built and loads (the build needs a C compiler and Node's headers)", () => {
  const loaded = loadDurableWriter()
  expect(loaded.reason).toBeUndefined()
  expect(loaded.via).toBe('addon')
})

// Both ways of writing a file durably keep the same promises; the daemon uses the addon when built.
describe.each([
  { way: 'the durable-write addon', durable: loadDurableWriter() },
  { way: "Node's fs calls", durable: FS_DURABLE_WRITER },
])('through $way', ({ durable }) => {
  describe('record writes on a full disk', () => {
    let mountPoint: string | undefined
    let mountError: string | undefined

    beforeAll(() => {
      const folder = mkdtempSync(join(tmpdir(), 'tend-record-full-'))
      // A tiny tmpfs that the test can fill: needs root (CAP_SYS_ADMIN).
      const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', folder], { encoding: 'utf8' })
      if (mounted.status === 0) mountPoint = folder
      else {
        mountError = `mount -t tmpfs failed (${mounted.error?.message ?? mounted.stderr.trim()}); it needs root`
        rmSync(folder, { recursive: true, force: true })
      }
    })
    afterAll(() => {
      if (!mountPoint) return
      const unmounted = spawnSync('umount', [mountPoint], { encoding: 'utf8' })
      if (unmounted.status !== 0) throw new Error(`umount ${mountPoint} failed: ${unmounted.stderr}`)
      rmSync(mountPoint, { recursive: true, force: true })
    })

    test('a write that runs out of space part way fails with ENOSPC, keeps the old task.json whole and leaves no temporary file', async (context) => {
      if (!mountPoint) return context.skip(mountError)
      const writer = new RecordWriter(mountPoint, durable)
      writers.push(writer)
      const id = 'fullspool001'
      const small = exitedTask(mountPoint, id, ['echo', 'small'])
      await writer.write(small, { createDir: true })
      const record = join(mountPoint, id, 'task.json')
      const before = readFileSync(record, 'utf8')
      expect(JSON.parse(before)).toMatchObject({ id, command: ['echo', 'small'] })

      // Fill the file system, then free two pages: the next record (about 12 KiB) fits only in part.
      const filler = openSync(join(mountPoint, 'filler'), 'w')
      try {
        const page = Buffer.alloc(4096, 1)
        for (;;) {
          try {
            writeSync(filler, page)
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break
            throw error
          }
        }
        ftruncateSync(filler, fstatSync(filler).size - 8192)
      } finally {
        closeSync(filler)
      }

      const large = exitedTask(mountPoint, id, ['echo', 'x'.repeat(12_000)])
      const error = await writer.write(large).then(
        () => new Error('the write was answered as landed'),
        (caught: unknown) => caught,
      )
      expect((error as NodeJS.ErrnoException).code).toBe('ENOSPC')
      expect(readFileSync(record, 'utf8')).toBe(before)
      expect(leftovers(join(mountPoint, id))).toEqual([])

      // Once there is room again, the same writer writes the record whole.
      rmSync(join(mountPoint, 'filler'))
      await writer.write(large)
      expect(JSON.parse(readFileSync(record, 'utf8'))).toEqual({ schemaVersion: 1, ...large })
      expect(leftovers(join(mountPoint, id))).toEqual([])
    })
  })

  describe('record writes that fail', () => {
    let spoolRoot = ''
    beforeAll(() => {
      spoolRoot = mkdtempSync(join(tmpdir(), 'tend-record-fail-'))
    })
    afterAll(() => rmSync(spoolRoot, { recursive: true, force: true }))

    test("a folder put in the record's place is moved aside with what it holds: the write lands, no temporary file is left", async () => {
      const writer = new RecordWriter(spoolRoot, durable)
      writers.push(writer)
      const id = 'renamefails1'
      const task = exitedTask(spoolRoot, id, ['true'])
      await writer.write(task, { createDir: true })
      // task.json replaced by a folder that holds a file (a task under off can do it): a plain
      // rename over it cannot succeed, and every later version, its ending too, would be lost.
      const record = join(spoolRoot, id, 'task.json')
      rmSync(record)
      mkdirSync(record)
      writeFileSync(join(record, 'keep'), 'kept\n')
      await writer.write({ ...task, outputBytes: 5 })
      expect(JSON.parse(readFileSync(record, 'utf8'))).toMatchObject({ id, outputBytes: 5 })
      const [aside, ...more] = leftovers(join(spoolRoot, id))
      expect(more).toEqual([])
      expect(aside).toMatch(/^task\.json\.[0-9a-f]{16}\.displaced$/)
      expect(readFileSync(join(spoolRoot, id, aside!, 'keep'), 'utf8')).toBe('kept\n')
    })

    test('a write into a folder that is gone answers ENOENT and creates nothing', async () => {
      const writer = new RecordWriter(spoolRoot, durable)
      writers.push(writer)
      const id = 'folderisgone'
      const error = await writer.write(exitedTask(spoolRoot, id, ['true'])).then(
        () => new Error('the write was answered as landed'),
        (caught: unknown) => caught,
      )
      expect((error as NodeJS.ErrnoException).code).toBe('ENOENT')
      expect(readdirSync(spoolRoot)).not.toContain(id)
    })
  })

  describe('record writes of one task in quick succession', () => {
    let spoolRoot = ''
    beforeAll(() => {
      spoolRoot = mkdtempSync(join(tmpdir(), 'tend-record-burst-'))
    })
    afterAll(() => rmSync(spoolRoot, { recursive: true, force: true }))

    test('versions written while earlier ones are in flight all land, the newest last, with no temporary file left', async () => {
      const writer = new RecordWriter(spoolRoot, durable)
      writers.push(writer)
      const ids = Array.from({ length: 50 }, (_, index) => `burst${String(index).padStart(7, '0')}`)
      await Promise.all(ids.map((id) => writer.write(exitedTask(spoolRoot, id, ['true']), { createDir: true })))
      // Per task, four versions asked for without waiting: two go to the disk at once, the rest coalesce.
      const landed: string[] = []
      await Promise.all(
        ids.flatMap((id) =>
          [1, 2, 3, 4].map((outputBytes) =>
            writer.write({ ...exitedTask(spoolRoot, id, ['true']), outputBytes }).then(() => landed.push(`${id}:${outputBytes}`)),
          ),
        ),
      )
      expect(landed).toHaveLength(ids.length * 4)
      for (const id of ids) {
        expect(JSON.parse(readFileSync(join(spoolRoot, id, 'task.json'), 'utf8')), id).toMatchObject({ id, outputBytes: 4 })
        expect(leftovers(join(spoolRoot, id)), id).toEqual([])
        // Each version answers once it, or a newer one, is on disk: never the newest before an older one.
        const order = landed.filter((entry) => entry.startsWith(`${id}:`)).map((entry) => Number(entry.split(':')[1]))
        expect(order, id).toEqual([...order].sort((a, b) => a - b))
      }
    })
  })
})
