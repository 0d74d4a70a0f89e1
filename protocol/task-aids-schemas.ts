import { Type } from 'typebox'
import { AFTER_MAX } from './dependencies.js'
import { TASK_ID_PATTERN } from './ids.js'
import { REQUEST_LIMITS } from './limits.js'
import { MAX_RECORDED_PORTS } from './ports.js'
import { READY_BY, READY_FAILURES, READY_TIMEOUT_MS } from './readiness.js'

/**
 * The record fields and request fields of what agents ask of a task beside running it: readiness,
 * ports, usage and dependencies (protocol/readiness.ts, ports.ts, usage.ts, dependencies.ts).
 */

const Port = (description: string) => Type.Integer({ minimum: 1, maximum: 65_535, description })

const ReadyConditionSchema = Type.Object(
  {
    pattern: Type.Optional(Type.String({ minLength: 1, maxLength: 1000, description: 'a regular expression (RE2 syntax) a line of its output must match' })),
    port: Type.Optional(Port('a port something in its network must listen on')),
    url: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2000,
        pattern: '^https?://',
        description: 'an http(s) URL that must answer 2xx or 3xx, fetched inside its network',
      }),
    ),
    timeoutMs: Type.Integer({ minimum: 1, maximum: REQUEST_LIMITS.timeoutMs }),
  },
  { additionalProperties: false },
)

export const TaskAidsRecordFields = {
  readyWhen: Type.Optional(ReadyConditionSchema),
  ready: Type.Optional(
    Type.Union(
      [
        Type.Null(),
        Type.Object({ at: Type.String(), by: Type.Enum(READY_BY), line: Type.Optional(Type.String()) }),
        Type.Object({ failed: Type.Enum(READY_FAILURES), at: Type.String() }),
      ],
      { description: 'null while waiting for its readiness condition; how and when it held; or why it never did. Absent: no condition' },
    ),
  ),
  port: Type.Optional(Type.Union([Type.Null(), Port('the port it was given as PORT (--port), held for it until it ends')])),
  portAuto: Type.Optional(
    Type.Boolean({ description: 'tend picked its port (port auto): only such a port is held until it ends, and counts towards its owner’s cap' }),
  ),
  ports: Type.Optional(
    Type.Array(Type.Object({ proto: Type.Union([Type.Literal('tcp'), Type.Literal('udp')]), address: Type.String(), port: Type.Integer() }), {
      maxItems: MAX_RECORDED_PORTS,
      description:
        `the sockets its processes listen on (TCP) or are bound to (UDP) while it runs, the lowest ${MAX_RECORDED_PORTS} ports;` + ' empty once it has ended',
    }),
  ),
  portsOmitted: Type.Optional(
    Type.Integer({ minimum: 1, description: `how many more sockets it had than the ${MAX_RECORDED_PORTS} ports lists; absent: none` }),
  ),
  usage: Type.Optional(
    Type.Object(
      {
        cpuUserMs: Type.Integer({ minimum: 0 }),
        cpuSystemMs: Type.Integer({ minimum: 0 }),
        peakMemoryBytes: Type.Integer({ minimum: 0 }),
        readBytes: Type.Integer({ minimum: 0 }),
        writeBytes: Type.Integer({ minimum: 0 }),
        source: Type.Union([Type.Literal('cgroup'), Type.Literal('rusage')], {
          description: "cgroup: its whole tree; rusage: its keeper's account of the processes it reaped (peak memory: the largest single process)",
        }),
      },
      { description: 'what it used, once it has ended' },
    ),
  ),
  live: Type.Optional(
    Type.Object(
      {
        cpuPercent: Type.Number({ minimum: 0, description: 'CPU % of one core since the last sample' }),
        memoryBytes: Type.Integer({ minimum: 0, description: 'resident memory of its processes' }),
        sampledAt: Type.String(),
      },
      { description: 'what it uses now, sampled at most once a second: only in answers that ask (live=true) while it runs' },
    ),
  ),
  after: Type.Optional(
    Type.Object(
      { ids: Type.Array(Type.String()), any: Type.Boolean() },
      { description: 'the tasks it waits for: it starts once they have ended, if all exited 0 (any: whatever they ended as)' },
    ),
  ),
}

export const TaskAidsRequestFields = {
  ready: Type.Optional(
    Type.Object(
      {
        pattern: ReadyConditionSchema.properties.pattern,
        port: ReadyConditionSchema.properties.port,
        url: ReadyConditionSchema.properties.url,
        timeoutMs: Type.Optional(
          Type.Integer({ minimum: 1, maximum: REQUEST_LIMITS.timeoutMs, description: `how long it may take from the start (default ${READY_TIMEOUT_MS} ms)` }),
        ),
      },
      { additionalProperties: false, description: 'when the task counts as ready: exactly one of pattern, port and url' },
    ),
  ),
  port: Type.Optional(
    Type.Union([Type.Literal('auto'), Port('a fixed port')], {
      description: 'a port given to the task as PORT: auto picks a free one no other task holds; held until it ends',
    }),
  ),
  after: Type.Optional(
    Type.Array(Type.String({ pattern: TASK_ID_PATTERN }), {
      minItems: 1,
      maxItems: AFTER_MAX,
      description: 'tasks to wait for: it stays queued until they end, and starts if all exited 0',
    }),
  ),
  afterAny: Type.Optional(Type.Boolean({ description: 'with after: start whatever they ended as' })),
}
