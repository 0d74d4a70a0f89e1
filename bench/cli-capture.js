// CLI capture: 1 GiB of task output through the CLI (`tend run`, then `tend wait` on the id it
// printed) vs a shell redirect into a file, as bench/output-capture.js does through the client.
import { rmSync } from 'node:fs'
import { alternateCaptures, elapsedMs, GiB, RUNS, runCli, runIfMain, settleDisk, shellRedirectOnce, startDaemon, TEND_BIN, tempDir } from './lib.js'

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

export async function cliCapture({ runs = RUNS, log = console.log, bin = TEND_BIN } = {}) {
  const daemon = await startDaemon('cli-capture', { TEND_MAX_OUTPUT: '2G' }, { bin })
  const workspace = tempDir('cli-capture-ws')
  const options = { env: { ...process.env, TEND_HOME: daemon.home }, cwd: workspace, bin }
  try {
    return [
      await alternateCaptures({
        bench: 'cli capture 1 GiB (run + wait)',
        runs,
        log,
        reference: { name: 'shell', once: () => shellRedirectOnce(daemon.home, COMMAND.join(' ')) },
        tend: { name: 'tend run + wait', once: () => tendOnce(daemon, options) },
      }),
    ]
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
}

await runIfMain(import.meta.url, cliCapture)
