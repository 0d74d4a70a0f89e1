import { afterEach, describe, expect, test } from 'vitest'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readUnifiedUsage, unifiedLimitsHit, untilUnpopulated, writeUnifiedLimits } from '../../daemon/sandbox/cgroup-v2-group.js'

/* A task's cgroup v2 group files, on a FAKE group (a temp folder with the files the kernel would have). */

const made: string[] = []
afterEach(() => {
  for (const folder of made.splice(0)) rmSync(folder, { recursive: true, force: true })
})

function fakeGroup(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-fake-v2-group-'))
  made.push(dir)
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  return dir
}

describe('a cgroup v2 task group', () => {
  test('a limit not asked is not written', () => {
    const dir = fakeGroup({})
    writeUnifiedLimits(dir, { memoryBytes: null, pidsMax: 9 })
    expect(readFileSync(join(dir, 'pids.max'), 'utf8')).toBe('9')
    expect(() => readFileSync(join(dir, 'memory.max'))).toThrow(/ENOENT/)
  })

  test('the limit reached is read from memory.events and pids.events', async () => {
    const dir = fakeGroup({ 'memory.events': 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n', 'pids.events': 'max 0\n' })
    expect(await unifiedLimitsHit(dir, { memoryBytes: 1024 * 1024, pidsMax: 10 })).toEqual({ memory: 'memory limit of 1.0M reached', pids: null })
  })

  test('usage: CPU from cpu.stat, bytes from every device of io.stat, peak from memory.peak', async () => {
    const dir = fakeGroup({
      'cpu.stat': 'usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnice_usec 0\n',
      'io.stat': '8:0 rbytes=4096 wbytes=100 rios=1 wios=1 dbytes=0 dios=0\n8:16 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n',
      'memory.peak': '1048576\n',
    })
    expect(await readUnifiedUsage(dir)).toEqual({ cpuUserMs: 2000, cpuSystemMs: 500, peakMemoryBytes: 1048576, readBytes: 4106, writeBytes: 120 })
  })

  test('without the io and memory controllers only CPU is known', async () => {
    const dir = fakeGroup({ 'cpu.stat': 'usage_usec 10\nuser_usec 7000\nsystem_usec 3000\n' })
    expect(await readUnifiedUsage(dir)).toEqual({ cpuUserMs: 7, cpuSystemMs: 3, peakMemoryBytes: null, readBytes: null, writeBytes: null })
  })

  test("the wait for the group's end resolves on populated 0, and answers false past its timeout", async () => {
    const dir = fakeGroup({ 'cgroup.events': 'populated 1\nfrozen 0\n' })
    expect(await untilUnpopulated(dir, 50)).toBe(false)
    const emptied = untilUnpopulated(dir, 10_000)
    writeFileSync(join(dir, 'cgroup.events'), 'populated 0\nfrozen 0\n')
    expect(await emptied).toBe(true)
  })
})
