import { formatDuration, TASK_ID_PREFIX_MIN, TendError, type Task } from '../../protocol/index.js'

/** The most candidates an ambiguous reference's error lists (it says how many more there were). */
const CANDIDATES_SHOWN = 10

/**
 * The task a reference names among `tasks` (those the caller may see, in list order: created
 * first): its exact id; else the newest task with that name; else the one task whose id starts
 * with it (4 or more characters). A name wins over an id prefix it also is: a name is chosen, a
 * prefix is only typed short. Throws TEND_ERR_TASK_NOT_FOUND naming the reference when nothing
 * matches, TEND_ERR_TASK_AMBIGUOUS listing the candidates when several ids start with it.
 */
export function resolveTaskRef(tasks: readonly Task[], ref: string, now = Date.now()): string {
  let named: Task | undefined
  const prefixed: Task[] = []
  const prefix = ref.length >= TASK_ID_PREFIX_MIN
  for (const task of tasks) {
    if (task.id === ref) return task.id
    if (task.name === ref) named = task
    else if (prefix && task.id.startsWith(ref)) prefixed.push(task)
  }
  if (named) return named.id
  if (prefixed.length === 1) return prefixed[0]!.id
  if (prefixed.length === 0) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id: ref })
  throw new TendError('TEND_ERR_TASK_AMBIGUOUS', { ref, candidates: describeCandidates(prefixed, now) })
}

/** `id (name, state, 3m ago)` for each, newest first; the rest counted. */
function describeCandidates(tasks: readonly Task[], now: number): string {
  const newestFirst = [...tasks].reverse()
  const shown = newestFirst.slice(0, CANDIDATES_SHOWN).map((task) => {
    const age = formatDuration(Math.max(0, now - Date.parse(task.createdAt)))
    return `${task.id} (${task.name === null ? 'no name' : JSON.stringify(task.name)}, ${task.state}, ${age} ago)`
  })
  const more = newestFirst.length - shown.length
  return more > 0 ? `${shown.join(', ')} and ${more} more` : shown.join(', ')
}
