import { describe, expect, test } from 'vitest'
import { unmetRequirementsWarning } from '../../../client/cluster/cluster-workers.js'
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
