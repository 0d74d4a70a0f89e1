// Bench 5: capture 1 GiB shown on a terminal through tend (`tty`) vs util-linux `script` writing it to a file.
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { alternateCaptures, elapsedMs, GiB, run, RUNS, runIfMain, settleDisk, startDaemon, tempDir, warmUp } from './lib.js'

// NUL bytes pass a terminal unchanged (no line ends to translate): exactly 1 GiB reaches the file.
const COMMAND = 'head -c 1G /dev/zero'
// Each side runs ~15 s here (a pseudo-terminal moves ~70 MiB/s): fewer runs than the other benches.
const TERMINAL_RUNS = Math.min(RUNS, 5)

/** One tend run: start() until wait() resolves; the 1 GiB spool is deleted right after. */
async function tendOnce(client, cwd) {
  const start = process.hrtime.bigint()
  const task = await client.start({ command: COMMAND, shell: true, cwd, tty: true })
  const ended = await client.wait(task.id)
  const ms = elapsedMs(start)
  await client.remove(task.id)
  await settleDisk()
  if (ended.state !== 'exited' || ended.exitCode !== 0 || ended.outputBytes !== GiB) {
    throw new Error(`terminal capture task ended ${ended.state} (exit ${ended.exitCode}) with ${ended.outputBytes} bytes`)
  }
  return ms
}

/**
 * One baseline run: `script -q -c CMD FILE`, which runs CMD on a pseudo-terminal and copies what
 * it shows into FILE (and to its own stdout, /dev/null here), spawned directly. The file goes into
 * a fresh folder inside the spool, as a task's output does.
 */
async function scriptOnce(home) {
  const dir = mkdtempSync(join(home, 'spool', 'baseline-'))
  const file = join(dir, 'typescript')
  const start = process.hrtime.bigint()
  const code = await run('script', ['-q', '-c', COMMAND, file])
  const ms = elapsedMs(start)
  const size = statSync(file).size
  rmSync(dir, { recursive: true, force: true })
  await settleDisk()
  if (code !== 0) throw new Error(`script exited ${code}`)
  // script adds a line before and after the session.
  if (size < GiB) throw new Error(`script wrote ${size} bytes, less than 1 GiB`)
  return ms
}

export async function terminalCapture({ runs = TERMINAL_RUNS, log = console.log } = {}) {
  const daemon = await startDaemon('terminal', { TEND_MAX_OUTPUT: '2G' })
  const workspace = tempDir('terminal-ws')
  try {
    await warmUp(daemon.client, workspace)
    return [
      await alternateCaptures({
        bench: 'terminal 1 GiB',
        runs,
        log,
        reference: { name: 'script', once: () => scriptOnce(daemon.home) },
        tend: { name: 'tend', once: () => tendOnce(daemon.client, workspace) },
      }),
    ]
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
}

await runIfMain(import.meta.url, terminalCapture)
