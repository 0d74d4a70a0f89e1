import { describe, expect, test } from 'vitest'
import { liveEntries, unmetRequirementsWarning } from '../../../client/cluster/cluster-workers.js'
import { formatLabels, type Labels } from '../../../protocol/index.js'

describe('the warning for requirements no live worker meets', () => {
  const workers: Array<{ name: string; labels: Labels }> = [
    { name: 'a', labels: { gpu: '1', zone: 'eu' } },
    { name: 'b', labels: {} },
  ]

  test('none when a live worker has every label required, or nothing is required', () => {
    expect(unmetRequirementsWarning({ gpu: '1' }, workers)).toBeNull()
    expect(unmetRequirementsWarning({ zone: 'eu', gpu: '1' }, workers)).toBeNull()
    expect(unmetRequirementsWarning({}, [])).toBeNull()
  })

  test('names what is required and the labels on offer, worker by worker', () => {
    expect(unmetRequirementsWarning({ zone: 'us', gpu: '1' }, workers)).toBe(
      'no live worker has gpu=1,zone=us; the task waits, queued, until one joins (labels on offer: a: gpu=1,zone=eu; b: no labels)',
    )
  })

  test('says so when no worker is live', () => {
    expect(unmetRequirementsWarning({ gpu: '1' }, [])).toMatch(/no worker is live/)
  })

  test('labels are shown sorted, k=v joined by commas', () => {
    expect(formatLabels({ zone: 'eu', gpu: '1' })).toBe('gpu=1,zone=eu')
    expect(formatLabels({})).toBe('')
  })
})

describe("workers' entries are taken only as a worker writes them", () => {
  /** A Redis that holds what any writer of it put in the workers' hash, each with a heartbeat. */
  const redisWith = (entries: Record<string, unknown>, beats: Record<string, string> = {}) => ({
    hgetall: async () => Object.fromEntries(Object.entries(entries).map(([key, value]) => [key, typeof value === 'string' ? value : JSON.stringify(value)])),
    get: async (key: string) => beats[key.slice(key.lastIndexOf(':') + 1)] ?? '2026-12-02T08:00:00.000Z',
  })
  const real = { name: 'w1', origin: 'http://127.0.0.1:1', token: 't', labels: { gpu: '1' }, startedAt: '2026-12-02T07:00:00.000Z' }

  test("a hostile writer's entries (escapes in the name or labels, labels no worker takes, no start time, a heartbeat that is no time) are left out", async () => {
    const source = {
      base: 'tend',
      redis: redisWith(
        {
          w1: real,
          title: { ...real, name: 'evil\u001b]0;PWNED\u0007' },
          clipboard: { ...real, name: 'clip', labels: { gpu: 'h100\u001b]52;c;ZWNobw==\u0007' } },
          bidi: { ...real, name: 'bidi\u202eevil' },
          spaced: { ...real, name: 'spaced', labels: { 'g p u': '1' } },
          array: { ...real, name: 'array', labels: ['gpu=1'] },
          undated: { ...real, name: 'undated', startedAt: 'yesterday' },
          beatless: { ...real, name: 'beatless' },
          broken: '{not json',
        },
        { beatless: 'not-a-date' },
      ),
    }
    expect((await liveEntries(source)).map(({ entry }) => entry.name)).toEqual(['w1'])
  })
})

describe("an entry that passes for a worker's is still only its own", () => {
  const redisWith = (entries: Record<string, unknown>, beats: Record<string, string>) => ({
    hgetall: async () => Object.fromEntries(Object.entries(entries).map(([key, value]) => [key, JSON.stringify(value)])),
    get: async (key: string) => beats[key.slice(key.lastIndexOf(':') + 1)] ?? null,
  })
  const real = { name: 'gpu-box-1', origin: 'http://127.0.0.1:1', token: 't', labels: { gpu: 'a100' }, startedAt: '2026-12-02T07:00:00.000Z' }

  test("an entry under another field borrowing a live worker's heartbeat, a name that only looks like one, a time that is no ISO time or is far ahead: left out", async () => {
    const now = Date.now()
    const source = {
      base: 'tend',
      redis: redisWith(
        {
          'gpu-box-1': real,
          impostor: { ...real, labels: { gpu: 'h100', region: 'eu' } },
          'gpu-box-1\u200b': { ...real, name: 'gpu-box-1\u200b' },
          'cpu-9: gpu=h100; gpu-box-7': { ...real, name: 'cpu-9: gpu=h100; gpu-box-7' },
          loose: { ...real, name: 'loose', startedAt: 'Wed Dec 02 2026 (any text)' },
          ahead: { ...real, name: 'ahead' },
          numeric: { ...real, name: 'numeric' },
        },
        {
          'gpu-box-1': new Date(now).toISOString(),
          'gpu-box-1\u200b': new Date(now).toISOString(),
          'cpu-9: gpu=h100; gpu-box-7': new Date(now).toISOString(),
          loose: new Date(now).toISOString(),
          ahead: '9999-12-31T00:00:00.000Z',
          numeric: '1',
        },
      ),
    }
    expect((await liveEntries(source)).map(({ entry }) => entry.name)).toEqual(['gpu-box-1'])
  })
})
