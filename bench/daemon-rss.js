// Bench: the daemon's resident memory idle (warm, no task) and with 1,000 running `sleep` tasks
// (sandbox off, concurrency raised so all of them run). Alternates runs with a reference measured
// in the same minutes: the daemon of another tree when BENCH_REFERENCE_TREE names one (the code
// before a change, built there), else a bare Node process (Node's own floor).
import { spawn } from 'node:child_process'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { median, MiB, row, rssBytes, runIfMain, startDaemon, tempDir, warmUp } from './lib.js'

const TASKS = Number(process.env.BENCH_RSS_TASKS ?? 1000)
const IDLE_TARGET_MIB = 64
const TASKS_TARGET_MIB = 100
const SETTINGS = { TEND_SANDBOX: 'off', TEND_CONCURRENCY: String(TASKS), TEND_PER_OWNER_CONCURRENCY: String(TASKS) }

/** RSS settles over a few hundred ms after a burst (freed pages, timers): the median of 5 samples 100 ms apart. */
async function settledRss(pid) {
  const samples = []
  for (let i = 0; i < 5; i++) {
    await delay(100)
    samples.push(rssBytes(pid))
  }
  return median(samples)
}

/** Polls until `check()` is true; fails naming `what` after `timeoutMs`. */
async function waitUntil(what, timeoutMs, check) {
  for (const deadline = Date.now() + timeoutMs; !(await check()); ) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`)
    await delay(50)
  }
}

/** One daemon: idle RSS after the warm-up, then RSS with TASKS running; every task killed and removed after. */
async function daemonOnce(label, bin) {
  const daemon = await startDaemon(`rss-${label}`, SETTINGS, { bin })
  const { client, pid } = daemon
  const workspace = tempDir('rss-ws')
  const started = []
  try {
    await warmUp(client, workspace)
    const idle = await settledRss(pid)
    for (let i = 0; i < TASKS; i += 50) {
      const batch = Array.from({ length: Math.min(50, TASKS - i) }, () => client.start({ command: ['sleep', '600'], cwd: workspace }))
      started.push(...(await Promise.all(batch)))
    }
    await waitUntil(`${TASKS} tasks running`, 60_000, async () => (await client.list()).filter((task) => task.state === 'running').length === TASKS)
    const busy = await settledRss(pid)
    return { idle, busy }
  } finally {
    for (const task of started) await client.kill(task.id).catch(() => undefined)
    for (const task of started) {
      await client.wait(task.id).catch(() => undefined)
      await client.remove(task.id).catch(() => undefined)
    }
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
}

/** A bare Node process listening on a Unix socket: the floor any Node daemon starts from. */
async function bareNodeOnce() {
  const dir = tempDir('rss-node')
  const script = `require('node:net').createServer().listen(${JSON.stringify(join(dir, 's'))}, () => process.stdout.write('ready'))`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise((resolveExit) => child.once('exit', resolveExit))
  try {
    await new Promise((resolveReady, reject) => {
      child.stdout.once('data', resolveReady)
      child.once('exit', (code) => reject(new Error(`bare node exited with ${code}`)))
    })
    const rss = await settledRss(child.pid)
    return { idle: rss, busy: rss }
  } finally {
    child.kill('SIGKILL')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function daemonRss({ runs = Number(process.env.BENCH_RSS_RUNS ?? 3), log = console.log } = {}) {
  const referenceTree = process.env.BENCH_REFERENCE_TREE
  const referenceName = referenceTree ? `tend at ${referenceTree}` : 'bare node'
  const reference = referenceTree ? () => daemonOnce('reference', join(referenceTree, 'bin', 'tend.js')) : bareNodeOnce
  const tend = []
  const other = []
  for (let i = 0; i < runs; i++) {
    other.push(await reference())
    tend.push(await daemonOnce('tend'))
    const mib = (bytes) => (bytes / MiB).toFixed(1)
    log(
      `  rss run ${i + 1}/${runs}: ${referenceName} ${mib(other.at(-1).idle)} / ${mib(other.at(-1).busy)} MiB, tend ${mib(tend.at(-1).idle)} / ${mib(tend.at(-1).busy)} MiB (idle / ${TASKS} tasks)`,
    )
  }
  const pick = (results, key) => median(results.map((result) => result[key])) / MiB
  const idle = pick(tend, 'idle')
  const busy = pick(tend, 'busy')
  const idleRef = pick(other, 'idle')
  const busyRef = pick(other, 'busy')
  return [
    row({
      bench: `daemon RSS idle (vs ${referenceName})`,
      value: idle,
      baseline: idleRef,
      unit: 'MiB',
      ratio: idle / idleRef,
      target: `<= ${IDLE_TARGET_MIB} MiB`,
      pass: idle <= IDLE_TARGET_MIB,
    }),
    row({
      bench: `daemon RSS, ${TASKS} running (vs ${referenceName})`,
      value: busy,
      baseline: busyRef,
      unit: 'MiB',
      ratio: busy / busyRef,
      target: `<= ${TASKS_TARGET_MIB} MiB`,
      pass: busy <= TASKS_TARGET_MIB,
    }),
  ]
}

await runIfMain(import.meta.url, daemonRss)
