// The bounds and patterns of requests, as plain values: the CLI and the client check against them
// without loading the schemas (typebox) that the daemon builds from them in schemas.ts.

/**
 * Bounds of the numbers a request can carry. Each is the most the field can honestly mean, so that
 * no value out of range reaches a syscall (a cgroup file, a read offset) or a timer; the schemas
 * below enforce them and a value outside answers 400 naming the field.
 */
export const REQUEST_LIMITS = {
  /** A task's time limit: one year, in milliseconds. */
  timeoutMs: 365 * 24 * 3_600_000,
  /** A task's output cap: 16 TiB. */
  maxOutputBytes: 16 * 2 ** 40,
  /** A strict task's memory limit: 1 MiB to 1 TiB. */
  memoryBytesMin: 2 ** 20,
  memoryBytes: 2 ** 40,
  /** A strict task's process limit: the kernel's ceiling for pid_max (PID_MAX_LIMIT on 64-bit). */
  pidsMax: 4_194_304,
  /** Time between the first signal and SIGKILL: one hour, in milliseconds. */
  graceMs: 3_600_000,
  /** Age of tasks gc removes: a century, in milliseconds (older than anything tend wrote). */
  olderThanMs: 100 * 365 * 24 * 3_600_000,
  /** Byte offsets, line counts and event sequence numbers: what a JavaScript number holds exactly. */
  counter: Number.MAX_SAFE_INTEGER,
  /** Writable paths of one task (each becomes a mount). */
  writablePaths: 256,
  /** Destinations one task may be allowed besides the daemon's list. */
  allowNet: 64,
} as const

/** Text that reaches a path, an argv or an environment: a NUL byte would cut it short there. */
export const NO_NUL_PATTERN = '^[^\\u0000]*$'
export const ABSOLUTE_PATH_PATTERN = '^/[^\\u0000]*$'

/** Most bytes one input request carries (after base64 decoding): 1 MiB. */
export const INPUT_MAX_BYTES = 1024 * 1024

/** Most warnings a task's record keeps (`warnings`), and most characters of each. */
export const TASK_WARNINGS_MAX = 8
export const TASK_WARNING_CHARS_MAX = 1000

export const READ_MAX_BYTES_LIMIT = 16 * 1024 * 1024
export const WAIT_MS_LIMIT = 60_000
