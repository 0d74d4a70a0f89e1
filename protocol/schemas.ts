import { Type, type Static } from 'typebox'
import { OWNER_HEADER, OWNER_PATTERN, TASK_ID_PATTERN, TASK_ID_PREFIX_MIN } from './ids.js'
import { TaskAidsRecordFields, TaskAidsRequestFields } from './task-aids-schemas.js'
import {
  ABSOLUTE_PATH_PATTERN,
  INPUT_MAX_BYTES,
  NO_NUL_PATTERN,
  READ_MAX_BYTES_LIMIT,
  REQUEST_LIMITS,
  TASK_WARNING_CHARS_MAX,
  TASK_WARNINGS_MAX,
  WAIT_MS_LIMIT,
} from './limits.js'
import { BLOCKED_DESTINATIONS_KEPT, NETWORK_LOG_PAGE_DEFAULT, NETWORK_LOG_PAGE_LIMIT, NETWORK_MODES, NETWORK_VIAS } from './network.js'
import {
  LIFETIMES,
  RAN_AS_IDENTITIES,
  RAN_AS_KEYRINGS,
  SANDBOX_PROFILES,
  STDIN_MODES,
  STOPPED_BY,
  TASK_STATES,
  TASK_STDIN,
  TERMINAL_SIZE_MAX,
  type Task,
} from './task.js'

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
    lifetime: Type.Enum(LIFETIMES, { description: 'owner: stopped when its agent session ends; persistent: outlives it' }),
    stdin: Type.Optional(
      Type.Enum(TASK_STDIN, {
        description:
          'null: /dev/null; pipe: POST /v1/tasks/:id/input writes to it; closed: a pipe whose end of input was sent (absent from older records: null)',
      }),
    ),
    tty: Type.Optional(
      Nullable(
        Type.Object(
          { cols: Type.Integer(), rows: Type.Integer() },
          { description: 'the task runs on a pseudo-terminal of this size (its latest resize); null or absent: no terminal' },
        ),
      ),
    ),
    sandbox: Type.Enum(SANDBOX_PROFILES),
    network: Type.Enum(NETWORK_MODES, {
      description:
        "loopback: its owner's private loopback, shared by the owner's sandboxed tasks; allow: that, " +
        "plus the operator's allowlist through tend's egress proxy; host: the host's network (always with sandbox off)",
    }),
    allowNet: Type.Optional(
      Type.Array(Type.String(), { description: "destinations the operator allowed this task besides the daemon's networkAllow (network allow only)" }),
    ),
    networkUse: Type.Optional(
      Type.Object(
        {
          allowed: Type.Integer({ minimum: 0 }),
          blocked: Type.Integer({ minimum: 0 }),
          sentBytes: Type.Integer({ minimum: 0 }),
          receivedBytes: Type.Integer({ minimum: 0 }),
          blockedDestinations: Type.Array(
            Type.Object({ name: Type.String(), port: Type.Integer(), reason: Type.String(), count: Type.Integer({ minimum: 1 }) }),
            { maxItems: BLOCKED_DESTINATIONS_KEPT, description: 'the distinct destinations refused, most recent last' },
          ),
          logOmitted: Type.Optional(Type.Integer({ minimum: 0, description: 'decisions left out of network.log once it reached its cap (1 MiB)' })),
          logLost: Type.Optional(Type.Integer({ minimum: 0, description: 'decisions network.log could not keep (a full or read-only disk)' })),
        },
        { description: "what the task did through tend's egress proxy (network.log in its spool has each decision); absent before its first connection" },
      ),
    ),
    writablePaths: Type.Array(Type.String()),
    sandboxWritable: Type.Optional(Type.Array(Type.String())),
    warnings: Type.Optional(
      Type.Array(Type.String({ maxLength: TASK_WARNING_CHARS_MAX }), {
        maxItems: TASK_WARNINGS_MAX,
        description: 'what its start deserved a word about: writes that would vanish (a writable path that does not exist, /tmp while sandboxed)',
      }),
    ),
    keeper: Type.Optional(
      Type.Union([Type.Null(), Type.Object({ pid: Type.Integer(), startTicks: Type.Integer() })], {
        description: "the task's keeper process (its parent, which records its exit): it outlives the daemon",
      }),
    ),
    bootId: Type.Optional(Type.String({ description: 'the boot the task started in' })),
    ranAs: Type.Optional(
      Type.Object(
        {
          uid: Type.Integer(),
          gid: Type.Integer(),
          identity: Type.Enum(RAN_AS_IDENTITIES, {
            description: "task: a root daemon's own unprivileged identity for sandboxed tasks (writable folders idmapped); taskUser; daemon: the daemon's uid",
          }),
          fallback: Type.Optional(
            Type.String({ description: "why a root daemon's sandboxed task ran as uid 0 (without capabilities) instead of its own identity" }),
          ),
          keyring: Type.Enum(RAN_AS_KEYRINGS, { description: "own: a new, empty session keyring; daemon: the daemon's (node spawner)" }),
        },
        { description: 'who the task ran as (absent in older records and on tasks that never started)' },
      ),
    ),
    run: Type.Optional(
      Type.String({
        description:
          'which run of the task this record is, unique to its daemon and admission: its processes carry it (TEND_TASK_RUN), its cgroups are named after it',
      }),
    ),
    idempotencyKey: Type.Optional(Type.String({ description: 'the Idempotency-Key its submission was made with' })),
    requestHash: Type.Optional(Type.String({ description: 'a hash of that submission, to tell a retry from another request with the same key' })),
    inputLogLostBytes: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: "bytes sent to the task's stdin (and read by it) that input.log could not keep (a full or read-only disk); absent when none were lost",
      }),
    ),
    outputLostBytes: Type.Optional(
      Type.Integer({
        minimum: 0,
        description: 'bytes a terminal task wrote that output.log could not keep (a full or read-only disk); absent when none were lost',
      }),
    ),
    memoryBytes: Nullable(Type.Integer()),
    pidsMax: Nullable(Type.Integer()),
    state: Type.Enum(TASK_STATES, {
      description: 'corrupt: a spool entry that cannot be read (reason says why; the other fields hold what could be salvaged)',
    }),
    exitCode: Nullable(Type.Integer()),
    signal: Nullable(Type.String()),
    reason: Nullable(Type.String({ description: 'why it ended, when not a plain exit; for a corrupt entry, what is wrong with it' })),
    stoppedBy: Nullable(
      Type.Enum(STOPPED_BY, {
        description:
          'who or what stopped it: owner (a kill by its agent), operator (a kill from an unscoped client), timeout, ' +
          'output-cap, memory-limit, session-end (its agent session ended), daemon-stop, outside-signal (a ' +
          'signal tend did not send), lease-expired (its daemon could no longer confirm the lease it ran under, ' +
          'e.g. a cluster worker its lock on the job); null when it ended by itself, failed to start or was lost',
      }),
    ),
    pid: Nullable(Type.Integer()),
    createdAt: Type.String(),
    startedAt: Nullable(Type.String()),
    endedAt: Nullable(Type.String()),
    spool: Type.String(),
    ...TaskAidsRecordFields,
  },
  { $id: 'Task' },
)

