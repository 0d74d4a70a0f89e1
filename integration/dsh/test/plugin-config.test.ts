import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { createHarness, type Harness } from './support/harness.js'

let harness: Harness

beforeEach(async () => {
  harness = await createHarness()
})
afterEach(async () => {
  await harness.dispose()
})

describe('loading the plugin', () => {
  test('a configuration with unknown or invalid options is refused, naming every one, and registers nothing', async () => {
    const loading = harness.loadTend({ home: '/nowhere', maxWakeupsPerUserMessage: -1, stopTasksOnDispose: 'yes', bogus: 1 })
    await expect(loading).rejects.toThrow(/^invalid tend plugin configuration: bogus: unknown option \(known: .*\); .*stopTasksOnDispose.*; .*maxWakeupsPerUserMessage/)
    expect(harness.root.tools.schemas()).toEqual([])
  })

  test('without the harness packages where it looks, it says which package and where it looked', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'tend-dsh-empty-'))
    try {
      await expect(harness.loadTend({ harnessFrom: empty })).rejects.toThrow(`cannot load @deepseek-ai/dsh-tools (install the harness packages beside tend, or set the plugin's harnessFrom): ${empty}: `)
      expect(harness.root.tools.schemas()).toEqual([])
    } finally {
      rmSync(empty, { recursive: true, force: true })
    }
  })
})
