import { spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { parseProcStat, readProcStat } from '../../protocol/index.js'
import { waitFor } from '../helpers/wait-for.js'

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('/proc/<pid>/stat', () => {
  test('a line is read by its fields, counted after the last parenthesis of the command name', () => {
    const line = '4242 (a) Z (b c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100\n'
    expect(parseProcStat(line)).toEqual({ name: 'a) Z (b c', state: 'S', parent: 17, startTime: '987654' })
  })

  test('this process reads as running, with its parent and a start time', () => {
    const stat = readProcStat(process.pid)
    expect(stat).not.toBeNull()
    expect(stat!.parent).toBe(process.ppid)
    expect(stat!.startTime).toMatch(/^\d+$/)
    expect(['R', 'S']).toContain(stat!.state)
  })

  test('a process whose name holds a parenthesis and a state letter reads right', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tend-proc-stat-'))
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
    const program = join(dir, 'x) Z (y')
    copyFileSync('/bin/sleep', program)
    const child = spawn(program, ['30'], { stdio: 'ignore' })
    cleanups.push(() => child.kill('SIGKILL'))
    const stat = await waitFor('the sleep to have its own name', () => {
      const seen = readProcStat(child.pid!)
      return seen?.name === 'x) Z (y' ? seen : null
    })
    expect(stat.parent).toBe(process.pid)
    expect(['R', 'S']).toContain(stat.state)
    child.kill('SIGKILL')
    await waitFor('the sleep to be gone', () => child.exitCode !== null || child.signalCode !== null)
    expect(readProcStat(child.pid!)).toBeNull()
  })

  test('a pid no process has reads as null', () => {
    expect(readProcStat(2 ** 22 + 1)).toBeNull()
  })
})
