import type { FastifyRequest } from 'fastify'
import { OWNER_HEADER, OWNER_PATTERN, TendError, type Task } from '../protocol/index.js'
import type { TaskStore } from './task-store.js'

const OWNER_REGEXP = new RegExp(OWNER_PATTERN)

/** The owner a request acts for, or null for the operator (no owner header). */
export function requestOwner(request: FastifyRequest): string | null {
  const header = request.headers[OWNER_HEADER]
  if (header === undefined) return null
  const owner = Array.isArray(header) ? header[0] : header
  if (!owner || !OWNER_REGEXP.test(owner)) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: `headers/${OWNER_HEADER}: expected letters, digits and ._:@- (up to 128), got ${JSON.stringify(owner)}` })
  }
  return owner
}

/**
 * A task as the requester may see it: another owner's task is answered as not found, so an owner
 * cannot even learn that it exists.
 */
export function visibleTask(store: TaskStore, request: FastifyRequest, id: string): Task {
  const task = store.get(id)
  const owner = requestOwner(request)
  if (owner !== null && task.owner !== owner) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
  return task
}
