import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openOutputSnapshot, outputAtPath, readableOutputSize, readOutputRange, tailOffset } from '../../spool/index.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A reader never waits on a file a task holds: a write lease on output.log makes every open for
 * reading wait out the lease-break time (45 s) unless it is non-blocking. The lease is taken by a
 * real process (the kernel signals the holder when a break starts: that must not be this one).
 */

/** How long a read of a leased output may take to be refused: the lease break would take 45 s. */
const REFUSAL_TIMEOUT_MS = 5000

let dir = ''
let holder: ChildProcess | undefined
const output = () => join(dir, 'lease00000001', 'output.log')

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tend-output-read-'))
  mkdirSync(join(dir, 'lease00000001'))
  writeFileSync(output(), 'line one\nline two\n')
  const program = [
    'import fcntl, os, signal, sys',
    'signal.signal(signal.SIGIO, signal.SIG_IGN)',
    'fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)',
    'fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)',
    "print('leased', flush=True)",
    'sys.stdin.read()',
  ].join('\n')
  holder = spawn('python3', ['-c', program, output()], { stdio: ['pipe', 'pipe', 'inherit'] })
  let said = ''
  holder.stdout!.on('data', (chunk: Buffer) => (said += chunk.toString()))
  await waitFor('the lease to be taken', () => said.includes('leased'), 10_000)
})

afterAll(async () => {
  if (holder && holder.exitCode === null) {
    holder.kill('SIGKILL')
    await new Promise((resolve) => holder!.once('exit', resolve))
  }
  rmSync(dir, { recursive: true, force: true })
})

/** Settles within the timeout, naming the read. */
async function settled(what: string, promise: Promise<unknown>): Promise<PromiseSettledResult<unknown>> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>(
    (_resolve, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${REFUSAL_TIMEOUT_MS}ms waiting for ${what}`)), REFUSAL_TIMEOUT_MS)),
  )
  try {
    return (await Promise.race([Promise.allSettled([promise]), timeout]))[0]!
  } finally {
    clearTimeout(timer)
  }
}

describe('reading an output.log a task holds a write lease on', () => {
  test.each([
    ['a range read', () => readOutputRange(output(), 0, 100)],
    ['a tail', () => tailOffset(outputAtPath(output()), 1)],
    ['a download', () => openOutputSnapshot(output())],
  ])('%s is refused at once with TEND_ERR_OUTPUT_BUSY', async (what, read) => {
    expect(await settled(what, read())).toMatchObject({
      status: 'rejected',
      reason: { code: 'TEND_ERR_OUTPUT_BUSY', message: expect.stringContaining('lease') },
    })
  })

  test('its size is still known (a stat breaks no lease)', async () => {
    expect(await readableOutputSize(output())).toBe(18)
  })
})
