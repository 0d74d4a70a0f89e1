// Bench: `client.list({all: true})` with 1,000 finished tasks in the spool, against a one-task
// `client.get()` on the same daemon (the fixed cost of a request), alternating; medians.
import { elapsedMs, median, row, runIfMain, startDaemon, tempDir } from './lib.js'
import { rmSync } from 'node:fs'

const TASKS = Number(process.env.BENCH_LIST_TASKS ?? 1000)
const ROUNDS = Number(process.env.BENCH_LIST_ROUNDS ?? 60)
const CONCURRENCY = 8
const TARGET_MS = 20

/** Runs `count` `true` tasks to their end, CONCURRENCY at a time; they stay in the spool. */
async function fill(client, cwd, count) {
  let next = 0
  const worker = async () => {
    while (next < count) {
      next += 1
      const task = await client.start({ command: ['true'], cwd })
      const ended = await client.wait(task.id)
      if (ended.state !== 'exited' || ended.exitCode !== 0) throw new Error(`a filler task ended ${ended.state} (exit ${ended.exitCode}): ${ended.reason}`)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
}

async function timed(call) {
  const start = process.hrtime.bigint()
  const result = await call()
  return { ms: elapsedMs(start), result }
}

export async function listLatency({ tasks = TASKS, rounds = ROUNDS, log = console.log } = {}) {
  const daemon = await startDaemon('list', { TEND_CONCURRENCY: String(CONCURRENCY), TEND_PER_OWNER_CONCURRENCY: String(CONCURRENCY), TEND_SANDBOX: 'off' })
  const cwd = tempDir('list-cwd')
  const all = []
  const running = []
  const one = []
  try {
    await fill(daemon.client, cwd, tasks)
    const [sample] = await daemon.client.list({ all: true })
    // Untimed rounds first: a long-lived daemon has answered lists before.
    for (let i = 0; i < 5; i++) await daemon.client.list({ all: true })
    for (let i = 0; i < rounds; i++) {
      one.push((await timed(() => daemon.client.get(sample.id))).ms)
      const listed = await timed(() => daemon.client.list({ all: true }))
      if (listed.result.length !== tasks) throw new Error(`list answered ${listed.result.length} tasks, expected ${tasks}`)
      all.push(listed.ms)
      const current = await timed(() => daemon.client.list())
      if (current.result.length !== 0) throw new Error(`list without all answered ${current.result.length} tasks, expected none`)
      running.push(current.ms)
    }
    log(
      `  list: ${tasks} tasks ${median(all).toFixed(2)} ms, running only (none) ${median(running).toFixed(2)} ms, one get() ${median(one).toFixed(2)} ms (medians of ${rounds})`,
    )
  } finally {
    await daemon.stop()
    rmSync(cwd, { recursive: true, force: true })
  }
  return [
    row({
      bench: `list --all, ${tasks} finished tasks`,
      value: median(all),
      baseline: median(one),
      unit: 'ms',
      ratio: median(all) / median(one),
      target: `<= ${TARGET_MS} ms`,
      pass: median(all) <= TARGET_MS,
    }),
    row({
      bench: `  list (running only) of those`,
      value: median(running),
      baseline: median(one),
      unit: 'ms',
      ratio: median(running) / median(one),
      target: '(info)',
      pass: true,
    }),
  ]
}

await runIfMain(import.meta.url, listLatency)
