import type { TaskBase } from '../../protocol/index.js'

/** The fields of a task before it is queued, with plain defaults (sandbox off, 1 KiB cap), for tests that build tasks by hand. */
export function taskBase(fields: Partial<TaskBase> = {}): TaskBase {
  const id = fields.id ?? 'abcdefghijkl'
  return {
    id,
    name: null,
    owner: 'operator',
    command: ['true'],
    shell: false,
    cwd: '/',
    envKeys: [],
    timeoutMs: null,
    maxOutputBytes: 1024,
    outputBytes: 0,
    lifetime: 'owner',
    sandbox: 'off',
    network: 'host',
    writablePaths: [],
    memoryBytes: null,
    pidsMax: null,
    createdAt: '2026-11-30T00:00:00.000Z',
    spool: `/tmp/spool/${id}`,
    ...fields,
  }
}
