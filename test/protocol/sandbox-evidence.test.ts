import { describe, expect, test } from 'vitest'
import { sandboxEvidence, sandboxSummary, type Task } from '../../protocol/index.js'
import { taskBase } from '../helpers/task-base.js'

/** A record of a task that exited 1 under sandbox workspace, able to write /work/app. */
function failed(fields: Partial<Task> = {}): Task {
  return {
    ...taskBase({ sandbox: 'workspace', network: 'loopback', cwd: '/work/app', outputBytes: 10 }),
    state: 'exited',
    startedAt: '2026-11-30T00:00:01.000Z',
    pid: 4242,
    endedAt: '2026-11-30T00:00:02.000Z',
    exitCode: 1,
    signal: null,
    reason: null,
    stoppedBy: null,
    sandboxWritable: ['/work/app'],
    ...fields,
  } as Task
}

describe('whether a failure plausibly came from the sandbox', () => {
  test('output that reads as a refusal of the sandbox is evidence, its last such line named', () => {
    expect(sandboxEvidence(failed(), "touch: cannot touch '/usr/x': Read-only file system\n")).toBe("touch: cannot touch '/usr/x': Read-only file system")
    expect(sandboxEvidence(failed(), 'unshare: Operation not permitted\n')).not.toBeNull()
    expect(sandboxEvidence(failed(), 'curl: (6) Could not resolve host: example.com\n')).not.toBeNull()
    expect(sandboxEvidence(failed(), 'connect: Network is unreachable\n')).not.toBeNull()
  })

  test('a permission denied counts only on a path outside the places it could write', () => {
    expect(sandboxEvidence(failed(), 'sh: 1: cannot create /var/lib/x: Permission denied\n')).not.toBeNull()
    expect(sandboxEvidence(failed(), 'sh: 1: cannot create /work/app/locked: Permission denied\n')).toBeNull()
    expect(sandboxEvidence(failed(), 'ssh: Permission denied (publickey)\n')).toBeNull()
  })

  test("a missing file under the host's /tmp counts: the task has a private one", () => {
    expect(sandboxEvidence(failed(), 'cat: /tmp/build/out.txt: No such file or directory\n')).not.toBeNull()
    expect(sandboxEvidence(failed(), 'cat: /work/app/missing: No such file or directory\n')).toBeNull()
  })

  test("a name that did not resolve is not the sandbox's on the host's network", () => {
    expect(sandboxEvidence(failed({ network: 'host' }), 'curl: (6) Could not resolve host: example.com\n')).toBeNull()
  })

  test('a destination the egress proxy refused is evidence without any output', () => {
    const blocked = {
      allowed: 0,
      blocked: 1,
      sentBytes: 0,
      receivedBytes: 0,
      blockedDestinations: [{ name: 'evil.example', port: 443, reason: 'not on the allowlist', count: 1 }],
    }
    expect(sandboxEvidence(failed({ networkUse: blocked }), '')).toBe('the egress proxy refused a destination')
  })

  test('no evidence: an ordinary failure, a success, an unsandboxed task, a task that never started', () => {
    expect(sandboxEvidence(failed(), 'hi\n')).toBeNull()
    expect(sandboxEvidence(failed({ exitCode: 0 }), 'Read-only file system\n')).toBeNull()
    expect(sandboxEvidence(failed({ sandbox: 'off' }), 'Read-only file system\n')).toBeNull()
    expect(
      sandboxEvidence(failed({ state: 'failed', exitCode: null, reason: 'cwd does not exist: /x' } as Partial<Task>), 'Read-only file system\n'),
    ).toBeNull()
  })

  test('a sandbox that could write none of the host says so in words', () => {
    const summary = sandboxSummary(failed({ sandboxWritable: [] }))
    expect(summary).toContain('it could write only a private /tmp, /dev/shm and ~/.cache;')
    expect(summary).not.toContain('nothing of the host')
  })
})
