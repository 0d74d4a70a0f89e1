import { Type, type Static } from 'typebox'
import { OWNER_PATTERN, TASK_ID_PATTERN } from './ids.js'
import { SANDBOX_PROFILES, TASK_STATES } from './task.js'

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) => Type.Union([schema, Type.Null()])
const strict = { additionalProperties: false } as const

export const TaskIdParams = Type.Object({ id: Type.String({ pattern: TASK_ID_PATTERN }) }, strict)
export type TaskIdParams = Static<typeof TaskIdParams>

export const TaskSchema = Type.Object(
  {
    id: Type.String(),
    name: Nullable(Type.String()),
    owner: Type.String(),
    command: Type.Array(Type.String()),
    shell: Type.Boolean(),
    cwd: Type.String(),
    envKeys: Type.Array(Type.String()),
    timeoutMs: Nullable(Type.Integer()),
    maxOutputBytes: Type.Integer(),
    outputBytes: Type.Integer(),
    sandbox: Type.Enum(SANDBOX_PROFILES),
    network: Type.Boolean(),
    writablePaths: Type.Array(Type.String()),
    sandboxWritable: Type.Optional(Type.Array(Type.String())),
    memoryBytes: Nullable(Type.Integer()),
    pidsMax: Nullable(Type.Integer()),
    state: Type.Enum(TASK_STATES, { description: 'corrupt: a spool entry that cannot be read (reason says why; the other fields hold what could be salvaged)' }),
    exitCode: Nullable(Type.Integer()),
    signal: Nullable(Type.String()),
    reason: Nullable(Type.String({ description: 'why it ended, when not a plain exit; for a corrupt entry, what is wrong with it' })),
    pid: Nullable(Type.Integer()),
    createdAt: Type.String(),
    startedAt: Nullable(Type.String()),
    endedAt: Nullable(Type.String()),
    spool: Type.String(),
  },
  { $id: 'Task' },
)

export const StartTaskBody = Type.Object(
  {
    command: Type.Array(Type.String(), { minItems: 1, description: 'argv to run; with shell: true, exactly one shell line' }),
    shell: Type.Optional(Type.Boolean({ description: 'run command[0] with sh -c' })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    owner: Type.Optional(Type.String({ pattern: OWNER_PATTERN })),
    cwd: Type.String({ minLength: 1, description: 'absolute working directory' }),
    env: Type.Optional(
      Type.Record(Type.String(), Type.String(), { propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }, description: 'variables to add; names are shell-style' }),
    ),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
    maxOutputBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    sandbox: Type.Optional(Type.Enum(SANDBOX_PROFILES, { description: 'confinement profile (default from the daemon config: workspace)' })),
    network: Type.Optional(Type.Boolean({ description: 'allow network access inside the sandbox' })),
    writablePaths: Type.Optional(Type.Array(Type.String({ pattern: '^/' }), { description: 'absolute paths writable inside the sandbox besides cwd' })),
    memoryBytes: Type.Optional(Type.Integer({ minimum: 1024 * 1024, description: 'memory limit (strict profile)' })),
    pidsMax: Type.Optional(Type.Integer({ minimum: 1, description: 'process-count limit (strict profile)' })),
  },
  strict,
)
export type StartTaskBody = Static<typeof StartTaskBody>

export const ListTasksQuery = Type.Object(
  { all: Type.Optional(Type.Boolean()), owner: Type.Optional(Type.String({ pattern: OWNER_PATTERN })) },
  strict,
)
export type ListTasksQuery = Static<typeof ListTasksQuery>

export const READ_MAX_BYTES_LIMIT = 16 * 1024 * 1024
export const WAIT_MS_LIMIT = 60_000

export const ReadOutputQuery = Type.Object(
  {
    from: Type.Optional(Type.Integer({ minimum: 0, description: 'byte offset to read from (default 0)' })),
    tail: Type.Optional(Type.Integer({ minimum: 0, description: 'start at the last N lines instead of at from' })),
    maxBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: READ_MAX_BYTES_LIMIT, description: 'bytes per read (default 1 MiB)' })),
    waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: WAIT_MS_LIMIT, description: 'long-poll: wait up to this long for new output or the end' })),
    encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
  },
  strict,
)
export type ReadOutputQuery = Static<typeof ReadOutputQuery>

