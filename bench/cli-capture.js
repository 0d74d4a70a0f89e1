// CLI capture: 1 GiB of task output through the CLI (`tend run`, then `tend wait` on the id it
// printed) vs a shell redirect into a file, as bench/output-capture.js does through the client.
import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { elapsedMs, GiB, median, row, run, RUNS, runCli, runIfMain, startDaemon, TEND_BIN, tempDir } from './lib.js'

const COMMAND = ['head', '-c', '1G', '/dev/zero']

/** One CLI run: from spawning `tend run` until `tend wait` exits; the spool is deleted after, untimed. */
async function tendOnce(daemon, options) {
  const start = process.hrtime.bigint()
  const { stdout } = await runCli(['run', '--', ...COMMAND], options)
  await runCli(['wait', stdout.trim()], options)
  const ms = elapsedMs(start)
  const ended = await daemon.client.get(stdout.trim())
  await daemon.client.remove(ended.id)
  await settleDisk()
  if (ended.state !== 'exited' || ended.exitCode !== 0 || ended.outputBytes !== GiB) {
    throw new Error(`capture task ended ${ended.state} (exit ${ended.exitCode}) with ${ended.outputBytes} bytes`)
  }
  return ms
}

/** The reference: `sh -c 'head -c 1G /dev/zero > file'`, into a fresh folder inside the spool (see output-capture.js). */
async function shellOnce(home) {
  const dir = mkdtempSync(join(home, 'spool', 'baseline-'))
  const start = process.hrtime.bigint()
  const code = await run('sh', ['-c', `${COMMAND.join(' ')} > '${join(dir, 'redirect.out')}'`])
  const ms = elapsedMs(start)
  rmSync(dir, { recursive: true, force: true })
  await settleDisk()
  if (code !== 0) throw new Error(`shell redirect exited ${code}`)
  return ms
}

/** Untimed, after every deleted 1 GiB file: no writeback pending from the last run (see output-capture.js). */
async function settleDisk() {
  const code = await run('sync', [])
  if (code !== 0) throw new Error(`sync exited ${code}`)
}

export async function cliCapture({ runs = RUNS, log = console.log, bin = TEND_BIN } = {}) {
  const daemon = await startDaemon('cli-capture', { TEND_MAX_OUTPUT: '2G' }, { bin })
  const workspace = tempDir('cli-capture-ws')
  const options = { env: { ...process.env, TEND_HOME: daemon.home }, cwd: workspace, bin }
  const tend = []
  const shell = []
  try {
    for (let i = 0; i < runs; i++) {
      shell.push(await shellOnce(daemon.home))
      tend.push(await tendOnce(daemon, options))
      log(`  cli capture run ${i + 1}/${runs}: shell ${shell.at(-1).toFixed(0)} ms, tend run + wait ${tend.at(-1).toFixed(0)} ms`)
    }
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  const rate = (ms) => 1024 / (ms / 1000)
  const value = rate(median(tend))
  const baseline = rate(median(shell))
  const ratio = value / baseline
  return [row({ bench: 'cli capture 1 GiB (run + wait)', value, baseline, unit: 'MiB/s', ratio, target: '>= 0.90x', pass: ratio >= 0.9 })]
}

await runIfMain(import.meta.url, cliCapture)
