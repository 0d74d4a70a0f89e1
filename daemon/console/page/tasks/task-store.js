// The page's copy of the daemon's tasks, fed by the list, the event stream and the polls.
// Answers can arrive out of order (a poll answered before an event, events replayed after a
// fresh list), so a task never moves back in its life: queued, then running, then finished.

const RANK = { queued: 0, running: 1 }
const rank = (state) => RANK[state] ?? 2

const tasks = new Map()
const counts = new Map()
const listeners = new Set()

/** listener(kind, task, previous): kind is 'upsert' or 'remove'. */
export function subscribe(listener) {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

function emit(kind, task, previous) {
  for (const listener of listeners) listener(kind, task, previous)
}

function count(state, delta) {
  counts.set(state, (counts.get(state) ?? 0) + delta)
}

export function get(id) {
  return tasks.get(id)
}

export function size() {
  return tasks.size
}

export function countOf(state) {
  return counts.get(state) ?? 0
}

export function all() {
  return tasks.values()
}

/** Returns false when the task is older news than what is held. */
export function upsert(task) {
  if (!task || typeof task.id !== 'string') return false
  const previous = tasks.get(task.id)
  if (previous) {
    if (rank(task.state) < rank(previous.state)) return false
    // A finished task never changes again, except outputBytes settling (a poll racing its end).
    if (rank(previous.state) === 2 && previous.state === task.state && previous.outputBytes === task.outputBytes && previous.endedAt === task.endedAt) return false
    count(previous.state, -1)
  }
  tasks.set(task.id, task)
  count(task.state, 1)
  emit('upsert', task, previous)
  return true
}

export function remove(id) {
  const previous = tasks.get(id)
  if (!previous) return false
  tasks.delete(id)
  count(previous.state, -1)
  emit('remove', previous, previous)
  return true
}

/** A fresh full list: tasks missing from it were removed while the page was not listening. */
export function replaceAll(list) {
  const seen = new Set(list.map((task) => task.id))
  for (const id of [...tasks.keys()]) if (!seen.has(id)) remove(id)
  for (const task of list) upsert(task)
}
