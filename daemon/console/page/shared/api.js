// Calls to the daemon's /v1 API with the page's session cookie (same origin, default credentials).
// A 401 anywhere means the session is over: every later call fails at once without a request, so
// that loops and timers stop by themselves.

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.message || body?.error || `HTTP ${status}`)
    this.status = status
    this.code = body?.code ?? null
  }
}

export class SessionEndedError extends Error {
  constructor() {
    super('Session ended: open the URL that `tend console` prints')
    this.code = 'TEND_ERR_UNAUTHORIZED'
  }
}

let sessionEnded = false
const sessionEndedListeners = new Set()

export function onSessionEnded(listener) {
  sessionEndedListeners.add(listener)
}

export function isSessionEnded() {
  return sessionEnded
}

export function endSession() {
  if (sessionEnded) return
  sessionEnded = true
  for (const listener of sessionEndedListeners) listener()
}

/**
 * One JSON request. Changes carry a JSON body (`{}` when empty): the server refuses a change
 * without one, and the browser adds the Origin header it requires.
 */
export async function api(path, { method = 'GET', body, signal } = {}) {
  if (sessionEnded) throw new SessionEndedError()
  const init = { method, signal, headers: { accept: 'application/json' } }
  if (method !== 'GET' && method !== 'HEAD') {
    init.headers['content-type'] = 'application/json'
    init.body = JSON.stringify(body ?? {})
  }
  let response
  try {
    response = await fetch(path, init)
  } catch (error) {
    if (isAbort(error)) throw error
    // fetch only says "Failed to fetch": say what it means here.
    throw new ApiError(0, { code: 'NETWORK', message: 'the daemon did not answer (is it still running?)' })
  }
  let data = null
  try {
    data = await response.json()
  } catch (error) {
    if (error.name === 'AbortError') throw error
  }
  if (response.status === 401) {
    endSession()
    throw new SessionEndedError()
  }
  if (!response.ok) throw new ApiError(response.status, data)
  return data
}

/**
 * The task list; the daemon wraps it as {tasks: [...]}, a bare array is taken too. `live`: running
 * tasks carry their CPU and memory now (sampled for this request).
 */
export async function listTasks(all, { live = false } = {}) {
  const query = [all && 'all=true', live && 'live=true'].filter(Boolean).join('&')
  const answer = await api(query ? `/v1/tasks?${query}` : '/v1/tasks')
  return Array.isArray(answer) ? answer : answer.tasks
}

export function taskPath(id, rest = '') {
  return `/v1/tasks/${encodeURIComponent(id)}${rest}`
}

export function isAbort(error) {
  return error?.name === 'AbortError'
}

/** Resolves after ms, early (rejecting) when the signal aborts: loops sleep without outliving their view. */
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new DOMException('aborted', 'AbortError'))
    const timer = setTimeout(done, ms)
    function done() {
      signal?.removeEventListener('abort', abort)
      resolve()
    }
    function abort() {
      clearTimeout(timer)
      reject(signal.reason ?? new DOMException('aborted', 'AbortError'))
    }
    signal?.addEventListener('abort', abort, { once: true })
  })
}