export const ReadResultSchema = Type.Object({
  data: Type.String(),
  encoding: Type.Union([Type.Literal('utf8'), Type.Literal('base64')]),
  from: Type.Integer({ description: 'byte offset where data starts' }),
  next: Type.Integer({ description: 'byte offset to read from next' }),
  done: Type.Boolean({ description: 'the task has ended and next is the end of its output' }),
  truncated: Type.Boolean({ description: 'more output was already there than this read returned' }),
  outputBytes: Type.Integer({ description: 'bytes in output.log when this read was made' }),
  state: Type.Enum(TASK_STATES),
})
export type ReadResult = Static<typeof ReadResultSchema>

export const WaitQuery = Type.Object({ timeoutMs: Type.Optional(Type.Integer({ minimum: 0, maximum: WAIT_MS_LIMIT })) }, strict)
export type WaitQuery = Static<typeof WaitQuery>

export const WaitResultSchema = Type.Object({ done: Type.Boolean(), task: Type.Ref('Task') })

export const KillTaskBody = Type.Object(
  {
    signal: Type.Optional(Type.Union([Type.String({ pattern: '^(SIG)?[A-Z0-9]+$' }), Type.Integer({ minimum: 1, maximum: 64 })])),
    graceMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 600_000 })),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'why, recorded in the task reason' })),
  },
  strict,
)
export type KillTaskBody = Static<typeof KillTaskBody>

export const GcBody = Type.Object({ olderThanMs: Type.Optional(Type.Integer({ minimum: 0 })) }, strict)
export type GcBody = Static<typeof GcBody>

export const GcResultSchema = Type.Object({ removed: Type.Array(Type.String()), freedBytes: Type.Integer() })
export type GcResult = Static<typeof GcResultSchema>

export const RemoveResultSchema = Type.Object({ removed: Type.String(), freedBytes: Type.Integer() })
export type RemoveResult = Static<typeof RemoveResultSchema>

export const StatusSchema = Type.Object({
  pid: Type.Integer(),
  version: Type.String(),
  home: Type.String(),
  socket: Type.String(),
  startedAt: Type.String(),
  concurrency: Type.Integer(),
  perOwnerConcurrency: Type.Integer(),
  tasks: Type.Object({ queued: Type.Integer(), running: Type.Integer(), finished: Type.Integer() }),
  events: Type.Object({ daemonId: Type.String(), lastSeq: Type.Integer({ description: 'subscribe with since=lastSeq to get every later event' }) }),
  spool: Type.Object({ path: Type.String(), usedBytes: Type.Integer(), quotaBytes: Type.Integer() }),
  spawner: Type.Union([Type.Literal('native'), Type.Literal('node')], { description: 'native: a small C helper forks tasks; node: child_process from the daemon (slower)' }),
  peerCheck: Type.Object(
    {
      enforced: Type.Boolean({ description: 'requests from processes in another user, pid or mount namespace (any sandbox) are refused with TEND_ERR_SANDBOXED_CALLER' }),
      reason: Type.Optional(Type.String({ description: 'why the check is off (the addon was not built), or what weakens it' })),
    },
    { description: 'the check on who calls the socket (SO_PEERCRED and the caller namespaces)' },
  ),
  sandbox: Type.Object({
    default: Type.Enum(SANDBOX_PROFILES),
    profiles: Type.Array(Type.Enum(SANDBOX_PROFILES), { description: 'profiles this machine can enforce' }),
    missing: Type.Record(Type.String(), Type.String(), { description: 'why a profile cannot run here' }),
    bubblewrap: Nullable(Type.Object({ path: Type.String(), version: Type.String() })),
    userNamespaces: Type.Boolean(),
    cgroups: Type.Object({ memory: Type.Boolean(), pids: Type.Boolean() }),
    seccomp: Type.Boolean(),
  }),
})
export type DaemonStatus = Static<typeof StatusSchema>

export const EventsQuery = Type.Object({ since: Type.Optional(Type.Integer({ minimum: 0 })) }, strict)
export type EventsQuery = Static<typeof EventsQuery>

export const ErrorSchema = Type.Object({
  statusCode: Type.Integer(),
  code: Type.String(),
  error: Type.String(),
  message: Type.String(),
  blame: Type.Optional(Type.String()),
  retryable: Type.Optional(Type.Boolean()),
})