const TerminalCells = (what: string) => Type.Integer({ minimum: 1, maximum: TERMINAL_SIZE_MAX, description: `${what}, 1 to ${TERMINAL_SIZE_MAX}` })

export const TerminalSizeBody = Type.Object({ cols: TerminalCells('columns'), rows: TerminalCells('rows') }, strict)
export type TerminalSizeBody = Static<typeof TerminalSizeBody>

const Text = (options: Parameters<typeof Type.String>[0] = {}) => Type.String({ pattern: NO_NUL_PATTERN, ...options })

export const StartTaskBody = Type.Object(
  {
    command: Type.Array(Text(), { minItems: 1, description: 'argv to run; with shell: true, exactly one shell line' }),
    shell: Type.Optional(Type.Boolean({ description: 'run command[0] with sh -c' })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    owner: Type.Optional(Type.String({ pattern: OWNER_PATTERN })),
    cwd: Text({ minLength: 1, description: 'absolute working directory' }),
    env: Type.Optional(
      Type.Record(Type.String(), Text(), { propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }, description: 'variables to add; names are shell-style' }),
    ),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: REQUEST_LIMITS.timeoutMs, description: 'time limit in milliseconds (at most one year)' })),
    maxOutputBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: REQUEST_LIMITS.maxOutputBytes, description: 'output cap in bytes (at most 16 TiB)' })),
    sandbox: Type.Optional(Type.Enum(SANDBOX_PROFILES, { description: 'confinement profile (default from the daemon config: workspace)' })),
    network: Type.Optional(
      Type.Union([Type.Enum(NETWORK_MODES), Type.Boolean()], {
        description:
          "what a sandboxed task's network reaches (default loopback): loopback, its owner's private loopback " +
          "shared by the owner's sandboxed tasks; allow, that plus the operator's allowlist through tend's egress proxy; " +
          "host, the host's network. true and false (older clients) mean host and loopback",
      }),
    ),
    allowNet: Type.Optional(
      Type.Array(Text({ minLength: 1, maxLength: 300 }), {
        maxItems: REQUEST_LIMITS.allowNet,
        description:
          "destinations this task may reach besides the daemon's networkAllow (domain patterns like registry.example or *.example.org, " +
          'each with an optional :port); network allow only, and only from the operator (a request without an owner header)',
      }),
    ),
    writablePaths: Type.Optional(
      Type.Array(Text({ pattern: ABSOLUTE_PATH_PATTERN }), {
        maxItems: REQUEST_LIMITS.writablePaths,
        description: 'absolute paths writable inside the sandbox besides cwd',
      }),
    ),
    memoryBytes: Type.Optional(
      Type.Integer({
        minimum: REQUEST_LIMITS.memoryBytesMin,
        maximum: REQUEST_LIMITS.memoryBytes,
        description: 'memory limit in bytes, 1 MiB to 1 TiB (workspace and strict profiles)',
      }),
    ),
    pidsMax: Type.Optional(
      Type.Integer({ minimum: 1, maximum: REQUEST_LIMITS.pidsMax, description: 'process-count limit, up to 4194304 (workspace and strict profiles)' }),
    ),
    lifetime: Type.Optional(Type.Enum(LIFETIMES, { description: 'owner (default): stopped when its agent session ends; persistent: outlives the session' })),
    stdin: Type.Optional(
      Type.Enum(STDIN_MODES, { description: 'null (default): stdin is /dev/null; pipe: a pipe that POST /v1/tasks/:id/input writes to (native spawner only)' }),
    ),
    tty: Type.Optional(
      Type.Union(
        [
          Type.Boolean(),
          Type.Object({ cols: Type.Optional(TerminalCells('columns (default 80)')), rows: Type.Optional(TerminalCells('rows (default 24)')) }, strict),
        ],
        {
          description:
            'run on a pseudo-terminal (true, or its size; default 80x24): stdin is the terminal (POST /v1/tasks/:id/input types into it), ' +
            'output.log gets what it shows, raw; resize with POST /v1/tasks/:id/resize (native spawner only)',
        },
      ),
    ),
    ...TaskAidsRequestFields,
  },
  strict,
)
export type StartTaskBody = Static<typeof StartTaskBody>

