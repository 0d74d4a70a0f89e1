import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { fullFormats } from 'ajv-formats/dist/formats.js'
import { Type, type TSchema } from 'typebox'
import {
  isTaskId,
  LIFETIMES,
  NETWORK_MODES,
  RAN_AS_IDENTITIES,
  RAN_AS_KEYRINGS,
  TASK_STDIN,
  OWNER_PATTERN,
  RECORDED_STATES,
  SANDBOX_PROFILES,
  SCHEMA_VERSION,
  RECORDED_STOPPED_BY,
  TASK_ID_PATTERN,
  TERMINAL_SIZE_MAX,
  TASK_WARNING_CHARS_MAX,
  TASK_WARNINGS_MAX,
  type RecordedState,
} from '../protocol/index.js'

const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()])
const IsoDate = Type.String({ format: 'date-time' })
const Count = Type.Integer({ minimum: 0 })
const Pid = Type.Integer({ minimum: 1 })

/**
 * Fields every task.json has, whatever the task's state (protocol/task.ts, TaskBase). Fields not
 * named here are let through: a later tend of the same schemaVersion may add optional ones.
 */
export const RECORD_BASE_FIELDS = {
  schemaVersion: Type.Literal(SCHEMA_VERSION),
  id: Type.String({ pattern: TASK_ID_PATTERN }),
  name: Nullable(Type.String()),
  owner: Type.String({ pattern: OWNER_PATTERN }),
  command: Type.Array(Type.String()),
  shell: Type.Boolean(),
  cwd: Type.String(),
  envKeys: Type.Array(Type.String()),
  timeoutMs: Nullable(Count),
  maxOutputBytes: Count,
  outputBytes: Count,
  // Absent in records of tends before lifetimes: read as `owner`.
  lifetime: Type.Optional(Type.Enum(LIFETIMES)),
  // Absent in records of tends before stdin pipes: read as `null`.
  stdin: Type.Optional(Type.Enum(TASK_STDIN)),
  // Absent in records of tends before terminals: read as null.
  tty: Type.Optional(
    Nullable(Type.Object({ cols: Type.Integer({ minimum: 1, maximum: TERMINAL_SIZE_MAX }), rows: Type.Integer({ minimum: 1, maximum: TERMINAL_SIZE_MAX }) })),
  ),
  sandbox: Type.Enum(SANDBOX_PROFILES),
  // true and false in records of tends before network modes: read as host and loopback.
  network: Type.Union([Type.Enum(NETWORK_MODES), Type.Boolean()]),
  allowNet: Type.Optional(Type.Array(Type.String())),
  writablePaths: Type.Array(Type.String()),
  sandboxWritable: Type.Optional(Type.Array(Type.String())),
  warnings: Type.Optional(Type.Array(Type.String({ maxLength: TASK_WARNING_CHARS_MAX }), { maxItems: TASK_WARNINGS_MAX })),
  memoryBytes: Nullable(Count),
  pidsMax: Nullable(Count),
  createdAt: IsoDate,
  spool: Type.String(),
  idempotencyKey: Type.Optional(Type.String()),
  requestHash: Type.Optional(Type.String()),
  // Set once a task starts; absent in records of tends before task identities.
  ranAs: Type.Optional(
    Type.Object({
      uid: Count,
      gid: Count,
      identity: Type.Enum(RAN_AS_IDENTITIES),
      fallback: Type.Optional(Type.String()),
      keyring: Type.Enum(RAN_AS_KEYRINGS),
    }),
  ),
}

const notStarted = { startedAt: Type.Null(), pid: Type.Null() }
const started = { startedAt: IsoDate, pid: Pid }
// stoppedBy is absent in records of tends before it: read as null.
const notStopped = { stoppedBy: Type.Optional(Type.Null()) }
const stoppedBy = (values: readonly string[]) => ({ stoppedBy: Type.Optional(Nullable(Type.Enum(values))) })
const notEnded = { endedAt: Type.Null(), exitCode: Type.Null(), signal: Type.Null(), reason: Type.Null(), ...notStopped }

/** Each state's own fields, exactly as the Task union in protocol/task.ts has them. */
const STATE_FIELDS: Record<RecordedState, Record<string, TSchema>> = {
  queued: { ...notStarted, ...notEnded },
  running: { ...started, ...notEnded },
  exited: { ...started, endedAt: IsoDate, exitCode: Type.Integer(), signal: Type.Null(), reason: Type.Null(), ...notStopped },
  // A queued task can be killed before it starts (startedAt and pid both null; checked below).
  killed: {
    startedAt: Nullable(IsoDate),
    pid: Nullable(Pid),
    endedAt: IsoDate,
    exitCode: Nullable(Type.Integer()),
    signal: Nullable(Type.String()),
    reason: Type.String(),
    ...stoppedBy(RECORDED_STOPPED_BY),
  },
  timed_out: {
    ...started,
    endedAt: IsoDate,
    exitCode: Nullable(Type.Integer()),
    signal: Nullable(Type.String()),
    reason: Type.String(),
    ...stoppedBy(['timeout']),
  },
  failed: { ...notStarted, endedAt: IsoDate, exitCode: Type.Null(), signal: Type.Null(), reason: Type.String(), ...stoppedBy(['daemon-stop']) },
  lost: { ...started, endedAt: IsoDate, exitCode: Type.Null(), signal: Type.Null(), reason: Type.String(), ...notStopped },
}

