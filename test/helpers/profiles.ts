import { expect, test } from 'vitest'
import type { TendClient } from '../../client/index.js'

export type SandboxedProfile = 'workspace' | 'strict'

/**
 * One test per sandboxed profile, titled `<profile>: <title>`. A profile the daemon cannot enforce
 * fails the test with the daemon's reason: a missing capability is never a skip.
 */
export function eachSandboxedProfile(title: string, client: () => TendClient, body: (sandbox: SandboxedProfile) => Promise<void>, timeoutMs?: number): void {
  for (const sandbox of ['workspace', 'strict'] as const) {
    test(
      `${sandbox}: ${title}`,
      async () => {
        const status = await client().status()
        expect(status.sandbox.profiles, `${sandbox} is not available to this daemon: ${status.sandbox.missing[sandbox]}`).toContain(sandbox)
        await body(sandbox)
      },
      timeoutMs,
    )
  }
}
