// Bench 3: the daemon's RSS before and after 4 concurrent tasks that write 1 GiB each.
import { rmSync } from 'node:fs'
import { GiB, MiB, row, rssBytes, runIfMain, startDaemon, tempDir, warmUp } from './lib.js'

const TASKS = 4
const COMMAND = ['head', '-c', '1G', '/dev/zero']
const LIMIT_MIB = 20

export async function daemonMemory({ log = console.log } = {}) {
  const daemon = await startDaemon('memory', { TEND_MAX_OUTPUT: '2G', TEND_CONCURRENCY: String(TASKS), TEND_PER_OWNER_CONCURRENCY: String(TASKS) })
  const { client, pid } = daemon
  // The tasks' cwd: a folder of their own (a sandboxed task may not run in a tend home).
  const workspace = tempDir('memory-ws')
  let before, after, peak
  try {
    await warmUp(client, workspace) // code paths and connections are warm before the first sample
    before = rssBytes(pid)
    peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 50)
    try {
      const tasks = await Promise.all(Array.from({ length: TASKS }, () => client.start({ command: COMMAND, cwd: workspace })))
      const ended = await Promise.all(tasks.map((task) => client.wait(task.id)))
      after = rssBytes(pid)
      peak = Math.max(peak, after)
      for (const task of ended) {
        if (task.state !== 'exited' || task.outputBytes !== GiB) throw new Error(`memory task ended ${task.state} with ${task.outputBytes} bytes`)
        await client.remove(task.id)
      }
    } finally {
      clearInterval(sampler)
    }
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  const growth = (after - before) / MiB
  log(`  memory: RSS before ${(before / MiB).toFixed(1)} MiB, after ${(after / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB`)
  return [
    row({
      bench: `daemon RSS growth, ${TASKS}x1 GiB`,
      value: growth,
      baseline: before / MiB,
      unit: 'MiB',
      target: `< ${LIMIT_MIB} MiB`,
      pass: growth < LIMIT_MIB,
    }),
    row({
      bench: `daemon RSS peak growth`,
      value: (peak - before) / MiB,
      baseline: before / MiB,
      unit: 'MiB',
      target: `< ${LIMIT_MIB} MiB`,
      pass: (peak - before) / MiB < LIMIT_MIB,
    }),
  ]
}

await runIfMain(import.meta.url, daemonMemory)
