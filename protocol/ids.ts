/** Task ids: 12 characters of lowercase letters and digits — safe in paths, URLs and shells. */
export const TASK_ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz'
export const TASK_ID_LENGTH = 12
export const TASK_ID_PATTERN = `^[0-9a-z]{${TASK_ID_LENGTH}}$`
const TASK_ID_REGEXP = new RegExp(TASK_ID_PATTERN)

export function isTaskId(value: unknown): value is string {
  return typeof value === 'string' && TASK_ID_REGEXP.test(value)
}

/** The shortest id prefix that names a task (`tend logs abcd`): shorter ones would match too often to help. */
export const TASK_ID_PREFIX_MIN = 4

/** Owners name the agent or session that started a task: printable, no slashes or spaces. */
export const OWNER_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'
export const DEFAULT_OWNER = 'operator'

/**
 * Requests that carry this header act for one owner: they see, read, wait on, kill and remove only
 * that owner's tasks, and start tasks only for it. Requests without it are the operator's.
 */
export const OWNER_HEADER = 'x-tend-owner'

/**
 * `POST /v1/tasks` with this header is idempotent: every try with the same key (and body) answers
 * the first task. The client sends a fresh one per start() and reuses it when it retries.
 */
export const IDEMPOTENCY_HEADER = 'idempotency-key'
export const IDEMPOTENCY_KEY_PATTERN = '^[A-Za-z0-9._:-]{1,128}$'
