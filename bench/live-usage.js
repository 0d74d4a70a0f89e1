// Bench: what live figures cost the daemon. 1,000 running tasks (sleepers), listed once a second as
// the console does, alternately with `live: true` (every task sampled) and without (the same list,
// nothing sampled). Each list's cost is the CPU time of the daemon's main thread while it answers
// (/proc/<pid>/schedstat, in ns: the sampling runs there); the difference of the medians, at one
// ask a second, is what sampling costs as a share of one core. The whole daemon's CPU over the run
// is shown too (utime + stime), but it moves with everything else the machine does.
import { readFileSync, rmSync } from 'node:fs'
import { setTimeout as delay } from 'node:timers/promises'
import { median, row, runIfMain, startDaemon, tempDir } from './lib.js'

const TASKS = Number(process.env.BENCH_LIVE_TASKS ?? 1000)
/** Asks of each kind, one a second, alternating. */
const ROUNDS = Number(process.env.BENCH_LIVE_ROUNDS ?? 20)
const TARGET_PERCENT = 1
/** USER_HZ: /proc's CPU times are in hundredths of a second. */
const TICKS_PER_SECOND = 100

/** The daemon's CPU seconds, all threads. */
function cpuSeconds(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND
}

/** The daemon's main thread's time on a CPU, in ns. */
function mainThreadNs(pid) {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])
}

/** One list; answers the main thread's CPU ms while the daemon answered it. */
async function ask(daemon, live) {
  const before = mainThreadNs(daemon.pid)
  const tasks = await daemon.client.list({ live })
  const ms = (mainThreadNs(daemon.pid) - before) / 1e6
  if (tasks.length !== TASKS) throw new Error(`list answered ${tasks.length} tasks, expected ${TASKS} running`)
  if (live && tasks.some((task) => !task.live)) throw new Error('a running task came without live figures')
  if (!live && tasks.some((task) => task.live)) throw new Error('a list that did not ask came with live figures')
  return ms
}

export async function liveUsage({ tasks = TASKS, log = console.log } = {}) {
  const slots = String(tasks + 10)
  const daemon = await startDaemon('live', { TEND_CONCURRENCY: slots, TEND_PER_OWNER_CONCURRENCY: slots, TEND_SANDBOX: 'off' })
  const cwd = tempDir('live-cwd')
  const measured = { plain: [], live: [] }
  let wholeCpu = 0
  let wholeWall = 0
  try {
    for (let i = 0; i < tasks; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, tasks - i) }, () => daemon.client.start({ command: ['sleep', '3600'], cwd })))
    }
    for (;;) {
      const running = (await daemon.client.list()).filter((task) => task.state === 'running').length
      if (running === tasks) break
      await delay(200)
    }
    // Untimed asks first: the first live list opens every task's files.
    for (let i = 0; i < 2; i++) {
      await ask(daemon, false)
      await ask(daemon, true)
      await delay(1000)
    }
    const startCpu = cpuSeconds(daemon.pid)
    const startMs = Date.now()
    for (let second = 0; second < 2 * ROUNDS; second++) {
      const kind = second % 2 === 0 ? 'plain' : 'live'
      measured[kind].push(await ask(daemon, kind === 'live'))
      await delay(Math.max(0, startMs + (second + 1) * 1000 - Date.now()))
    }
    wholeCpu = cpuSeconds(daemon.pid) - startCpu
    wholeWall = (Date.now() - startMs) / 1000
  } finally {
    await daemon.stop()
    rmSync(cwd, { recursive: true, force: true })
  }
  // One ask a second: ms of CPU per ask is tenths of a percent of a core.
  const cost = (median(measured.live) - median(measured.plain)) / 10
  log(
    `  live usage: ${tasks} running tasks, one list a second: ${median(measured.plain).toFixed(1)} ms of the daemon's main thread per list without live, ${median(measured.live).toFixed(1)} ms with (medians of ${ROUNDS} each); the whole daemon used ${((100 * wholeCpu) / wholeWall).toFixed(1)}% of a core meanwhile`,
  )
  return [
    row({
      bench: `live figures of ${tasks} running tasks, asked each second`,
      value: cost,
      baseline: median(measured.plain) / 10,
      unit: '% of a core',
      target: `<= ${TARGET_PERCENT}%`,
      pass: cost <= TARGET_PERCENT,
    }),
  ]
}

await runIfMain(import.meta.url, liveUsage)
