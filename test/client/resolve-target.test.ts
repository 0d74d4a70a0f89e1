import { describe, expect, test } from 'vitest'
import { TendClient } from '../../client/client.js'
import { DaemonTarget } from '../../client/cli/daemon-target.js'
import { resolveTarget } from '../../client/cli/resolve-target.js'
import { ClusterTarget } from '../../client/cluster/cli-target.js'

/** A client that is never asked anything: resolving a target only reads its environment. */
const clientWith = (env: Record<string, string | undefined>) => new TendClient({ env: { TEND_HOME: '/nonexistent-tend-home', ...env } })

describe('the target of a task verb', () => {
  test('is the daemon when neither the flags nor the environment name a queue', async () => {
    const client = clientWith({})
    try {
      expect(await resolveTarget({}, client)).toBeInstanceOf(DaemonTarget)
    } finally {
      client.close()
    }
  })

  test('is the queue the flags name, else the one TEND_CLUSTER names', async () => {
    const client = clientWith({ TEND_CLUSTER: 'redis://127.0.0.1:1' })
    const targets = [await resolveTarget({ cluster: 'redis://127.0.0.1:2' }, client), await resolveTarget({}, client)]
    try {
      for (const target of targets) expect(target).toBeInstanceOf(ClusterTarget)
    } finally {
      await Promise.all(targets.map((target) => target.close()))
      client.close()
    }
  })

  test("refuses what only a queue's workers honour when no queue is named, and a password in a flag", async () => {
    const client = clientWith({})
    try {
      await expect(resolveTarget({ require: { gpu: '1' } }, client)).rejects.toMatchObject({ code: 'TEND_ERR_USAGE' })
      await expect(resolveTarget({ retries: 1 }, client)).rejects.toMatchObject({ code: 'TEND_ERR_USAGE' })
      await expect(resolveTarget({ cluster: 'redis://:secret@127.0.0.1:1' }, client)).rejects.toMatchObject({ code: 'TEND_ERR_SECRET_IN_ARGV' })
    } finally {
      client.close()
    }
  })
})