export const TaskInputBody = Type.Object(
  {
    text: Type.Optional(
      Type.String({ maxLength: INPUT_MAX_BYTES, description: "text to write to the task's stdin, as UTF-8, exactly as given (no newline is added)" }),
    ),
    base64: Type.Optional(
      Type.String({
        maxLength: Math.ceil(INPUT_MAX_BYTES / 3) * 4,
        pattern: '^[A-Za-z0-9+/]*={0,2}$',
        description: 'raw bytes to write, base64-encoded (instead of text)',
      }),
    ),
    eof: Type.Optional(Type.Boolean({ description: 'after writing, close the stdin: the task reads end-of-file once it has read everything' })),
  },
  strict,
)
export type TaskInputBody = Static<typeof TaskInputBody>

export const TaskInputResultSchema = Type.Object({
  acceptedBytes: Type.Integer({ description: "bytes written to the task's stdin (and appended to input.log): all of them" }),
  eof: Type.Boolean({ description: 'the stdin is closed now' }),
  inputBytes: Type.Integer({ description: 'size of input.log: every byte sent to this task so far' }),
  task: Type.Ref('Task'),
})
export type TaskInputResult = Omit<Static<typeof TaskInputResultSchema>, 'task'> & { task: Task }

/** `live`: running tasks' answers carry their live figures (`live`, sampled at most once a second). */
const LiveQueryFlag = Type.Optional(Type.Boolean({ description: "add each running task's live figures (live), sampled at most once a second" }))

export const ListTasksQuery = Type.Object(
  { all: Type.Optional(Type.Boolean()), owner: Type.Optional(Type.String({ pattern: OWNER_PATTERN })), live: LiveQueryFlag },
  strict,
)
export type ListTasksQuery = Static<typeof ListTasksQuery>

