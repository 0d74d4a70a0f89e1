// Bench 1: capture 1 GiB of task output through tend vs a shell redirect into a file.
import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { elapsedMs, GiB, median, row, run, RUNS, runIfMain, startDaemon, tempDir, warmUp } from './lib.js'

const COMMAND = ['head', '-c', '1G', '/dev/zero']

/** One tend run: start() until wait() resolves; the 1 GiB spool is deleted right after. */
async function tendOnce(client, cwd) {
  const start = process.hrtime.bigint()
  const task = await client.start({ command: COMMAND, cwd })
  const ended = await client.wait(task.id)
  const ms = elapsedMs(start)
  await client.remove(task.id)
  await settleDisk()
  if (ended.state !== 'exited' || ended.exitCode !== 0 || ended.outputBytes !== GiB) {
    throw new Error(`capture task ended ${ended.state} (exit ${ended.exitCode}) with ${ended.outputBytes} bytes`)
  }
  return ms
}

/**
 * One baseline run: `sh -c 'head -c 1G /dev/zero > file'`, spawned directly. The file goes into a
 * fresh folder inside the spool, placed by the file system exactly as a task's folder is (the
 * daemon marks the spool a top directory), so both sides write to comparable free space.
 */
async function shellOnce(home) {
  const dir = mkdtempSync(join(home, 'spool', 'baseline-'))
  const file = join(dir, 'redirect.out')
  const start = process.hrtime.bigint()
  const code = await run('sh', ['-c', `${COMMAND.join(' ')} > '${file}'`])
  const ms = elapsedMs(start)
  rmSync(dir, { recursive: true, force: true })
  await settleDisk()
  if (code !== 0) throw new Error(`shell redirect exited ${code}`)
  return ms
}

/**
 * Untimed, after every deleted 1 GiB file: `sync`, so each run (either side) starts with no
 * writeback pending from the last one. Single runs of either side still take 1.5-2x longer now
 * and then on this VM's disk; the median of 7 runs absorbs them.
 */
async function settleDisk() {
  const code = await run('sync', [])
  if (code !== 0) throw new Error(`sync exited ${code}`)
}

export async function outputCapture({ runs = RUNS, log = console.log } = {}) {
  const daemon = await startDaemon('capture', { TEND_MAX_OUTPUT: '2G' })
  // The tasks' cwd: a folder of their own (a sandboxed task may not run in a tend home).
  const workspace = tempDir('capture-ws')
  const tend = []
  const shell = []
  try {
    await warmUp(daemon.client, workspace)
    for (let i = 0; i < runs; i++) {
      shell.push(await shellOnce(daemon.home))
      tend.push(await tendOnce(daemon.client, workspace))
      log(`  capture run ${i + 1}/${runs}: shell ${shell.at(-1).toFixed(0)} ms, tend ${tend.at(-1).toFixed(0)} ms`)
    }
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  const rate = (ms) => 1024 / (ms / 1000)
  const value = rate(median(tend))
  const baseline = rate(median(shell))
  const ratio = value / baseline
  return [row({ bench: 'capture 1 GiB', value, baseline, unit: 'MiB/s', ratio, target: '>= 0.90x', pass: ratio >= 0.9 })]
}

await runIfMain(import.meta.url, outputCapture)
