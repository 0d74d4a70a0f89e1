// Shared helpers for the benchmarks: temp homes, a real daemon, timing, medians, the table.
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { constants, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import { TendClient } from '../dist/client/index.js'

export const REPO_ROOT = resolve(import.meta.dirname, '..')
export const TEND_BIN = join(REPO_ROOT, 'bin', 'tend.js')
export const MiB = 1024 ** 2
export const GiB = 1024 ** 3

/** Runs of each side in the alternating benches; BENCH_RUNS overrides. */
export const RUNS = Number(process.env.BENCH_RUNS ?? 7)

export function tempDir(label) {
  return mkdtempSync(join(tmpdir(), `tend-bench-${label}-`))
}

/** Milliseconds since `start` (a process.hrtime.bigint()). */
export function elapsedMs(start) {
  return Number(process.hrtime.bigint() - start) / 1e6
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/** Runs a child to its exit; resolves with its exit code (128+N for signal N), rejects on spawn errors. */
export function run(file, args, options = {}) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(file, args, { stdio: 'ignore', ...options })
    child.once('error', reject)
    child.once('exit', (code, signal) => resolveRun(code ?? 128 + (constants.signals[signal] ?? 0)))
  })
}

/** VmRSS of a process, in bytes. */
export function rssBytes(pid) {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  if (!match) throw new Error(`no VmRSS for pid ${pid}`)
  return Number(match[1]) * 1024
}

/**
 * Starts `tend daemon` in the foreground on a fresh temp TEND_HOME with the given TEND_* settings
 * and waits until it answers. stop() stops it through the client, makes sure the process is gone,
 * and deletes the home (spool included). `bin`: another tree's bin/tend.js (a build of other code,
 * for side-by-side figures).
 */
export async function startDaemon(label, settings = {}, { bin = TEND_BIN } = {}) {
  const home = tempDir(label)
  const env = tendEnv(home, settings)
  // The daemon's stderr is kept and shown only if it fails (fastify prints a deprecation notice).
  // BENCH_DAEMON_NODE_ARGS: extra node flags for the daemon, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.BENCH_DAEMON_NODE_ARGS ?? '').split(' ').filter(Boolean)
  const child = spawn(process.execPath, [...nodeArgs, bin, 'daemon'], { env, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk) => (stderr += chunk))
  const exited = new Promise((resolveExit) => child.once('exit', resolveExit))
  const client = new TendClient({ home, autoStart: false })
  let pid
  try {
    for (const deadline = Date.now() + 15_000; pid === undefined; ) {
      if (child.exitCode !== null) throw new Error(`tend daemon exited with ${child.exitCode}: ${stderr}`)
      pid = await client.status().then(
        (status) => status.pid,
        () => undefined,
      )
      if (pid === undefined) {
        if (Date.now() > deadline) throw new Error(`tend daemon did not answer within 15 s: ${stderr}`)
        await delay(20)
      }
    }
  } catch (error) {
    client.close()
    child.kill('SIGKILL')
    await exited
    rmSync(home, { recursive: true, force: true })
    throw error
  }
  const stop = async () => {
    await client.stopDaemon().catch(() => undefined)
    client.close()
    if (child.exitCode === null && child.signalCode === null) {
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(timer)
    }
    if (child.exitCode !== 0) process.stderr.write(`tend daemon exited with ${child.exitCode ?? child.signalCode}: ${stderr}\n`)
    rmSync(home, { recursive: true, force: true })
  }
  return { home, client, pid, stop }
}

/** This process's environment without any TEND_ setting, then TEND_HOME=home and `settings`. */
export function tendEnv(home, settings = {}) {
  const env = {}
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('TEND_')) env[key] = value
  return Object.assign(env, { TEND_HOME: home, TEND_LOG_LEVEL: 'warn' }, settings)
}

/**
 * Runs the `tend` CLI (`bin`, default this tree's) to its exit, timed from spawn to exit. Resolves
 * with { ms, code, stdout }; a non-zero exit rejects with what it printed.
 */