export const GetTaskQuery = Type.Object({ live: LiveQueryFlag }, strict)
export type GetTaskQuery = Static<typeof GetTaskQuery>

export const ReadOutputQuery = Type.Object(
  {
    from: Type.Optional(Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.counter, description: 'byte offset to read from (default 0)' })),
    tail: Type.Optional(Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.counter, description: 'start at the last N lines instead of at from' })),
    maxBytes: Type.Optional(Type.Integer({ minimum: 1, maximum: READ_MAX_BYTES_LIMIT, description: 'bytes per read (default 1 MiB)' })),
    waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: WAIT_MS_LIMIT, description: 'long-poll: wait up to this long for new output or the end' })),
    encoding: Type.Optional(Type.Union([Type.Literal('utf8'), Type.Literal('base64')])),
    waitFor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1000,
        description:
          'with waitMs: wait for a new complete line (from on) that matches this regular expression (RE2 syntax), ' +
          'and answer the output up to and including it',
      }),
    ),
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
  matched: Type.Optional(
    Type.Object(
      { line: Type.String(), end: Type.Integer({ description: 'byte offset just past the line (its newline included)' }) },
      { description: 'a waitFor read: the first new line that matched; absent when none did before waitMs ran out or the task ended' },
    ),
  ),
})
export type ReadResult = Static<typeof ReadResultSchema>

export const NetworkLogQuery = Type.Object(
  {
    from: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: REQUEST_LIMITS.counter,
        description: 'byte offset in network.log to read from (default 0; a page answers the next one)',
      }),
    ),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: NETWORK_LOG_PAGE_LIMIT, description: `decisions per page (default ${NETWORK_LOG_PAGE_DEFAULT})` }),
    ),
  },
  strict,
)
export type NetworkLogQuery = Static<typeof NetworkLogQuery>

export const NetworkDecisionSchema = Type.Object({
  time: Type.String(),
  name: Type.String(),
  port: Type.Integer(),
  via: Type.Enum(NETWORK_VIAS),
  decision: Type.Union([Type.Literal('allowed'), Type.Literal('blocked')]),
  reason: Type.Optional(Type.String({ description: 'why it was refused' })),
  address: Type.Optional(Type.String({ description: 'the upstream address connected to' })),
  error: Type.Optional(Type.String({ description: 'allowed, but the upstream could not be reached' })),
  sentBytes: Type.Integer({ minimum: 0 }),
  receivedBytes: Type.Integer({ minimum: 0 }),
})

export const NetworkLogPageSchema = Type.Object({
  entries: Type.Array(NetworkDecisionSchema, { description: "the egress proxy's decisions, oldest first" }),
  next: Type.Integer({ description: 'byte offset in network.log to read from next' }),
  done: Type.Boolean({ description: 'the task has ended and next is the end of its network.log' }),
  omitted: Type.Integer({ description: "decisions left out of network.log past its cap (the record's networkUse counts them)" }),
  lost: Type.Integer({ description: 'decisions network.log could not keep (a full or read-only disk)' }),
})

export const WaitQuery = Type.Object(
  {
    timeoutMs: Type.Optional(Type.Integer({ minimum: 0, maximum: WAIT_MS_LIMIT })),
    ready: Type.Optional(
      Type.Boolean({
        description: 'answer as soon as its readiness settles (ready, timed out, ended first), not only at its end; a task without a condition is a 400',
      }),
    ),
  },
  strict,
)
export type WaitQuery = Static<typeof WaitQuery>

export const WaitResultSchema = Type.Object({ done: Type.Boolean(), task: Type.Ref('Task') })

export const ResolveQuery = Type.Object(
  {
    ref: Type.String({
      minLength: 1,
      maxLength: 200,
      description: `a task id, a task name (the newest task of that name), or a unique prefix of ${TASK_ID_PREFIX_MIN} or more characters of an id`,
    }),
  },
  strict,
)
export type ResolveQuery = Static<typeof ResolveQuery>

export const ResolveResultSchema = Type.Object({ id: Type.String() })

export const KillTaskBody = Type.Object(
  {
    signal: Type.Optional(Type.Union([Type.String({ pattern: '^(SIG)?[A-Z0-9]+$', maxLength: 32 }), Type.Integer({ minimum: 1, maximum: 64 })])),
    graceMs: Type.Optional(Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.graceMs, description: 'milliseconds before SIGKILL (at most one hour)' })),
    reason: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'why, recorded in the task reason' })),
    stoppedBy: Type.Optional(
      Type.Literal('session-end', {
        description: "the kill is the disposal of the task's agent session (recorded as stoppedBy session-end; otherwise owner or operator, from who asks)",
      }),
    ),
  },
  strict,
)
export type KillTaskBody = Static<typeof KillTaskBody>

