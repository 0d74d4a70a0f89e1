import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { isFinished, LOST_PREFIX, pollUntil, taskQueuesKey, type Task } from '../../protocol/index.js'

/** BullMQ's key prefix (the workers and clients use its default). */
const BULL_PREFIX = 'bull'

/**
 * Moves a job that was failed as lost to completed with its task's real end, in one step of
 * Redis's own (a script runs alone): only when the job is failed, its failure says lost, and its
 * progress names this worker and this attempt. Any retry that ran (here or elsewhere) reported
 * itself in the job's progress with a later attempt when it was admitted, so a job whose progress
 * names another attempt or worker was superseded and is left as it is; a job not failed (waiting,
 * or active: a worker is judging the attempt and asks this worker for its end) is left too.
 */
const ANSWER_LOST_JOB = `
if redis.call('ZSCORE', KEYS[3], ARGV[1]) ~= false then return 'completed' end
if redis.call('ZSCORE', KEYS[2], ARGV[1]) == false then return 'not-failed' end
local fields = redis.call('HMGET', KEYS[1], 'progress', 'failedReason')
local ok, progress = pcall(cjson.decode, fields[1] or '')
if not ok or type(progress) ~= 'table' then return 'no-progress' end
local attempt = progress['attempt']
if attempt == nil then attempt = 1 end
if progress['worker'] ~= ARGV[2] or tostring(attempt) ~= ARGV[3] then return 'superseded' end
if string.sub(fields[2] or '', 1, string.len(ARGV[6])) ~= ARGV[6] then return 'not-lost' end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
redis.call('HSET', KEYS[1], 'returnvalue', ARGV[4], 'finishedOn', ARGV[5])
redis.call('HDEL', KEYS[1], 'failedReason', 'stacktrace')
redis.call('XADD', KEYS[4], '*', 'event', 'completed', 'jobId', ARGV[1], 'returnvalue', ARGV[4])
return 'answered'
`

export type AnswerOutcome = 'answered' | 'completed' | 'not-failed' | 'no-progress' | 'superseded' | 'not-lost' | 'not-a-job'

export interface AnswerOptions {
  redis: Pick<Redis, 'hget' | 'eval'>
  base: string
  /** This worker's name. */
  worker: string
  /** How long a lock lives unrenewed (clusterStallMs): a job still active is looked at again for a few of these. */
  stallMs: number
  log: Logger
}

/** How long another worker may take to judge an attempt it cannot ask about (run-job.ts: its look times out after 5 s). */
const JUDGING_MS = 10_000

/**
 * Which attempt of its cluster job a record ran as, from the key the worker admitted it with
 * (run-job.ts: `cluster-<id>` for the first, `cluster-<id>-<n>` for the nth); null: not a cluster task's.
 */
export function attemptOfRecord(task: Task): number | null {
  const key = task.idempotencyKey
  if (key === `cluster-${task.id}`) return 1
  const match = key?.startsWith(`cluster-${task.id}-`) ? /^\d+$/.exec(key.slice(`cluster-${task.id}-`.length)) : null
  return match ? Number(match[0]) : null
}

/**
 * A worker answers for the jobs it ran (docs/cluster.md): a cluster task that ended here while the
 * job's other workers could not ask (this worker was frozen, killed, or away from Redis), and whose
 * job was meanwhile failed as lost, gets its real end in the job. Never over a retry: see ANSWER_LOST_JOB.
 */
export async function answerForReturnedTask(options: AnswerOptions, task: Task): Promise<AnswerOutcome> {
  const attempt = attemptOfRecord(task)
  // A record lost here says no more than the job's lost already does.
  if (attempt === null || !isFinished(task) || task.state === 'lost') return 'not-a-job'
  const queue = await options.redis.hget(taskQueuesKey(options.base), task.id)
  if (!queue) return 'not-a-job'
  const at = `${BULL_PREFIX}:${queue}`
  const outcome = (await options.redis.eval(
    ANSWER_LOST_JOB,
    4,
    `${at}:${task.id}`,
    `${at}:failed`,
    `${at}:completed`,
    `${at}:events`,
    task.id,
    options.worker,
    String(attempt),
    JSON.stringify(task),
    String(Date.now()),
    LOST_PREFIX,
  )) as AnswerOutcome
  if (outcome === 'answered')
    options.log.info({ taskId: task.id, attempt, state: task.state }, "job judged lost while this worker was away answered with its task's real end")
  return outcome
}

/**
 * Answers for a task that ended here, looking again while its job is neither failed nor completed:
 * a worker judging the attempt while this one could not answer fails the job a moment later, and
 * it is answered then. Gives up once the job has been settled one way or the other, or after a few
 * stall intervals (the job is then a retry's, or completed by whoever judged it). `stopped` ends it early.
 */
export async function answerWhenSettled(options: AnswerOptions, task: Task, stopped: () => boolean): Promise<AnswerOutcome> {
  let outcome: AnswerOutcome = 'not-failed'
  await pollUntil(
    async () => (outcome = await answerForReturnedTask(options, task)) !== 'not-failed' || stopped(),
    3 * options.stallMs + JUDGING_MS,
    options.stallMs / 2,
  )
  return outcome
}

/** How many of a returning worker's tasks are answered for at once (a spool may hold thousands). */
const AT_ONCE = 8

/** Every finished cluster task of this worker's spool, answered for (at start: what ended while it was away). */
export async function answerForReturnedTasks(options: AnswerOptions, tasks: Task[], stopped: () => boolean): Promise<number> {
  const queue = tasks.filter((task) => attemptOfRecord(task) !== null && isFinished(task) && task.state !== 'lost')
  let answered = 0
  const next = async (): Promise<void> => {
    for (let task = queue.shift(); task && !stopped(); task = queue.shift()) {
      const outcome = await answerWhenSettled(options, task, stopped).catch((error: unknown) => {
        // Stopped: the stop cut the connection under the look, which says nothing of the job.
        if (!stopped()) options.log.warn({ err: error, taskId: task!.id }, 'job of a task that ended here could not be answered')
        return null
      })
      if (outcome === 'answered') answered += 1
    }
  }
  await Promise.all(Array.from({ length: AT_ONCE }, next))
  return answered
}
