// Bench: a cluster task against a local one. Per-task overhead: one `true` at a time, submitted
// and waited for through the cluster's queue (Redis, two workers) and through a local daemon's
// socket, alternating; medians. The same through the cluster with retries 1 (the task ends with
// its worker and is held to a lease) against retries 0. A kill: from the submitter until the worker has stopped the task.
// Throughput: 1,000 `true` tasks submitted at once, then waited for,
// on two workers against one local daemon. A real redis-server on a loopback port (Debian's).
import { spawn } from 'node:child_process'
import { connect, createServer } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { ClusterClient } from '../dist/client/cluster/index.js'
import { elapsedMs, median, row, runIfMain, startDaemon, tempDir } from './lib.js'
import { rmSync } from 'node:fs'

const ONE_AT_A_TIME = Number(process.env.BENCH_CLUSTER_TASKS ?? 50)
const BURST = Number(process.env.BENCH_CLUSTER_BURST ?? 1000)
const KILLS = Number(process.env.BENCH_CLUSTER_KILLS ?? 10)
const KILL_TARGET_MS = 100
const SETTINGS = {
  TEND_SANDBOX: 'off',
  TEND_CONCURRENCY: '16',
  TEND_PER_OWNER_CONCURRENCY: '16',
  TEND_CLUSTER_CONCURRENCY: '16',
  TEND_CLUSTER_ALLOW_SANDBOX: 'off',
}

async function freePort() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

async function startRedis() {
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  for (const deadline = Date.now() + 10_000; ; await delay(20)) {
    const up = await new Promise((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('error', () => resolve(false))
      socket.once('connect', () => {
        socket.destroy()
        resolve(true)
      })
    })
    if (up) break
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${port} within 10 s`)
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGTERM')
      await exited
    },
  }
}

async function clusterOnce(cluster, cwd, retries = 0) {
  const start = process.hrtime.bigint()
  const { id } = await cluster.start({ command: ['true'], cwd, sandbox: 'off', retries })
  const done = await cluster.wait(id, { timeoutMs: 30_000 })
  if (done.task?.state !== 'exited') throw new Error(`cluster task ${id} ended ${done.state}: ${done.reason}`)
  return elapsedMs(start)
}

async function localOnce(client, cwd) {
  const start = process.hrtime.bigint()
  const task = await client.start({ command: ['true'], cwd })
  const ended = await client.wait(task.id)
  if (ended.state !== 'exited') throw new Error(`local task ended ${ended.state}`)
  return elapsedMs(start)
}

export async function clusterBench({ log = console.log } = {}) {
  const redis = await startRedis()
  const cwd = tempDir('cluster-cwd')
  const workers = []
  let local
  let cluster
  try {
    for (const name of ['one', 'two'])
      workers.push(await startDaemon(`cluster-${name}`, { ...SETTINGS, TEND_CLUSTER_REDIS: redis.url, TEND_CLUSTER_NAME: name }))
    local = await startDaemon('cluster-local', SETTINGS)
    cluster = new ClusterClient(redis.url)
    for (let i = 0; i < 10; i++) {
      await clusterOnce(cluster, cwd)
      await localOnce(local.client, cwd)
    }
    const viaCluster = []
    const viaLocal = []
    const retried = []
    for (let i = 0; i < ONE_AT_A_TIME; i++) {
      viaLocal.push(await localOnce(local.client, cwd))
      viaCluster.push(await clusterOnce(cluster, cwd))
      retried.push(await clusterOnce(cluster, cwd, 1))
    }
    log(
      `  one task: cluster ${median(viaCluster).toFixed(2)} ms, local ${median(viaLocal).toFixed(2)} ms, cluster with retries 1 ${median(retried).toFixed(2)} ms (medians of ${ONE_AT_A_TIME})`,
    )

    // A kill from the submitter until the worker has stopped the task (polled on its socket).
    const killMs = []
    for (let i = 0; i < KILLS; i++) {
      const { id } = await cluster.start({ command: ['sleep', '1000'], cwd, sandbox: 'off' })
      let holder
      for (const deadline = Date.now() + 10_000; !holder; await delay(5)) {
        const taken = await cluster.get(id)
        if (taken.state === 'running') holder = workers[taken.worker === 'one' ? 0 : 1]
        if (Date.now() > deadline) throw new Error(`cluster task ${id} did not start within 10 s`)
      }
      const start = process.hrtime.bigint()
      const killed = cluster.kill(id, { signal: 'SIGKILL' })
      while ((await holder.client.get(id)).state === 'running') await delay(1)
      killMs.push(elapsedMs(start))
      await killed
    }
    log(`  kill: ${median(killMs).toFixed(1)} ms until the worker had stopped the task (median of ${KILLS})`)

    let start = process.hrtime.bigint()
    const submitted = await Promise.all(Array.from({ length: BURST }, () => cluster.start({ command: ['true'], cwd, sandbox: 'off' })))
    await Promise.all(submitted.map((task) => cluster.wait(task.id, { timeoutMs: 300_000 })))
    const clusterRate = BURST / (elapsedMs(start) / 1000)
    start = process.hrtime.bigint()
    const started = await Promise.all(Array.from({ length: BURST }, () => local.client.start({ command: ['true'], cwd })))
    await Promise.all(started.map((task) => local.client.wait(task.id)))
    const localRate = BURST / (elapsedMs(start) / 1000)
    log(`  ${BURST} tasks: two workers ${clusterRate.toFixed(0)}/s, one local daemon ${localRate.toFixed(0)}/s`)
    return [
      row({
        bench: 'cluster task, true, one at a time',
        value: median(viaCluster),
        baseline: median(viaLocal),
        unit: 'ms/task',
        ratio: median(viaCluster) / median(viaLocal),
        target: 'reported',
        pass: true,
      }),
      row({
        bench: 'cluster task with retries 1 vs 0, true, one at a time',
        value: median(retried),
        baseline: median(viaCluster),
        unit: 'ms/task',
        ratio: median(retried) / median(viaCluster),
        target: 'reported',
        pass: true,
      }),
      row({
        bench: 'cluster kill, submitter to stopped on its worker',
        value: median(killMs),
        unit: 'ms',
        target: `<= ${KILL_TARGET_MS} ms`,
        pass: median(killMs) <= KILL_TARGET_MS,
      }),
      row({
        bench: `${BURST} true, two workers vs one daemon`,
        value: clusterRate,
        baseline: localRate,
        unit: 'tasks/s',
        ratio: clusterRate / localRate,
        target: 'reported',
        pass: true,
      }),
    ]
  } finally {
    await cluster?.close()
    for (const worker of workers) await worker.stop()
    await local?.stop()
    await redis.stop()
    rmSync(cwd, { recursive: true, force: true })
  }
}

await runIfMain(import.meta.url, clusterBench)