export const GcBody = Type.Object(
  {
    olderThanMs: Type.Optional(
      Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.olderThanMs, description: 'remove tasks that ended at least this long ago, in milliseconds' }),
    ),
  },
  strict,
)
export type GcBody = Static<typeof GcBody>

export const GcResultSchema = Type.Object({ removed: Type.Array(Type.String()), freedBytes: Type.Integer() })
export type GcResult = Static<typeof GcResultSchema>

export const RemoveResultSchema = Type.Object({ removed: Type.String(), freedBytes: Type.Integer() })
export type RemoveResult = Static<typeof RemoveResultSchema>

const SeccompFilterSchema = Type.Object({ name: Type.String(), denies: Type.Array(Type.String()) })
const ProfileBoundsSchema = Type.Object({
  pidsMax: Nullable(Type.Integer({ description: 'the process-count limit of a task that gives none; null: not enforced here' })),
  memoryBytes: Nullable(Type.Integer({ description: 'the memory limit of a task that gives none; null: none' })),
  memoryAccounted: Type.Boolean({
    description: "a task's memory, the tmpfs pages it writes included, is counted in a group of its own that --memory can limit",
  }),
  tmpfsBytes: Type.Integer({ description: "what a task's private /tmp, /dev/shm and ~/.cache hold together, at most" }),
})

/** A daemon's part in a shared queue of tasks (docs/cluster.md), when it has one. */
export const WorkerStatusSchema = Type.Object(
  {
    redis: Type.String({ description: "the queue's Redis URL, without its password" }),
    queue: Type.String(),
    name: Type.String({ description: 'how other machines know this worker' }),
    labels: Type.Record(Type.String(), Type.String()),
    running: Type.Object(
      { count: Type.Integer(), ids: Type.Array(Type.String()) },
      { description: "the queue's tasks running here (the requester's, for an owner)" },
    ),
  },
  { description: "this daemon as a worker of a cluster's shared queue" },
)