// ajv is the daemon's one validator (fastify's serializer loads it anyway); every error is
// wanted, to name each bad field. The schemas are compiled on first use: a daemon whose spool
// holds only good records still checks each one, so this is paid once, at start.
const ajv = new Ajv({ allErrors: true, strict: false, verbose: true })
ajv.addFormat('date-time', fullFormats['date-time'])
const compiled = new Map<TSchema, ValidateFunction>()
function validatorOf(schema: TSchema): ValidateFunction {
  let validate = compiled.get(schema)
  if (!validate) compiled.set(schema, (validate = ajv.compile(schema)))
  return validate
}

const RECORD_SCHEMAS = new Map<unknown, TSchema>(
  RECORDED_STATES.map((state) => [state, Type.Object({ ...RECORD_BASE_FIELDS, state: Type.Literal(state), ...STATE_FIELDS[state] })]),
)
/** For a record whose state is missing or unknown: what every state shares, and the list of states. */
const ANY_STATE_SCHEMA = Type.Object({ ...RECORD_BASE_FIELDS, state: Type.Enum(RECORDED_STATES) })

/** Violations named in a reason; the rest are counted. */
const NAMED_VIOLATIONS = 3

/**
 * What makes a parsed task.json unusable as the record of the folder `id`, as a reason for the
 * operator (`task.json invalid: /createdAt is required; ...`); null when it is a valid record.
 */
export function recordProblem(value: unknown, id: string): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return `task.json invalid: expected an object, got ${Array.isArray(value) ? 'an array' : received(value)}`
  const record = value as Record<string, unknown>
  if (typeof record.schemaVersion === 'number' && record.schemaVersion !== SCHEMA_VERSION) {
    return `task.json has schemaVersion ${record.schemaVersion}; this tend reads schemaVersion ${SCHEMA_VERSION}`
  }
  if (typeof record.id === 'string' && record.id !== id) return `task.json names another task: ${isTaskId(record.id) ? record.id : received(record.id)}`
  const problems = violations(RECORD_SCHEMAS.get(record.state) ?? ANY_STATE_SCHEMA, record)
  if (problems.length === 0 && record.state === 'killed' && (record.startedAt === null) !== (record.pid === null)) {
    problems.push('/startedAt and /pid must both be set or both be null')
  }
  if (problems.length === 0) return null
  const more = problems.length - NAMED_VIOLATIONS
  return `task.json invalid: ${problems.slice(0, NAMED_VIOLATIONS).join('; ')}${more > 0 ? `; and ${more} more` : ''}`
}

/** The schema's errors as one sentence per field: what it must be and what it was. */
function violations(schema: TSchema, record: Record<string, unknown>): string[] {
  const missing: string[] = []
  // Per field, every shape it could have had (a nullable field reports each branch).
  const expected = new Map<string, string[]>()
  const validate = validatorOf(schema)
  const errors: ErrorObject[] = validate(record) ? [] : (validate.errors ?? [])
  for (const error of errors) {
    const params = error.params as Record<string, unknown>
    if (error.keyword === 'required') {
      missing.push(`${error.instancePath}/${String(params.missingProperty)} is required`)
      continue
    }
    const shape = expectedShape(error.keyword, params, error.message ?? error.keyword)
    if (shape === null) continue
    const shapes = expected.get(error.instancePath) ?? []
    if (!shapes.includes(shape)) shapes.push(shape)
    expected.set(error.instancePath, shapes)
  }
  const wrong = [...expected].map(([path, shapes]) => `${path} must be ${shapes.join(' or ')} (got ${received(valueAt(record, path))})`)
  return [...missing, ...wrong]
}

function expectedShape(keyword: string, params: Record<string, unknown>, message: string): string | null {
  switch (keyword) {
    case 'type':
      return String(params.type)
    case 'enum':
      return `one of ${(params.allowedValues as unknown[]).join(', ')}`
    case 'const':
      return JSON.stringify(params.allowedValue)
    case 'format':
      return params.format === 'date-time' ? 'an ISO 8601 date-time' : `a ${String(params.format)} string`
    case 'pattern':
      return `a string matching ${String(params.pattern)}`
    case 'minimum':
      return `at least ${String(params.limit)}`
    case 'anyOf':
      // Said by its branches' own errors.
      return null
    default:
      // Not a keyword these schemas use: ajv's own words.
      return `valid (${message})`
  }
}

function valueAt(record: unknown, path: string): unknown {
  let value = record
  for (const token of path.split('/').slice(1)) {
    if (typeof value !== 'object' || value === null) return undefined
    value = (value as Record<string, unknown>)[token.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  return value
}

function received(value: unknown): string {
  const text = value === undefined ? 'nothing' : JSON.stringify(value)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}

/**
 * The fields of a damaged record that still have the right type on their own (to show what an
 * entry was); the rest are left out.
 */
export function salvageRecordFields(value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {}
  const record = value as Record<string, unknown>
  const fields = RECORD_BASE_FIELDS as Record<string, TSchema>
  return Object.fromEntries(
    Object.keys(fields)
      .filter((key) => key in record && validatorOf(fields[key]!)(record[key]))
      .map((key) => [key, record[key]]),
  )
}
