/** Who is to blame for an error: the caller sent something wrong, or the system failed. */
export type Blame = 'caller' | 'system'

interface ErrorSpec {
  statusCode: number
  /** `{name}` placeholders are filled from the error's params. */
  message: string
  blame: Blame
  retryable: boolean
  /** Local errors are raised by the client or CLI and never sent over the wire. */
  local?: boolean
}

/** Parts of a message joined into one literal string type, as `+` joins their values. */
type Joined<Parts extends readonly string[]> = Parts extends readonly [infer Head extends string, ...infer Rest extends readonly string[]]
  ? `${Head}${Joined<Rest>}`
  : ''

/**
 * A message too long for one line, given in parts: `'a' + 'b'` would be typed string, and the
 * params of its code (PlaceholdersOf, below) would no longer be checked.
 */
function joined<const Parts extends readonly string[]>(...parts: Parts): Joined<Parts> {
  return parts.join('') as Joined<Parts>
}

/** The one catalogue of tend's error codes. docs/errors.md is checked against it by a test. */
export const ERROR_CATALOGUE = {
  TEND_ERR_VALIDATION: { statusCode: 400, message: 'invalid request: {detail}', blame: 'caller', retryable: false },
  TEND_ERR_INVALID_TASK_ID: {
    statusCode: 400,
    message: 'invalid task id: expected 12 lowercase letters or digits, got {id}',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_INVALID_SIGNAL: {
    statusCode: 400,
    message: 'invalid signal: expected a signal name such as SIGTERM or a number, got {signal}',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_SANDBOXED_CALLER: {
    statusCode: 403,
    message: 'request refused: the caller runs inside a sandbox ({detail}); tasks cannot drive tend',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_UNAUTHORIZED: { statusCode: 401, message: 'not authorized: {detail}', blame: 'caller', retryable: false },
  TEND_ERR_FOREIGN_ORIGIN: {
    statusCode: 403,
    message: 'request refused: {detail}; the console answers only its own pages (no cross-origin requests)',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_CONSOLE_INSECURE: {
    statusCode: 400,
    message: joined(
      'the console would serve {host} in clear text: set consoleTlsCert and consoleTlsKey ',
      '(tend console --tls-cert, --tls-key) for TLS, or pass --insecure (consoleInsecure) to accept that',
    ),
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_CONSOLE_TLS: { statusCode: 400, message: "the console's TLS certificate or key cannot be used: {detail}", blame: 'caller', retryable: false },
  TEND_ERR_CONSOLE_LISTEN: { statusCode: 409, message: 'the console cannot listen on {address}: {detail}', blame: 'caller', retryable: false },
  TEND_ERR_CLUSTER_WORKER: {
    statusCode: 503,
    message: 'the cluster worker {worker}, which holds task {id}, cannot be asked: {detail}',
    blame: 'system',
    retryable: true,
    local: true,
  },
  TEND_ERR_CLUSTER_QUEUED: {
    statusCode: 409,
    message: "task {id} waits on the cluster's queue: no worker has taken it yet, so it has no {what} yet",
    blame: 'caller',
    retryable: true,
    local: true,
  },
  TEND_ERR_CLUSTER_UNAVAILABLE: {
    statusCode: 503,
    message: "the cluster's Redis at {url} cannot be reached: {detail}",
    blame: 'system',
    retryable: true,
    local: true,
  },
  TEND_ERR_READ_ONLY_TOKEN: {
    statusCode: 403,
    message: joined(
      'request refused: token {tokenId} may only read (scope read), ',
      'and {method} {route} changes something: it needs an operator token (tend console makes one)',
    ),
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_SECRET_IN_ARGV: {
    statusCode: 400,
    message: joined(
      '{flag}: a URL with a password must not be on the command line, where every local user ',
      'reads it (/proc/PID/cmdline): give it in {variable}, or in a 0600 file with {fileFlag}',
    ),
    blame: 'caller',
    retryable: false,
    local: true,
  },
  TEND_ERR_SECRET_FILE: { statusCode: 400, message: '{what} {path} cannot be used: {detail}', blame: 'caller', retryable: false, local: true },
  TEND_ERR_CLUSTER_KEY: { statusCode: 400, message: 'cluster key: {detail}', blame: 'caller', retryable: false },
  TEND_ERR_SANDBOX_NOT_ALLOWED: {
    statusCode: 403,
    message: 'sandbox {profile} is not allowed on worker {worker}: its operator allows {allowed} (tend worker --allow-sandbox {profile} allows it)',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_OPERATOR_ONLY: {
    statusCode: 403,
    message: 'operator only: {action} cannot be done for an owner (request made for owner {owner})',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_TASK_NOT_FOUND: { statusCode: 404, message: 'task not found: {id}', blame: 'caller', retryable: false },
  TEND_ERR_TASK_AMBIGUOUS: {
    statusCode: 409,
    message: 'ambiguous task reference: {ref} is the start of several task ids; give more of the id. Candidates: {candidates}',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_ROUTE_NOT_FOUND: { statusCode: 404, message: 'no such route: {method} {url}', blame: 'caller', retryable: false },
  TEND_ERR_IDEMPOTENCY_CONFLICT: {
    statusCode: 409,
    message: 'idempotency key {key} was already used for a different request (task {id})',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_SUBMISSION_REMOVED: {
    statusCode: 410,
    message: joined(
      'idempotency key {key} was already used: its task {id} ended ({outcome}) ',
      'and has been removed since; the command is not run again (a new key runs it again)',
    ),
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_EVENTS_GAP: {
    statusCode: 410,
    message: 'events before seq {oldest} are no longer kept (asked from {since}): list the tasks again, then follow from seq {latest}',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_OUTPUT_MISSING: { statusCode: 410, message: 'output of task {id} is gone: {detail}', blame: 'system', retryable: false },
  TEND_ERR_NETWORK_LOG_UNREADABLE: { statusCode: 410, message: 'network.log of task {id} cannot be read: {detail}', blame: 'system', retryable: false },
  TEND_ERR_OUTPUT_BUSY: { statusCode: 409, message: 'output of task {id} cannot be read now: {detail}', blame: 'system', retryable: true },
  TEND_ERR_TASK_NOT_FINISHED: { statusCode: 409, message: 'task is still {state}: {id} (kill it first, or wait for it)', blame: 'caller', retryable: true },
  TEND_ERR_NO_STDIN: {
    statusCode: 409,
    message: joined(
      'task {id} has no stdin pipe: its stdin is {stdin} (a task takes input only when ',
      'started with one: stdin pipe in the API, tend run --stdin, bash with stdin: true)',
    ),
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_STDIN_CLOSED: { statusCode: 409, message: 'stdin of task {id} is closed: its end of input was already sent', blame: 'caller', retryable: false },
  TEND_ERR_TASK_FINISHED: { statusCode: 409, message: 'task {id} has ended ({state}): it reads no more input', blame: 'caller', retryable: false },
  TEND_ERR_TASK_NOT_STARTED: {
    statusCode: 409,
    message: 'task {id} has not started yet ({state}) after {waitMs}ms: send its input once it runs',
    blame: 'caller',
    retryable: true,
  },
  TEND_ERR_STDIN_FULL: {
    statusCode: 409,
    message: joined(
      'stdin of task {id} is full: {acceptedBytes} of {totalBytes} bytes were written in {waitMs}ms, ',
      'the rest (from byte {acceptedBytes} of this input) was not; the task is not reading its input',
    ),
    blame: 'caller',
    retryable: true,
  },
  TEND_ERR_NO_FREE_PORT: {
    statusCode: 503,
    message: 'no free port for port auto in {first}-{last}: every one is held by a task that has not ended, or listened on',
    blame: 'system',
    retryable: true,
  },
  TEND_ERR_OWNER_PORTS_USED_UP: {
    statusCode: 429,
    message:
      'no port auto for owner {owner}: its tasks not ended hold {limit} ports of the range already (perOwnerAutoPorts): {holders};' +
      ' each is free again once its task ends',
    blame: 'caller',
    retryable: true,
  },
  TEND_ERR_PIPE_UNOPENABLE: { statusCode: 500, message: 'the {what} of task {id} cannot be opened: {path} ({detail})', blame: 'system', retryable: false },
  TEND_ERR_PIPE_WRITE_FAILED: { statusCode: 500, message: 'the {what} of task {id} took no input: {detail}', blame: 'system', retryable: false },
  TEND_ERR_STDIN_NO_KEEPER: { statusCode: 500, message: 'task {id} has no keeper holding its stdin pipe ({state})', blame: 'system', retryable: false },
  TEND_ERR_PIPE_GONE: { statusCode: 410, message: 'the {what} of task {id} is gone: {detail}; nothing was written', blame: 'system', retryable: false },
  TEND_ERR_TERMINAL_BUSY: {
    statusCode: 503,
    message: joined(
      'the terminal of task {id} takes no resize now: its keeper has not read the requests ',
      'before this one (it is stopped or starved); retry in {retryAfterSeconds} s',
    ),
    blame: 'system',
    retryable: true,
  },
  TEND_ERR_NO_TTY: {
    statusCode: 409,
    message: 'task {id} has no terminal (a task runs on one only when started with it: tty in the API, tend run --tty, bash with tty: true)',
    blame: 'caller',
    retryable: false,
  },
  TEND_ERR_TTY_UNAVAILABLE: { statusCode: 503, message: 'terminals are not available here: {detail}', blame: 'system', retryable: false },
  TEND_ERR_STDIN_UNAVAILABLE: { statusCode: 503, message: 'stdin pipes are not available here: {detail}', blame: 'system', retryable: false },
  TEND_ERR_SANDBOX_UNAVAILABLE: { statusCode: 503, message: 'sandbox {profile} is not available here: {detail}', blame: 'system', retryable: false },
  TEND_ERR_NETWORK_UNAVAILABLE: { statusCode: 503, message: 'network {mode} is not available here: {detail}', blame: 'system', retryable: false },
  TEND_ERR_SHUTTING_DOWN: { statusCode: 503, message: 'daemon is shutting down: {detail}', blame: 'system', retryable: true },
  TEND_ERR_ILLEGAL_TRANSITION: { statusCode: 500, message: 'illegal task transition: {id} cannot go from {from} to {to}', blame: 'system', retryable: false },
  TEND_ERR_SPOOL_FULL: {
    statusCode: 507,
    message: 'the spool has no space left: {detail}; free space (tend gc, tend rm) and retry',
    blame: 'system',
    retryable: true,
  },
  TEND_ERR_SPOOL_READ_ONLY: {
    statusCode: 503,
    message: 'the spool cannot be written: {detail}; make its file system writable again and retry',
    blame: 'system',
    retryable: true,
  },
  TEND_ERR_SPOOL_IO: { statusCode: 500, message: 'spool i/o failed: {detail}', blame: 'system', retryable: true },
  TEND_ERR_INTERNAL: { statusCode: 500, message: 'internal error: {detail}', blame: 'system', retryable: false },
  TEND_ERR_DAEMON_UNAVAILABLE: { statusCode: 503, message: 'daemon unavailable: {detail}', blame: 'system', retryable: true, local: true },
  TEND_ERR_DAEMON_START_FAILED: { statusCode: 503, message: 'daemon failed to start: {detail}', blame: 'system', retryable: true, local: true },
  TEND_ERR_DAEMON_RUNNING: {
    statusCode: 409,
    message: 'another daemon is already running on {home} (pid {pid})',
    blame: 'caller',
    retryable: false,
    local: true,
  },
  TEND_ERR_CONFIG_INVALID: { statusCode: 400, message: 'invalid configuration: {detail}', blame: 'caller', retryable: false, local: true },
  TEND_ERR_HOME_UNWRITABLE: {
    statusCode: 503,
    message: 'the daemon cannot write its home {path}: {detail}; make it writable, or set TEND_HOME to a folder it can write',
    blame: 'system',
    retryable: true,
    local: true,
  },
  TEND_ERR_HOME_UNSAFE: { statusCode: 400, message: 'the daemon will not use {path}: {detail}', blame: 'caller', retryable: false, local: true },
  TEND_ERR_DAEMON_TIMEOUT: { statusCode: 504, message: 'the daemon did not answer within {timeout}: {detail}', blame: 'system', retryable: true, local: true },
  TEND_ERR_PROTOCOL: { statusCode: 502, message: 'unexpected answer from the daemon: {detail}', blame: 'system', retryable: false, local: true },
  TEND_ERR_USAGE: { statusCode: 400, message: 'usage error: {detail}', blame: 'caller', retryable: false, local: true },
  TEND_ERR_SERVICE_UNAVAILABLE: {
    statusCode: 503,
    message: 'no systemd to install the service with: {detail}; `tend service install --print` prints the unit to install by hand',
    blame: 'system',
    retryable: false,
    local: true,
  },
  TEND_ERR_SERVICE_FAILED: { statusCode: 500, message: 'the service could not be {action}: {detail}', blame: 'system', retryable: true, local: true },
} as const satisfies Record<string, ErrorSpec>

export type ErrorCode = keyof typeof ERROR_CATALOGUE

/** The `{name}` placeholders of a message template, as a union of names. */
type PlaceholdersOf<Template extends string> = Template extends `${string}{${infer Name}}${infer Rest}` ? Name | PlaceholdersOf<Rest> : never

/**
 * The params a code's message needs: one per placeholder of its template, so that a missing one is
 * a compile error (never a `{detail}` in a message). More may be given (retryAfterSeconds).
 */
export type ErrorParams<Code extends ErrorCode> = Code extends ErrorCode
  ? { [Name in PlaceholdersOf<(typeof ERROR_CATALOGUE)[Code]['message']>]: unknown } & Record<string, unknown>
  : never

/** The wire shape of every error answer (fastify's), plus tend's blame and retryability. */
export interface WireError {
  statusCode: number
  code: string
  error: string
  message: string
  blame?: Blame
  retryable?: boolean
}

export class TendError<Code extends ErrorCode = ErrorCode> extends Error {
  override readonly name = 'TendError'
  readonly code: Code
  readonly statusCode: number
  readonly blame: Blame
  readonly retryable: boolean
  readonly params: Record<string, unknown>

  constructor(code: Code, params: ErrorParams<Code>, options?: { cause?: unknown })
  /** A message of its own: the params need not fill the template. */
  constructor(code: Code, params: Record<string, unknown>, options: { cause?: unknown; message: string })
  constructor(code: Code, params: Record<string, unknown>, options: { cause?: unknown; message?: string } = {}) {
    const spec: ErrorSpec = ERROR_CATALOGUE[code]
    super(options.message ?? fillTemplate(spec.message, params), options.cause === undefined ? undefined : { cause: options.cause })
    this.code = code
    this.statusCode = spec.statusCode
    this.blame = spec.blame
    this.retryable = spec.retryable
    this.params = params
  }

  /**
   * Seconds after which the same request may succeed, for a Retry-After header: set by the errors
   * that know it (params.retryAfterSeconds, a whole number of at least 1).
   */
  get retryAfterSeconds(): number | undefined {
    const value = this.params.retryAfterSeconds
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 ? value : undefined
  }

  toWire(): WireError {
    return {
      statusCode: this.statusCode,
      code: this.code,
      error: HTTP_REASONS[this.statusCode] ?? 'Error',
      message: this.message,
      blame: this.blame,
      retryable: this.retryable,
    }
  }

  /**
   * Rebuilds a typed error from a wire answer; unknown codes become TEND_ERR_PROTOCOL. The params
   * are read back out of the message by its code's template (as text); a message the template does
   * not match keeps its whole text as `detail`.
   */
  static fromWire(wire: Partial<WireError>): TendError {
    const code = typeof wire.code === 'string' && wire.code in ERROR_CATALOGUE ? (wire.code as ErrorCode) : 'TEND_ERR_PROTOCOL'
    const message = typeof wire.message === 'string' ? wire.message : undefined
    const params = (message === undefined ? null : readTemplate(ERROR_CATALOGUE[code].message, message)) ?? { detail: message ?? JSON.stringify(wire) }
    return message === undefined ? new TendError(code, params as ErrorParams<ErrorCode>) : new TendError(code, params, { message })
  }
}

export function isTendError(error: unknown, code?: ErrorCode): error is TendError {
  return error instanceof TendError && (code === undefined || error.code === code)
}

/**
 * The params that `fillTemplate(template, params)` made `message` of, as text; null when it was not
 * made so. Each param but the last is read up to the first text that follows it in the template:
 * one that held that text itself reads back short.
 */
export function readTemplate(template: string, message: string): Record<string, string> | null {
  const names: string[] = []
  const pattern = template
    .split(/\{(\w+)\}/)
    .map((part, index) => {
      if (index % 2 === 0) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
      names.push(part)
      return '([\\s\\S]*?)'
    })
    .join('')
  const match = new RegExp(`^${pattern}$`).exec(message)
  if (!match) return null
  const params: Record<string, string> = {}
  names.forEach((name, index) => (params[name] ??= match[index + 1] ?? ''))
  return params
}

function fillTemplate(template: string, params: Record<string, unknown>): string {
  return template.replace(/\{(\w+)\}/g, (_whole, key: string) => {
    const value = params[key]
    if (value === undefined) return `{${key}}`
    return typeof value === 'string' ? value : JSON.stringify(value)
  })
}

const HTTP_REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  410: 'Gone',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  507: 'Insufficient Storage',
}