export const StatusSchema = Type.Object({
  pid: Type.Integer(),
  version: Type.String(),
  home: Type.String(),
  socket: Type.String(),
  startedAt: Type.String(),
  concurrency: Type.Integer(),
  perOwnerConcurrency: Type.Integer(),
  tasks: Type.Object(
    { queued: Type.Integer(), running: Type.Integer(), finished: Type.Integer() },
    { description: "the requester's tasks: every task for the operator, only its own for an owner" },
  ),
  events: Type.Object({ daemonId: Type.String(), lastSeq: Type.Integer({ description: 'subscribe with since=lastSeq to get every later event' }) }),
  spool: Type.Object({
    path: Type.String(),
    usedBytes: Type.Integer(),
    quotaBytes: Type.Integer(),
    /** False while task records cannot be written (a full disk without reserve, a read-only file system, I/O errors). */
    writable: Type.Boolean(),
    /** Why records cannot be written, while they cannot; else null. */
    problem: Type.Union([Type.String(), Type.Null()]),
    /** Task records answered from memory because they could not be written yet. */
    heldRecords: Type.Integer(),
    /** Disk held back for records (spoolReserveBytes). */
    reserveBytes: Type.Integer(),
    /** Whether that reserve is in place (false once spent on a full disk, until there is room again). */
    reserveHeld: Type.Boolean(),
    /**
     * Entries in the spool that are no task's folder (a task folder renamed away, anything put
     * there): counted in usedBytes, removed by the operator's gc and first by the quota. Operator only.
     */
    strayEntries: Type.Optional(Type.Array(Type.Object({ name: Type.String(), bytes: Type.Integer() }))),
  }),
  spawner: Type.Union([Type.Literal('native'), Type.Literal('node')], {
    description: 'native: a small C helper forks tasks; node: child_process from the daemon (slower)',
  }),
  native: Type.Object(
    {
      platform: Type.String({ description: "where the package's prebuilt parts are looked for: dist/native/<platform>/ (linux-x64)" }),
      parts: Type.Array(
        Type.Object({
          name: Type.Union([Type.Literal('tend.node'), Type.Literal('tend-spawner'), Type.Literal('tend-netns')]),
          from: Type.Union([Type.Literal('prebuilt'), Type.Literal('source'), Type.Literal('none')], {
            description: 'prebuilt: the file the package shipped; source: built on this machine (looked for first); none: neither is here',
          }),
          path: Nullable(Type.String({ description: 'the file, or null for none' })),
        }),
      ),
      build: Type.String({ description: "the one command that builds every part from source into the package (it needs cc and Node's headers)" }),
    },
    { description: "tend's native parts (the addon, the spawner, the network holder): which file the daemon found for each at its start" },
  ),
  pathSkipped: Type.Array(Type.Object({ path: Type.String(), reason: Type.String() }), {
    description:
      "the daemon's PATH entries it runs nothing from (its own programs, and tasks that do not choose their PATH): " +
      "a folder that someone other than root or the daemon's uid can change, and why",
  }),
  worker: Type.Optional(WorkerStatusSchema),
  peerCheck: Type.Object(
    {
      enforced: Type.Boolean({
        description: 'requests from processes in another user, pid or mount namespace (any sandbox) are refused with TEND_ERR_SANDBOXED_CALLER',
      }),
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
    cgroups: Type.Object({
      memory: Type.Boolean(),
      pids: Type.Boolean(),
      hierarchy: Type.Optional(
        Type.Object(
          {
            version: Nullable(Type.Union([Type.Literal(1), Type.Literal(2)])),
            path: Nullable(Type.String()),
            limits: Nullable(Type.Union([Type.Literal(1), Type.Literal(2)])),
            why: Type.String(),
          },
          {
            description:
              'which cgroup hierarchy task groups are on (2: each task a v2 group in the subtree given by cgroupRoot; 1: v1 groups only; ' +
              "null: none), the daemon's folder of them, which hierarchy holds the limits, and why",
          },
        ),
      ),
    }),
    seccomp: Type.Boolean({ description: 'tend has seccomp filters for this architecture (x64, arm64); without them no sandboxed profile runs' }),
    filters: Type.Object(
      { off: Type.Null(), workspace: SeccompFilterSchema, strict: SeccompFilterSchema },
      { description: 'the seccomp filter each profile gets: its name and what it denies, in words (docs/sandbox.md)' },
    ),
    identity: Type.Object(
      {
        as: Type.Enum(['task', 'taskUser', 'daemon'] as const, {
          description:
            "who workspace and strict tasks run as: task (a root daemon's own unprivileged uid and gid for each " +
            "owner of tasks, writable folders idmapped to their owners), taskUser, or daemon (the daemon's uid)",
        }),
        uid: Nullable(Type.Integer({ description: 'the uid of taskUser or the daemon; null for task (each owner has its own: owners)' })),
        gid: Nullable(Type.Integer({ description: 'the gid, likewise' })),
        range: Nullable(Type.Object({ first: Type.Integer(), last: Type.Integer() }, { description: 'for task: the ids owners get theirs from' })),
        owners: Type.Array(Type.Object({ owner: Type.String(), uid: Type.Integer(), gid: Type.Integer() }), {
          description: "for task: each owner's ids, once its first sandboxed task was accepted (and the default owner's, probed at start); empty otherwise",
        }),
        home: Nullable(Type.String({ description: "the daemon's HOME, shown read-only through an idmapped mount to tasks on their own identity" })),
        fallback: Nullable(
          Type.String({ description: "why a root daemon's sandboxed tasks run as uid 0 (without capabilities) instead of their own identity" }),
        ),
        off: Type.Object({ as: Type.Enum(['taskUser', 'daemon'] as const), uid: Type.Integer(), gid: Type.Integer() }, { description: 'who off tasks run as' }),
      },
      { description: 'who tasks run as' },
    ),
    keyring: Type.Object(
      {
        fresh: Type.Boolean({ description: 'every task gets a new, empty session keyring of its own' }),
        reason: Type.Optional(Type.String({ description: 'why not' })),
      },
      { description: "tasks' session keyrings" },
    ),
    bounds: Type.Object(
      {
        workspace: Type.Optional(ProfileBoundsSchema),
        strict: Type.Optional(ProfileBoundsSchema),
        reason: Type.Optional(Type.String({ description: 'why processes and memory are not bounded here: what to fix' })),
        allTasksPidsMax: Type.Optional(
          Nullable(Type.Integer({ description: "the process-count limit of all the daemon's tasks together (daemonPidsMax); null: none here" })),
        ),
        allDaemonsPidsMax: Type.Optional(
          Nullable(
            Type.Integer({
              description: "the process-count limit of every daemon's tasks together on this machine (tend's cgroup folder and the daemon uid's); null: none",
            }),
          ),
        ),
        allDaemonsProblem: Type.Optional(Type.String({ description: "why every daemon's tasks together are not bounded, and the command that bounds them" })),
      },
      { description: 'what each sandboxed profile this machine can run bounds, per task' },
    ),
    network: Type.Object(
      {
        default: Type.Enum(NETWORK_MODES, { description: 'what a sandboxed task that asks for none gets' }),
        modes: Type.Array(Type.Enum(NETWORK_MODES), { description: 'the network modes this machine can enforce for sandboxed tasks' }),
        missing: Type.Record(Type.String(), Type.String(), {
          description: 'why each other mode cannot be enforced here (a task asking for it is refused, never widened)',
        }),
        allow: Type.Array(Type.String(), { description: "the operator's allowlist (networkAllow): what allow tasks reach through the egress proxy" }),
      },
      { description: "sandboxed tasks' networks" },
    ),
  }),
})
export type DaemonStatus = Static<typeof StatusSchema>
export type WorkerStatus = Static<typeof WorkerStatusSchema>

