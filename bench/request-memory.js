// Bench: the daemon's RSS growth over a storm of API requests, most of them refused (wrong types,
// unknown fields, broken JSON, deep nesting, unknown ids and routes) and some real (start, read,
// wait, remove), after a warm-up of the same mix. A daemon that keeps something per request grows
// here; test/faults/fuzz.test.ts sends the same kinds of requests for correctness only.
import { rmSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { join } from 'node:path'
import { MiB, row, rssBytes, runIfMain, startDaemon, tempDir } from './lib.js'

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 10_000)
const WARMUP = 1_000
const CONNECTIONS = 4
const LIMIT_MIB = 10

/** One request over the daemon's socket; resolves with its status and body. */
function send(socketPath, agent, { method, path, body }) {
  return new Promise((resolveSend, reject) => {
    const headers = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
    const req = request({ socketPath, agent, method, path, headers }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolveSend({ status: res.statusCode, text }))
      res.on('error', reject)
    })
    req.once('error', reject)
    req.end(body)
  })
}

/** The n-th request of the mix: refused requests of every kind, then a real task now and then. */
function nth(n, cwd) {
  const id = 'a'.repeat(12) // the shape of a task id, of no task
  const deep = `${'['.repeat(2000)}${']'.repeat(2000)}`
  const mix = [
    { method: 'POST', path: '/v1/tasks', body: JSON.stringify({ command: ['true'], cwd, unknown: n }) },
    { method: 'POST', path: '/v1/tasks', body: JSON.stringify({ command: n, cwd }) },
    { method: 'POST', path: '/v1/tasks', body: '{"command": [' },
    { method: 'POST', path: '/v1/tasks', body: JSON.stringify({ command: ['true'], cwd, timeoutMs: 1e308 }) },
    { method: 'POST', path: '/v1/tasks', body: deep },
    { method: 'GET', path: `/v1/tasks/${id}/output?offset=-${n}` },
    { method: 'GET', path: `/v1/tasks/not-an-id-${n}` },
    { method: 'GET', path: `/v1/no-such-route/${n}` },
    { method: 'GET', path: `/v1/tasks?limit=${n}&bogus=1` },
    { method: 'GET', path: '/v1/status' },
    { method: 'GET', path: `/v1/tasks/${id}` },
    { method: 'GET', path: `/v1/tasks/${id}/output?offset=0` },
  ]
  if (n % 50 === 0) return { method: 'POST', path: '/v1/tasks', body: JSON.stringify({ command: ['true'], cwd }), start: true }
  return mix[n % mix.length]
}

/** One daemon (this tree's, or `bin`'s) through the storm: its RSS after the warm-up and at the end. */
async function stormOnce(requests, bin) {
  const daemon = await startDaemon('requests', { TEND_SANDBOX: 'off' }, { bin })
  const { client, pid, home } = daemon
  const workspace = tempDir('requests-ws')
  const socketPath = join(home, 'tend.sock')
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  let started = 0
  let next = 0
  const runUntil = async (end) => {
    const worker = async () => {
      while (next < end) {
        const each = nth(next++, workspace)
        const answer = await send(socketPath, agent, each)
        if (answer.status >= 500) throw new Error(`${each.method} ${each.path} answered ${answer.status}: ${answer.text.slice(0, 300)}`)
        if (!each.start || answer.status !== 201) continue
        // A real task, waited for and removed at once: only what the daemon keeps per request stays.
        const { id } = JSON.parse(answer.text)
        await client.wait(id)
        await client.remove(id)
        started += 1
      }
    }
    await Promise.all(Array.from({ length: CONNECTIONS }, worker))
  }
  let before, after
  try {
    await runUntil(Math.min(WARMUP, requests))
    before = rssBytes(pid)
    await runUntil(requests)
    after = rssBytes(pid)
  } finally {
    agent.destroy()
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  return { before, after, started }
}

/**
 * The growth of this tree's daemon; with BENCH_REFERENCE_TREE (another tree, built), that tree's
 * daemon first, its growth the baseline (else the baseline is the RSS after the warm-up).
 */
export async function requestMemory({ requests = REQUESTS, log = console.log } = {}) {
  const referenceTree = process.env.BENCH_REFERENCE_TREE
  const mib = (bytes) => (bytes / MiB).toFixed(1)
  const reference = referenceTree ? await stormOnce(requests, join(referenceTree, 'bin', 'tend.js')) : undefined
  if (reference) log(`  requests (${referenceTree}): RSS ${mib(reference.before)} MiB after ${WARMUP} requests, ${mib(reference.after)} MiB after ${requests}`)
  const tend = await stormOnce(requests)
  log(`  requests: RSS ${mib(tend.before)} MiB after ${WARMUP} requests, ${mib(tend.after)} MiB after ${requests} (${tend.started} tasks started and removed)`)
  const growth = (tend.after - tend.before) / MiB
  const baseline = reference ? (reference.after - reference.before) / MiB : tend.before / MiB
  const name = `daemon RSS growth, ${requests} requests${referenceTree ? ` (vs ${referenceTree})` : ''}`
  return [
    row({
      bench: name,
      value: growth,
      baseline,
      unit: 'MiB',
      ratio: reference ? growth / baseline : undefined,
      target: `< ${LIMIT_MIB} MiB`,
      pass: growth < LIMIT_MIB,
    }),
  ]
}

await runIfMain(import.meta.url, requestMemory)
