// Bench: a foreground `true` through tend (client start() until wait() resolves, sandbox off)
// against a direct child_process.spawn of `true` from Node, one at a time, alternating; medians.
// The figure is the daemon's part of a round trip.
import { rmSync } from 'node:fs'
import { elapsedMs, median, row, run, runIfMain, startDaemon, tempDir, warmUp } from './lib.js'

const TASKS = Number(process.env.BENCH_ROUND_TRIP_TASKS ?? 200)
const TARGET_MS = 2

/** start() until wait() resolves with the ended task; the task is removed afterwards (untimed). */
async function tendOnce(client, cwd, phases) {
  const start = process.hrtime.bigint()
  const task = await client.start({ command: ['true'], cwd })
  phases.admit.push(elapsedMs(start))
  const ended = await client.wait(task.id)
  const ms = elapsedMs(start)
  if (ended.state !== 'exited' || ended.exitCode !== 0) throw new Error(`task ended ${ended.state} (exit ${ended.exitCode}): ${ended.reason}`)
  await client.remove(task.id)
  return ms
}

async function spawnOnce() {
  const start = process.hrtime.bigint()
  const code = await run('true', [])
  const ms = elapsedMs(start)
  if (code !== 0) throw new Error(`true exited ${code}`)
  return ms
}

export async function roundTrip({ tasks = TASKS, log = console.log } = {}) {
  const daemon = await startDaemon('round-trip', { TEND_SANDBOX: 'off' })
  const cwd = tempDir('round-trip-cwd')
  const tend = []
  const plain = []
  const phases = { admit: [] }
  try {
    await warmUp(daemon.client, cwd, 20)
    for (let i = 0; i < 10; i++) await spawnOnce()
    for (let i = 0; i < tasks; i++) {
      plain.push(await spawnOnce())
      tend.push(await tendOnce(daemon.client, cwd, phases))
    }
    log(
      `  round trip: tend ${median(tend).toFixed(2)} ms (start() answered ${median(phases.admit).toFixed(2)} ms), spawn ${median(plain).toFixed(2)} ms, +${(median(tend) - median(plain)).toFixed(2)} ms (medians of ${tasks})`,
    )
  } finally {
    await daemon.stop()
    rmSync(cwd, { recursive: true, force: true })
  }
  const overhead = median(tend) - median(plain)
  return [
    row({
      bench: `round trip, true, sandbox off, x${tasks}`,
      value: median(tend),
      baseline: median(plain),
      unit: 'ms/task',
      ratio: median(tend) / median(plain),
      target: `<= spawn + ${TARGET_MS} ms`,
      pass: overhead <= TARGET_MS,
    }),
  ]
}

await runIfMain(import.meta.url, roundTrip)
