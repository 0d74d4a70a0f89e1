import { Type } from 'typebox'
import { OWNER_HEADER, OWNER_PATTERN, TendError, type Task } from '../../protocol/index.js'
import type { TaskStore } from '../store/task-store.js'

/** What OWNER_PATTERN admits, in words, for error messages. */
export const OWNER_SHAPE = 'letters, digits and ._:@- (up to 128)'

/**
 * The owner header of every route that answers an owner differently from the operator: checked by
 * the route's schema before its handler runs (a malformed one is a 400 naming the header).
 */
export const OwnerHeaders = Type.Object({
  [OWNER_HEADER]: Type.Optional(Type.String({ pattern: OWNER_PATTERN, description: 'act for this owner: only its tasks' })),
})

/** A request whose route declared the owner header in its schema (OwnerHeaders), hence already checked. */
export interface OwnedRequest {
  headers: { [OWNER_HEADER]?: string }
}

/** The owner a request acts for, or null for the operator (no owner header). */
export function requestOwner(request: OwnedRequest): string | null {
  return request.headers[OWNER_HEADER] ?? null
}

/**
 * Refuses a request made for an owner: owners are labels that keep agents apart, and what touches
 * the whole daemon (stopping it) is the operator's alone.
 */
export function requireOperator(request: OwnedRequest, action: string): void {
  const owner = requestOwner(request)
  if (owner !== null) throw new TendError('TEND_ERR_OPERATOR_ONLY', { action, owner })
}

/**
 * A task as the requester may see it: another owner's task is answered as not found, so an owner
 * cannot even learn that it exists.
 */
export function visibleTask(store: Pick<TaskStore, 'get'>, request: OwnedRequest, id: string): Task {
  const task = store.get(id)
  const owner = requestOwner(request)
  if (owner !== null && task.owner !== owner) throw new TendError('TEND_ERR_TASK_NOT_FOUND', { id })
  return task
}