export const EventsQuery = Type.Object(
  {
    since: Type.Optional(Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.counter, description: 'replay the kept events after this sequence number' })),
    spool: Type.Optional(Type.Boolean({ description: 'also send `spool` events: the spool became unwritable, or writable again' })),
  },
  strict,
)
export type EventsQuery = Static<typeof EventsQuery>

/**
 * Headers of the event stream, checked before it opens. Other headers pass (a headers schema is
 * never strict: clients send many).
 */
export const EventsHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.Integer({ minimum: 0, maximum: REQUEST_LIMITS.counter, description: 'what an EventSource sends when it reconnects: the last seq it saw' }),
  ),
  [OWNER_HEADER]: Type.Optional(Type.String({ pattern: OWNER_PATTERN, description: 'act for this owner: only its events' })),
})
export type EventsHeaders = Static<typeof EventsHeaders>

export const ErrorSchema = Type.Object({
  statusCode: Type.Integer(),
  code: Type.String(),
  error: Type.String(),
  message: Type.String(),
  blame: Type.Optional(Type.String()),
  retryable: Type.Optional(Type.Boolean()),
})

export const StopBody = Type.Object(
  {
    keepTasks: Type.Optional(Type.Boolean({ description: 'leave running tasks running, for the next daemon to supervise (default false: they are stopped)' })),
  },
  strict,
)
export type StopBody = Static<typeof StopBody>

/** POST /v1/console: where the console listens; anything left out comes from the daemon's settings. */
export const ConsoleBody = Type.Object(
  {
    host: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description: 'address to bind (default consoleHost, 127.0.0.1); another than loopback needs TLS or insecure',
      }),
    ),
    port: Type.Optional(Type.Integer({ minimum: 0, maximum: 65535, description: 'TCP port (default consolePort; 0: a free port)' })),
    insecure: Type.Optional(Type.Boolean({ description: 'serve an address other than loopback without TLS' })),
    tlsCert: Type.Optional(Type.String({ pattern: '^/', maxLength: 4096, description: 'absolute path of a PEM certificate (chain)' })),
    tlsKey: Type.Optional(Type.String({ pattern: '^/', maxLength: 4096, description: 'absolute path of its PEM private key' })),
  },
  strict,
)
export type ConsoleBody = Static<typeof ConsoleBody>

/** Where the console listens; with a fresh token when one was just made. */
export const ConsoleInfoSchema = Type.Object({
  listening: Type.Boolean(),
  origin: Nullable(Type.String({ description: 'scheme, host and port of the console, e.g. http://127.0.0.1:43117' })),
  url: Nullable(Type.String({ description: 'the URL to open: the origin with the token, when one was just made' })),
  token: Nullable(Type.String({ description: 'a fresh token (shown once; only its digest is kept): Authorization: Bearer <token> on the TCP API' })),
  host: Nullable(Type.String()),
  port: Nullable(Type.Integer()),
  tls: Type.Boolean(),
  tokens: Type.Integer({ description: 'tokens that are valid now' }),
})
export type ConsoleInfo = Static<typeof ConsoleInfoSchema>
