import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, test } from 'vitest'
import { REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * The console page's modules for readiness, ports and usage, run in Node: they are plain ES modules
 * that touch no DOM but in their render functions (the browser tests in console-aids.test.ts cover
 * those). Imported by URL: they are the page's JavaScript, not TypeScript the tests compile.
 */

type Loose = Record<string, unknown>
const PAGE = join(REPO_ROOT, 'daemon/console/page')
const load = async (path: string) => (await import(pathToFileURL(join(PAGE, path)).href)) as Record<string, (...args: never[]) => unknown>

const { portHref, portsOf } = await load('tasks/port-links.js')
const { readinessText, stateNote, usageCells, formatCpuTime, afterText } = await load('shared/aids-format.js')
const history = await load('tasks/usage-history.js')

const hostTask = (fields: Loose = {}): Loose => ({ id: 'abcd1234', state: 'running', sandbox: 'off', network: 'host', ...fields })
const href = (task: Loose, port: Loose) => (portHref as (task: Loose, port: Loose) => string | null)(task, port)

describe('port links', () => {
  test('a loopback or wildcard TCP port of a task on the host network opens 127.0.0.1 (or [::1]) at its number', () => {
    expect(href(hostTask(), { proto: 'tcp', address: '127.0.0.1', port: 3000 })).toBe('http://127.0.0.1:3000/')
    expect(href(hostTask(), { proto: 'tcp', address: '0.0.0.0', port: 8080 })).toBe('http://127.0.0.1:8080/')
    expect(href(hostTask(), { proto: 'tcp', address: '::', port: 8080 })).toBe('http://127.0.0.1:8080/')
    expect(href(hostTask(), { proto: 'tcp', address: '::1', port: 5173 })).toBe('http://[::1]:5173/')
    expect(href(hostTask({ sandbox: 'workspace', network: 'host' }), { proto: 'tcp', address: '127.0.0.1', port: 3000 })).toBe('http://127.0.0.1:3000/')
  })

  test('nothing else is a link: UDP, other addresses, a private network, a port that is not a port number', () => {
    expect(href(hostTask(), { proto: 'udp', address: '127.0.0.1', port: 5353 })).toBeNull()
    expect(href(hostTask(), { proto: 'tcp', address: '10.0.0.5', port: 3000 })).toBeNull()
    expect(href(hostTask(), { proto: 'tcp', address: 'evil.example', port: 3000 })).toBeNull()
    expect(href(hostTask(), { proto: 'tcp', address: '127.0.0.1" onclick="x', port: 3000 })).toBeNull()
    for (const network of ['loopback', 'allow']) {
      expect(href(hostTask({ sandbox: 'workspace', network }), { proto: 'tcp', address: '127.0.0.1', port: 3000 })).toBeNull()
    }
    for (const port of [0, 65_536, 3000.5, '3000', '3000/evil', -1, null]) {
      expect(href(hostTask(), { proto: 'tcp', address: '127.0.0.1', port: port as number })).toBeNull()
    }
  })

  test('only a running task holds ports', () => {
    const ports = [{ proto: 'tcp', address: '127.0.0.1', port: 3000 }]
    expect((portsOf as (task: Loose) => unknown[])(hostTask({ ports }))).toEqual(ports)
    expect((portsOf as (task: Loose) => unknown[])(hostTask({ ports, state: 'exited' }))).toEqual([])
    expect((portsOf as (task: Loose) => unknown[])(hostTask({ ports: undefined }))).toEqual([])
  })
})

describe('readiness, dependencies and usage as text', () => {
  const text = readinessText as (task: Loose) => string
  const note = stateNote as (task: Loose) => string
  const readyWhen = { pattern: 'listening on \\d+', timeoutMs: 60_000 }

  test('readiness: none, pending, waiting, ready by what, not ready why', () => {
    expect(text(hostTask())).toBe('no condition')
    expect(text(hostTask({ state: 'queued', readyWhen, ready: null }))).toBe('once started, waits for a line matching /listening on \\d+/ (up to 1m 00s)')
    expect(text(hostTask({ readyWhen, ready: null }))).toBe('waiting for a line matching /listening on \\d+/ (up to 1m 00s)')
    expect(text(hostTask({ readyWhen: { port: 3000, timeoutMs: 5000 }, ready: null }))).toBe('waiting for something listening on port 3000 (up to 5s)')
    expect(text(hostTask({ readyWhen, ready: { at: '2026-01-01T00:00:00Z', by: 'pattern', line: 'listening on 80\u001b[2J' } }))).toMatch(
      /^ready at .+ by pattern: “listening on 80␛\[2J”$/,
    )
    expect(text(hostTask({ readyWhen, ready: { failed: 'ended first', at: '2026-01-01T00:00:00Z' }, state: 'exited' }))).toMatch(
      /^not ready: ended first \(.+\)$/,
    )
    expect(note(hostTask({ readyWhen, ready: null }))).toBe('waiting')
    expect(note(hostTask({ state: 'queued', readyWhen, ready: null }))).toBe('')
    expect(note(hostTask({ readyWhen, ready: { failed: 'timed out', at: '2026-01-01T00:00:00Z' } }))).toBe('not ready')
  })

  test('a queued task notes how many it waits for; the sentence says on what it starts', () => {
    expect(note(hostTask({ state: 'queued', after: { ids: ['aaaa1111', 'bbbb2222'], any: false } }))).toBe('after 2')
    expect((afterText as (after: Loose) => string)({ ids: ['aaaa1111'], any: false })).toBe('starts once it ends with exit 0')
    expect((afterText as (after: Loose) => string)({ ids: ['aaaa1111', 'bbbb2222'], any: true })).toBe('starts once all 2 end, however')
  })

  test('CPU and MEM cells: the live sample while running, CPU time and peak once ended', () => {
    const cells = usageCells as (task: Loose, sample?: Loose) => { cpu: string; mem: string }
    expect(cells(hostTask(), { cpu: 87.4, mem: 200 * 1024 * 1024 })).toEqual({ cpu: '87%', mem: '200 MiB' })
    expect(cells(hostTask(), { cpu: 0.25, mem: 1024 })).toEqual({ cpu: '0.3%', mem: '1 KiB' })
    expect(cells(hostTask())).toEqual({ cpu: '', mem: '' })
    const usage = { cpuUserMs: 1200, cpuSystemMs: 34, peakMemoryBytes: 1.5 * 1024 ** 3, readBytes: 0, writeBytes: 0, source: 'cgroup' }
    expect(cells(hostTask({ state: 'exited', usage }))).toEqual({ cpu: '1.23s', mem: '1.5 GiB' })
    expect((formatCpuTime as (ms: number) => string)(123_000)).toBe('2m 03s')
  })
})

describe('the live figures kept in the page', () => {
  const record = history.record as (id: string, live: Loose) => void
  const samplesOf = history.samplesOf as (id: string) => { time: number; cpu: number }[]
  const currentOf = history.currentOf as (id: string, now?: number) => { cpu: number } | undefined

  test('a sample served twice is kept once; samples older than the window go; a sample stops being current', () => {
    const base = Date.parse('2026-01-01T00:00:00Z')
    const at = (seconds: number) => new Date(base + seconds * 1000).toISOString()
    record('t1', { cpuPercent: 10, memoryBytes: 1, sampledAt: at(0) })
    record('t1', { cpuPercent: 10, memoryBytes: 1, sampledAt: at(0) })
    record('t1', { cpuPercent: 'lots', memoryBytes: 1, sampledAt: at(1) })
    expect(samplesOf('t1')).toHaveLength(1)
    for (let second = 1; second <= 100; second++) record('t1', { cpuPercent: second, memoryBytes: 1, sampledAt: at(second) })
    const kept = samplesOf('t1')
    expect(kept[kept.length - 1]!.cpu).toBe(100)
    expect(kept[0]!.time).toBeGreaterThanOrEqual(base + 25_000)
    expect(currentOf('t1')?.cpu).toBe(100)
    expect(currentOf('t1', Date.now() + 60_000)).toBeUndefined()
    expect(samplesOf('unknown')).toEqual([])
  })
})
