import { afterAll, afterEach, beforeAll, expect } from 'vitest'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import type { KeeperRef, PinnedDir, SpawnExit, SpawnOutcome, SpawnRequest } from '../../../daemon/spawn/spawner.js'
import { isAlive } from '../../helpers/processes.js'
import { spawnRequest } from '../../helpers/spawn-request.js'
import { waitFor } from '../../helpers/wait-for.js'

/**
 * The native spawner with real processes, shared by the test files beside this one: the C helper
 * (built by `npm run build`) starts every child, so the tests check what the child actually gets
 * (argv, env, descriptors, session, limits, signals) by asking the kernel or the child itself.
 * Each test file that calls useNativeSpawner() gets a spawner of its own (vitest isolates files).
 */

export const binary = NativeSpawner.binaryPath()
export let spawner: NativeSpawner
let scratch: string
/** Long-running children started by a test, killed after it. */
export const leftovers: number[] = []
/** Spawners a test started besides the shared one, closed after it. */
export const extraSpawners: NativeSpawner[] = []

/** Starts the file's spawner before its tests; after each, kills what it left; closes it after all. */
export function useNativeSpawner(): void {
  beforeAll(async () => {
    if (!binary) throw new Error('daemon/spawner/tend-spawner is missing: run `npm run build` (it needs a C compiler)')
    spawner = await NativeSpawner.start(binary)
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tend-native-spawner-')))
  })

  afterEach(async () => {
    for (const pid of leftovers.splice(0)) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
      await waitFor(`leftover child ${pid} to be gone`, () => !isAlive(pid), 5000)
    }
    for (const extra of extraSpawners.splice(0)) await extra.close()
  })

  afterAll(async () => {
    const helper = spawner?.helperPid
    await spawner?.close()
    if (helper) expect(isAlive(helper)).toBe(false)
    if (scratch) rmSync(scratch, { recursive: true, force: true })
  })
}

/** A spawn's header on the wire (PROTOCOL.md): kind, version 2, no flags, reqid 1, no exit file, no FIFOs, no terminal, no setup report. */
export const SPAWN_HEADER = ['spawn', '2', '0', '1', '', '', '', '0', '0', '0']

/** One framed request of these fields, as the daemon writes it. */
export function frame(fields: string[]): Buffer {
  const payload = Buffer.from(fields.map((field) => `${field}\0`).join(''))
  const header = Buffer.alloc(4)
  header.writeUInt32LE(payload.length)
  return Buffer.concat([header, payload])
}

let dirCount = 0
export function freshDir(): string {
  return mkdtempSync(join(scratch, `t${dirCount++}-`))
}

export function request(overrides: Partial<SpawnRequest> & { file: string }): SpawnRequest {
  return spawnRequest(overrides.cwd ?? freshDir(), overrides)
}

export function started(outcome: SpawnOutcome): { pid: number; keeper: KeeperRef | null; exited: Promise<SpawnExit> } {
  if (!outcome.started) throw new Error(`expected the child to start, got ${JSON.stringify(outcome)}`)
  return outcome
}

/** Runs a request to its end; returns the exit and what the child wrote. */
export async function run(req: SpawnRequest, using: NativeSpawner = spawner): Promise<SpawnExit & { output: string; pid: number }> {
  const child = started(await using.spawn(req))
  const exit = await child.exited
  const output = existsSync(req.outputFile) ? readFileSync(req.outputFile, 'utf8') : ''
  return { ...exit, output, pid: child.pid }
}

/** Starts a child that stays (sleep) and registers it for clean-up. */
export async function startSleeper(
  req: Partial<SpawnRequest> = {},
  using: NativeSpawner = spawner,
): Promise<{ pid: number; keeper: KeeperRef | null; exited: Promise<SpawnExit>; req: SpawnRequest }> {
  const full = request({ file: '/bin/sleep', argv: ['sleep', '600'], ...req })
  const child = started(await using.spawn(full))
  leftovers.push(child.pid)
  // Its exit may go unobserved (or reject when a test kills the helper): never an unhandled rejection.
  child.exited.catch(() => {})
  return { ...child, req: full }
}

/**
 * The child's descriptors settle at `expected`. Right after the exec its program is still starting
 * (the loader briefly opens libraries on the next free descriptors), so this waits; a descriptor
 * the helper leaked never goes away and fails the wait.
 */
export async function expectOpenDescriptors(pid: number, expected: string[]): Promise<void> {
  let last: string[] = []
  const settled = () => {
    last = readdirSync(`/proc/${pid}/fd`).sort()
    return JSON.stringify(last) === JSON.stringify(expected)
  }
  await waitFor(`the descriptors of ${pid} to be exactly ${expected.join(', ')}`, settled, 5000).catch((error: Error) => {
    throw new Error(`${error.message}; open: ${last.join(', ')}`)
  })
}

/** Fields of /proc/<pid>/stat after the command name: [state, ppid, pgrp, session, ...]. */
export function procStat(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** Waits for a keeper to exit: its exit file, if it could write one, is there by then. */
export async function keeperGone(keeper: KeeperRef): Promise<void> {
  await waitFor(`keeper ${keeper.pid} to exit`, () => !isAlive(keeper.pid), 5000)
}

/** A named pipe: a task that reads it waits until the test writes a line. */
export function fifo(dir: string): string {
  const path = join(dir, 'gate')
  execFileSync('mkfifo', ['-m', '600', path])
  return path
}

/** The parsed exit file, or undefined while there is none. */
export function exitRecord(path: string): Record<string, unknown> | undefined {
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : undefined
}

export function pinOf(path: string): { path: string; dev: string; ino: string } {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino) }
}

/** A cgroup join entry for a folder as it is now. */
export function groupOf(path: string): { path: string; dev: string; ino: string; uid: number } {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino), uid: Number(info.uid) }
}

/** A pinned folder idmapped to its owner as it is now. */
export function mappedPinOf(path: string): PinnedDir {
  const info = statSync(path, { bigint: true })
  return { path, dev: String(info.dev), ino: String(info.ino), owner: { uid: Number(info.uid), gid: Number(info.gid) } }
}

/** rmdir of a cgroup: EBUSY until its last process is released. */
export async function removeCgroup(group: string): Promise<void> {
  await waitFor(`the cgroup ${group} to be empty and removed`, () => {
    try {
      rmdirSync(group)
    } catch {
      // busy, or gone
    }
    return !existsSync(group)
  })
}

/** Pids whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  const children: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (Number(procStat(Number(entry))[1]) === pid) children.push(Number(entry))
    } catch {
      // gone
    }
  }
  return children
}

/** A pid no process has: the top of the kernel's range, checked. */
export async function unusedPid(): Promise<number> {
  const max = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'))
  for (let pid = max - 1; pid > 1; pid--) if (!existsSync(`/proc/${pid}`)) return pid
  throw new Error('no unused pid')
}
