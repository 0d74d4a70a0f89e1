// Bench: what live figures cost the daemon. 1,000 running tasks (sleepers), listed once a second as
// the console does: with `live: true` (every task sampled each second) against without (the same
// list, nothing sampled), alternating windows; the daemon's own CPU time (utime + stime from its
// /proc stat) in each. The difference is what sampling costs, as a share of one core.
import { readFileSync, rmSync } from 'node:fs'
import { setTimeout as delay } from 'node:timers/promises'
import { row, runIfMain, startDaemon, tempDir } from './lib.js'

const TASKS = Number(process.env.BENCH_LIVE_TASKS ?? 1000)
/** Seconds per window; each kind gets WINDOWS of them, alternating. */
const WINDOW_S = Number(process.env.BENCH_LIVE_WINDOW_S ?? 10)
const WINDOWS = Number(process.env.BENCH_LIVE_WINDOWS ?? 3)
const TARGET_PERCENT = 1
/** USER_HZ: /proc's CPU times are in hundredths of a second. */
const TICKS_PER_SECOND = 100

function cpuSeconds(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
}

/** Lists once a second for WINDOW_S seconds; answers the daemon's CPU seconds and the wall seconds it took. */
async function window(daemon, live) {
  const startCpu = cpuSeconds(daemon.pid)
  const startMs = Date.now()
  for (let second = 1; second <= WINDOW_S; second++) {
    const tasks = await daemon.client.list({ live })
    if (tasks.length !== TASKS) throw new Error(`list answered ${tasks.length} tasks, expected ${TASKS} running`)
    if (live && tasks.some((task) => !task.live)) throw new Error('a running task came without live figures')
    await delay(Math.max(0, startMs + second * 1000 - Date.now()))
  }
  return { cpu: cpuSeconds(daemon.pid) - startCpu, wall: (Date.now() - startMs) / 1000 }
}

export async function liveUsage({ tasks = TASKS, log = console.log } = {}) {
  const slots = String(tasks + 10)
  const daemon = await startDaemon('live', { TEND_CONCURRENCY: slots, TEND_PER_OWNER_CONCURRENCY: slots, TEND_SANDBOX: 'off' })
  const cwd = tempDir('live-cwd')
  const measured = { plain: { cpu: 0, wall: 0 }, live: { cpu: 0, wall: 0 } }
  try {
    for (let i = 0; i < tasks; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, tasks - i) }, () => daemon.client.start({ command: ['sleep', '3600'], cwd })))
    }
    for (;;) {
      const running = (await daemon.client.list()).filter((task) => task.state === 'running').length
      if (running === tasks) break
      await delay(200)
    }
    // One untimed round of each: the first live list samples every task for the first time.
    await window(daemon, false)
    await window(daemon, true)
    for (let i = 0; i < WINDOWS; i++) {
      for (const kind of ['plain', 'live']) {
        const { cpu, wall } = await window(daemon, kind === 'live')
        measured[kind].cpu += cpu
        measured[kind].wall += wall
      }
    }
  } finally {
    await daemon.stop()
    rmSync(cwd, { recursive: true, force: true })
  }
  const percent = (kind) => (100 * measured[kind].cpu) / measured[kind].wall
  const cost = percent('live') - percent('plain')
  log(
    `  live usage: ${tasks} running tasks listed each second: daemon CPU ${percent('plain').toFixed(2)}% of a core without live, ${percent('live').toFixed(2)}% with (${WINDOWS} windows of ${WINDOW_S} s each)`,
  )
  return [
    row({
      bench: `live figures of ${tasks} running tasks, asked each second`,
      value: cost,
      baseline: percent('plain'),
      unit: '% of a core',
      target: `<= ${TARGET_PERCENT}%`,
      pass: cost <= TARGET_PERCENT,
    }),
  ]
}

await runIfMain(import.meta.url, liveUsage)