export function runCli(args, { env, cwd, bin = TEND_BIN } = {}) {
  return new Promise((resolveRun, reject) => {
    const start = process.hrtime.bigint()
    const child = spawn(process.execPath, [bin, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.once('error', reject)
    child.once('close', (code) => {
      const ms = elapsedMs(start)
      if (code !== 0) reject(new Error(`tend ${args.join(' ')} exited ${code}: ${stderr}`))
      else resolveRun({ ms, code, stdout })
    })
  })
}

/** Milliseconds from spawn to exit of `node -e 0`: the floor of any Node command. */
export async function nodeStartMs() {
  const start = process.hrtime.bigint()
  const code = await run(process.execPath, ['-e', '0'])
  if (code !== 0) throw new Error(`node -e 0 exited ${code}`)
  return elapsedMs(start)
}

/** Runs `count` tiny tasks to completion (and forgets them) so the daemon's code paths are warm, as in a long-lived daemon. */
export async function warmUp(client, cwd, count = 10) {
  for (let i = 0; i < count; i++) {
    const task = await client.start({ command: ['true'], cwd })
    await client.wait(task.id)
    await client.remove(task.id)
  }
}

/**
 * Untimed, after every deleted 1 GiB file: `sync`, so each run (either side) starts with no
 * writeback pending from the last one. Single runs still take 1.5-2x longer now and then on this
 * VM's disk; the medians absorb them.
 */
export async function settleDisk() {
  const code = await run('sync', [])
  if (code !== 0) throw new Error(`sync exited ${code}`)
}

/**
 * The reference of the capture benches: `sh -c 'COMMAND > file'`, spawned directly. The file goes
 * into a fresh folder inside the spool, placed by the file system exactly as a task's folder is
 * (the daemon marks the spool a top directory), so both sides write to comparable free space.
 */
export async function shellRedirectOnce(home, command) {
  const dir = mkdtempSync(join(home, 'spool', 'baseline-'))
  const start = process.hrtime.bigint()
  const code = await run('sh', ['-c', `${command} > '${join(dir, 'redirect.out')}'`])
  const ms = elapsedMs(start)
  rmSync(dir, { recursive: true, force: true })
  await settleDisk()
  if (code !== 0) throw new Error(`shell redirect exited ${code}`)
  return ms
}

/**
 * A capture bench's runs: the reference, then tend, `runs` times in turn (same minutes for both),
 * and the row rating each side's median as MiB/s of 1 GiB; the target is 0.9x the reference.
 */
export async function alternateCaptures({ bench, runs, log, reference, tend }) {
  const tendMs = []
  const referenceMs = []
  for (let i = 0; i < runs; i++) {
    referenceMs.push(await reference.once())
    tendMs.push(await tend.once())
    log(`  ${bench} run ${i + 1}/${runs}: ${reference.name} ${referenceMs.at(-1).toFixed(0)} ms, ${tend.name} ${tendMs.at(-1).toFixed(0)} ms`)
  }
  const rate = (ms) => 1024 / (ms / 1000)
  const value = rate(median(tendMs))
  const baseline = rate(median(referenceMs))
  const ratio = value / baseline
  return row({ bench, value, baseline, unit: 'MiB/s', ratio, target: '>= 0.90x', pass: ratio >= 0.9 })
}

/** A result row: what was measured, the baseline it is compared to, and the target. */
export function row({ bench, value, baseline, unit, ratio, target, pass }) {
  return { bench, value, baseline, unit, ratio, target, pass }
}

const fmt = (value) => (typeof value === 'number' ? (Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2)) : String(value ?? '-'))

export function printTable(rows) {
  const header = ['bench', 'tend', 'baseline', 'unit', 'ratio', 'target', 'result']
  const lines = rows.map((r) => [
    r.bench,
    fmt(r.value),
    fmt(r.baseline),
    r.unit,
    r.ratio === undefined ? '-' : `${r.ratio.toFixed(2)}x`,
    r.target,
    r.pass ? 'PASS' : 'MISS',
  ])
  const widths = header.map((title, i) => Math.max(title.length, ...lines.map((line) => line[i].length)))
  const format = (cells) => cells.map((cell, i) => (i === 0 || i === 3 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ')
  console.log(format(header))
  console.log(widths.map((w) => '-'.repeat(w)).join('  '))
  for (const line of lines) console.log(format(line))
}

/** Runs `bench` and prints its table when `moduleUrl` is the script node was started with. */
export async function runIfMain(moduleUrl, bench) {
  if (process.argv[1] && pathToFileURL(resolve(process.argv[1])).href === moduleUrl) {
    printTable(await bench())
  }
}
