import type { FastifyRequest } from 'fastify'
import { OWNER_HEADER, OWNER_PATTERN, TendError, type Task } from '../../protocol/index.js'
import type { TaskStore } from '../store/task-store.js'

const OWNER_REGEXP = new RegExp(OWNER_PATTERN)

/** What OWNER_PATTERN admits, in words, for error messages. */
export const OWNER_SHAPE = 'letters, digits and ._:@- (up to 128)'

/** The owner a request acts for, or null for the operator (no owner header). */
export function requestOwner(request: FastifyRequest): string | null {
  const header = request.headers[OWNER_HEADER]
  if (header === undefined) return null
  const owner = Array.isArray(header) ? header[0] : header
  if (!owner || !OWNER_REGEXP.test(owner)) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: `headers/${OWNER_HEADER}: expected ${OWNER_SHAPE}, got ${JSON.stringify(owner)}` })
  }
  return owner
}

/**
 * Refuses a request made for an owner: owners are labels that keep agents apart, and what touches
 * the whole daemon (stopping it) is the operator's alone.
 */
export function requireOperator(request: FastifyRequest, action: string): void {
  const owner = requestOwner(request)
  if (owner !== null) throw new TendError('TEND_ERR_OPERATOR_ONLY', { action, owner })
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
