// Bench: downloads of 1 GiB from a loopback upstream, directly and through tend's egress proxy
// (CONNECT, and a transparent connection to a synthetic address), alternating; then the time a
// connection through CONNECT adds before the first byte comes back. The upstream and the client
// are child processes of their own, as a task and a server are; only the proxy runs here.
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { once } from 'node:events'
import { EGRESS_HIGH_WATER_MARK_BYTES, EgressProxy } from '../dist/daemon/network/egress/index.js'
import { parseAllowList } from '../dist/daemon/network/allowlist.js'
import { GiB, median, RUNS, row, runIfMain } from './lib.js'

const LATENCY_ROUNDS = Number(process.env.BENCH_EGRESS_CONNECTS ?? 200)
const TARGET_CONNECT_MS = 1

// The upstream: on each connection, once the client's first line arrives, 1 GiB then the end
// (or, for a line `ECHO`, one byte back: the latency probe). Prints its port.
const UPSTREAM = `
const net = require('node:net')
const chunk = Buffer.alloc(4 * 1024 * 1024, 120)
const server = net.createServer((socket) => {
  socket.on('error', () => {})
  socket.once('data', (line) => {
    if (line.toString().startsWith('ECHO')) return void socket.end('e')
    let left = ${GiB}
    const write = () => {
      while (left > 0) {
        const size = Math.min(left, chunk.length)
        left -= size
        if (!socket.write(size === chunk.length ? chunk : chunk.subarray(0, size))) return void socket.once('drain', write)
      }
      socket.end()
    }
    write()
  })
})
server.listen(0, '127.0.0.1', () => console.log(server.address().port))
`

// The client: connects to HOST:PORT (through CONNECT to TARGET when given), sends SEND, counts to
// the end; prints milliseconds from connect to the last byte.
const CLIENT = `
const net = require('node:net')
const [port, target] = process.argv.slice(1)
const start = process.hrtime.bigint()
const socket = net.connect({ host: '127.0.0.1', port: Number(port) })
let bytes = 0
let tunnel = target === undefined
let head = ''
socket.on('connect', () => socket.write(target ? 'CONNECT ' + target + ' HTTP/1.1\\r\\nHost: ' + target + '\\r\\n\\r\\n' : 'SEND\\n'))
socket.on('data', (chunk) => {
  if (!tunnel) {
    head += chunk.toString('latin1')
    if (!head.includes('\\r\\n\\r\\n')) return
    if (!head.startsWith('HTTP/1.1 200')) throw new Error('CONNECT answered ' + head)
    tunnel = true
    return void socket.write('SEND\\n')
  }
  bytes += chunk.length
})
socket.on('end', () => {
  if (bytes !== ${GiB}) throw new Error('received ' + bytes + ' bytes')
  console.log(Number(process.hrtime.bigint() - start) / 1e6)
})
`

function startUpstream() {
  const child = spawn(process.execPath, ['-e', UPSTREAM], { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.stdout.once('data', (line) => resolve({ port: Number(String(line).trim()), stop: () => child.kill() }))
  })
}

function download(port, target) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', CLIENT, String(port), ...(target ? [target] : [])], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    child.once('error', reject)
    child.once('close', (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`download client exited ${code}`))))
  })
}

/** Milliseconds from connect to the upstream's one-byte answer, directly or through CONNECT (in this process). */
async function probe(port, target) {
  const { connect } = await import('node:net')
  const start = process.hrtime.bigint()
  const socket = connect({ host: '127.0.0.1', port, noDelay: true })
  await once(socket, 'connect')
  if (target) {
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
    let head = ''
    while (!head.includes('\r\n\r\n')) head += (await once(socket, 'data'))[0].toString('latin1')
    if (!head.startsWith('HTTP/1.1 200')) throw new Error(`CONNECT answered ${head}`)
  }
  socket.write('ECHO\n')
  await once(socket, 'data')
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  socket.destroy()
  return ms
}

export async function egressProxy({ runs = RUNS, log = console.log } = {}) {
  const upstream = await startUpstream()
  const name = 'bench.example'
  const target = `${name}:${upstream.port}`
  const task = { id: 'bench', network: 'allow', allow: parseAllowList([target], 'bench').entries }
  let decisions = 0
  const proxy = new EgressProxy({ hosts: { [name]: '127.0.0.1' }, attribute: async () => task, record: () => decisions++ })
  const proxyListener = createServer({ highWaterMark: EGRESS_HIGH_WATER_MARK_BYTES }, (socket) => proxy.acceptProxy(socket))
  const transparentListener = createServer({ highWaterMark: EGRESS_HIGH_WATER_MARK_BYTES }, (socket) => proxy.acceptTransparent(socket, name, upstream.port))
  await Promise.all([proxyListener, transparentListener].map((server) => new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))))
  const proxyPort = proxyListener.address().port
  const transparentPort = transparentListener.address().port
  const times = { direct: [], connect: [], transparent: [] }
  try {
    for (let i = 0; i < runs; i++) {
      times.direct.push(await download(upstream.port))
      times.connect.push(await download(proxyPort, target))
      times.transparent.push(await download(transparentPort))
      log(
        `  egress 1 GiB run ${i + 1}/${runs}: direct ${times.direct.at(-1).toFixed(0)} ms, CONNECT ${times.connect.at(-1).toFixed(0)} ms, transparent ${times.transparent.at(-1).toFixed(0)} ms`,
      )
    }
    const firstDirect = await probe(upstream.port)
    const firstProxied = await probe(proxyPort, target)
    const direct = []
    const proxied = []
    for (let i = 0; i < LATENCY_ROUNDS; i++) {
      direct.push(await probe(upstream.port))
      proxied.push(await probe(proxyPort, target))
    }
    log(
      `  egress connect: direct ${median(direct).toFixed(3)} ms, CONNECT ${median(proxied).toFixed(3)} ms (medians of ${LATENCY_ROUNDS}; the very first: ${firstDirect.toFixed(2)} ms, ${firstProxied.toFixed(2)} ms); ${decisions} decisions recorded`,
    )
    const rate = (ms) => 1024 / (median(ms) / 1000)
    const rows = ['connect', 'transparent'].map((via) => {
      const ratio = rate(times[via]) / rate(times.direct)
      return row({
        bench: `egress proxy 1 GiB download, ${via === 'connect' ? 'CONNECT' : 'transparent'}`,
        value: rate(times[via]),
        baseline: rate(times.direct),
        unit: 'MiB/s',
        ratio,
        target: '>= 0.90x',
        pass: ratio >= 0.9,
      })
    })
    const added = median(proxied) - median(direct)
    rows.push(
      row({
        bench: 'egress proxy connect to first byte, CONNECT',
        value: median(proxied),
        baseline: median(direct),
        unit: 'ms',
        ratio: median(proxied) / median(direct),
        target: `<= direct + ${TARGET_CONNECT_MS} ms`,
        pass: added <= TARGET_CONNECT_MS,
      }),
    )
    return rows
  } finally {
    proxy.close()
    proxyListener.close()
    transparentListener.close()
    upstream.stop()
  }
}

await runIfMain(import.meta.url, egressProxy)
