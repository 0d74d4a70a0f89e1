import { describe, expect, test } from 'vitest'
import { defaultWorkerName } from '../../../daemon/cluster/worker-name.js'
import { isWorkerName } from '../../../protocol/index.js'

describe("a worker's default name", () => {
  test('host:home when that is a name', () => {
    expect(defaultWorkerName('box', 'proj')).toBe('box:proj')
  })

  test('homes the rule would make alike still get names of their own, each a name', () => {
    const names = [defaultWorkerName('box', 'proj a'), defaultWorkerName('box', 'proj-a'), defaultWorkerName('box', 'тест'), defaultWorkerName('box', 'мама')]
    expect(new Set(names).size).toBe(4)
    for (const name of names) expect(isWorkerName(name), name).toBe(true)
    expect(defaultWorkerName('box', 'x'.repeat(300)).length).toBeLessThanOrEqual(128)
  })
})
