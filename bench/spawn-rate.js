// Bench 2: 500 `true` tasks through the client vs 500 child_process.spawn('true') at the same parallelism.
// With BENCH_REFERENCE_TREE (another checkout, built), the same tasks through that tree's daemon too,
// in turn with this one's, for a side-by-side ratio (a change's cost, on a noisy machine).
import { join } from 'node:path'
import { elapsedMs, median, row, run, runIfMain, startDaemon, warmUp } from './lib.js'

const TASKS = Number(process.env.BENCH_TASKS ?? 500)
const CONCURRENCY = 8

/**
 * Submits every task at once, then waits for every one; timed from the first start() to the last
 * wait(). The finished tasks stay in the spool (as in use) and are removed after the last run.
 */
async function tendOnce(client, cwd, finished) {
  const start = process.hrtime.bigint()
  const tasks = await Promise.all(Array.from({ length: TASKS }, () => client.start({ command: ['true'], cwd })))
  const ended = await Promise.all(tasks.map((task) => client.wait(task.id)))
  const ms = elapsedMs(start)
  const bad = ended.filter((task) => task.state !== 'exited' || task.exitCode !== 0)
  if (bad.length > 0) throw new Error(`${bad.length} tasks did not exit 0, e.g. ${JSON.stringify(bad[0])}`)
  finished.push(...ended.map((task) => task.id))
  return ms
}

/** The same number of `true` processes from a plain Node loop: CONCURRENCY workers, each spawn then await exit. */
async function plainOnce() {
  let next = 0
  const worker = async () => {
    while (next < TASKS) {
      next += 1
      const code = await run('true', [])
      if (code !== 0) throw new Error(`true exited ${code}`)
    }
  }
  const start = process.hrtime.bigint()
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  return elapsedMs(start)
}

export async function spawnRate({ runs = Number(process.env.BENCH_RUNS ?? 5), log = console.log, referenceTree = process.env.BENCH_REFERENCE_TREE } = {}) {
  // Sandbox off: this measures tend's own spawn path against a plain spawn; bench/sandbox-start.js measures the sandbox.
  const settings = { TEND_CONCURRENCY: String(CONCURRENCY), TEND_PER_OWNER_CONCURRENCY: String(CONCURRENCY), TEND_SANDBOX: 'off' }
  const daemon = await startDaemon('spawn', settings)
  const reference = referenceTree ? await startDaemon('spawn-ref', settings, { bin: join(referenceTree, 'bin', 'tend.js') }) : null
  const tend = []
  const plain = []
  const other = []
  const finished = []
  const otherFinished = []
  try {
    await warmUp(daemon.client, daemon.home, 20)
    if (reference) await warmUp(reference.client, reference.home, 20)
    // One untimed round of each side first: a long-lived daemon has run this path many times (its
    // code is optimized by then), and the plain loop gets the same chance.
    await plainOnce()
    await tendOnce(daemon.client, daemon.home, finished)
    if (reference) await tendOnce(reference.client, reference.home, otherFinished)
    for (let i = 0; i < runs; i++) {
      plain.push(await plainOnce())
      if (reference) other.push(await tendOnce(reference.client, reference.home, otherFinished))
      tend.push(await tendOnce(daemon.client, daemon.home, finished))
      log(
        `  spawn run ${i + 1}/${runs}: plain ${plain.at(-1).toFixed(0)} ms,${reference ? ` reference ${other.at(-1).toFixed(0)} ms,` : ''} tend ${tend.at(-1).toFixed(0)} ms for ${TASKS} tasks`,
      )
    }
    for (const id of finished) await daemon.client.remove(id)
    if (reference) for (const id of otherFinished) await reference.client.remove(id)
  } finally {
    await daemon.stop()
    await reference?.stop()
  }
  const rate = (ms) => TASKS / (ms / 1000)
  const value = rate(median(tend))
  const baseline = rate(median(plain))
  const ratio = value / baseline
  const rows = [row({ bench: `${TASKS} true tasks (x${CONCURRENCY})`, value, baseline, unit: 'tasks/s', ratio, target: '>= 0.70x', pass: ratio >= 0.7 })]
  if (reference) {
    const referenceRate = rate(median(other))
    rows.push(
      row({
        bench: `  vs the reference tree`,
        value,
        baseline: referenceRate,
        unit: 'tasks/s',
        ratio: value / referenceRate,
        target: '>= 0.95x',
        pass: value / referenceRate >= 0.95,
      }),
    )
  }
  return rows
}

await runIfMain(import.meta.url, spawnRate)
