import { describe, expect, test } from 'vitest'
import { describeJob, type ClusterJob } from '../../../client/cluster/cluster-records.js'

/** A job as BullMQ answers it: its data, and the progress its worker (or any writer of Redis) set. */
function job(progress: unknown): ClusterJob {
  return { data: { request: { command: ['true'], cwd: '/w' } }, progress, returnvalue: null, failedReason: undefined } as unknown as ClusterJob
}

describe("where a cluster job is: its worker's name only as a worker's name may be", () => {
  test("a worker's name is kept", () => {
    expect(describeJob('t1', 'tend', job({ worker: 'gpu-box-1', attempt: 1 }), 'active').worker).toBe('gpu-box-1')
  })

  test('a progress naming no worker, or one no worker can have (invisible spaces, columns of its own), names none', () => {
    for (const worker of ['gpu-box-1\u200b', 'cpu-9  running  forged', 'x'.repeat(200), 42]) {
      expect(describeJob('t1', 'tend', job({ worker, attempt: 1 }), 'active').worker, String(worker)).toBeNull()
    }
  })
})
