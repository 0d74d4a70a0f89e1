import { describe, expect, test } from 'vitest'
import { closeSync, constants as fsConstants, existsSync, openSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { constants } from 'node:os'
import { join } from 'node:path'
import { isAlive } from '../../helpers/processes.js'
import { waitFor } from '../../helpers/wait-for.js'
import { exitRecord, fifo, freshDir, keeperGone, leftovers, request, run, spawner, started, useNativeSpawner } from './native-fixture.js'

/** The native spawner: a stdin FIFO held by the keeper. */

useNativeSpawner()

describe('native spawner: a stdin FIFO held by the keeper', () => {
  test('the keeper makes the FIFO (0600) and holds it; the child reads it as fd 0; SIGUSR1 to the keeper is the end of input', async () => {
    const dir = freshDir()
    const stdinFifo = join(dir, 'input.fifo')
    const child = started(await spawner.spawn(request({ file: '/bin/cat', argv: ['cat'], cwd: dir, stdinFifo })))
    leftovers.push(child.pid)
    const keeper = child.keeper!.pid
    const info = statSync(stdinFifo)
    expect(info.isFIFO()).toBe(true)
    expect(info.mode & 0o777).toBe(0o600)
    expect(readlinkSync(`/proc/${child.pid}/fd/0`)).toBe(stdinFifo)
    expect(readdirSync(`/proc/${keeper}/fd`).map((fd) => readlinkSync(`/proc/${keeper}/fd/${fd}`))).toContain(stdinFifo)
    // The keeper now catches SIGUSR1 (it ignores it when it holds no FIFO).
    const caught = BigInt(`0x${/^SigCgt:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${keeper}/status`, 'utf8'))![1]}`)
    expect(caught & (1n << BigInt(constants.signals.SIGUSR1 - 1))).not.toBe(0n)

    const writer = openSync(stdinFifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
    writeSync(writer, 'through the fifo\n')
    closeSync(writer)
    await waitFor('cat to copy the line', () => readFileSync(join(dir, 'output.log'), 'utf8') === 'through the fifo\n')
    // No writer is left but the keeper: cat still waits.
    expect(isAlive(child.pid)).toBe(true)
    process.kill(keeper, 'SIGUSR1')
    expect(await child.exited).toEqual({ exitCode: 0, signal: null })
    await keeperGone(child.keeper!)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: child.pid, exitCode: 0 })
  })

  test('a path that is not a FIFO fails at stage stdin, and nothing is left running', async () => {
    const dir = freshDir()
    const stdinFifo = join(dir, 'input.fifo')
    writeFileSync(stdinFifo, 'not a pipe')
    const outcome = await spawner.spawn(request({ file: '/bin/cat', argv: ['cat'], cwd: dir, stdinFifo }))
    expect(outcome).toEqual({ started: false, stage: 'stdin', code: 'ENXIO', message: `the task's stdin pipe is not a FIFO: ${stdinFifo}` })
    expect(existsSync(join(dir, 'output.log'))).toBe(false)
  })

  test('a relative stdinFifo is refused as a bad request without disturbing the helper', async () => {
    const outcome = await spawner.spawn(request({ file: '/bin/true', stdinFifo: 'relative/input.fifo' }))
    expect(outcome).toMatchObject({ started: false, stage: 'request', code: 'EINVAL', message: expect.stringContaining('stdinFifo must be an absolute path') })
    expect((await run(request({ file: '/bin/true' }))).exitCode).toBe(0)
  })
})
