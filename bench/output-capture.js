// Bench 1: capture 1 GiB of task output through tend vs a shell redirect into a file.
import { rmSync } from 'node:fs'
import { alternateCaptures, elapsedMs, GiB, RUNS, runIfMain, settleDisk, shellRedirectOnce, startDaemon, tempDir, warmUp } from './lib.js'

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

export async function outputCapture({ runs = RUNS, log = console.log } = {}) {
  const daemon = await startDaemon('capture', { TEND_MAX_OUTPUT: '2G' })
  // The tasks' cwd: a folder of their own (a sandboxed task may not run in a tend home).
  const workspace = tempDir('capture-ws')
  try {
    await warmUp(daemon.client, workspace)
    return [
      await alternateCaptures({
        bench: 'capture 1 GiB',
        runs,
        log,
        reference: { name: 'shell', once: () => shellRedirectOnce(daemon.home, COMMAND.join(' ')) },
        tend: { name: 'tend', once: () => tendOnce(daemon.client, workspace) },
      }),
    ]
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
}

await runIfMain(import.meta.url, outputCapture)
