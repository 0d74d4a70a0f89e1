import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { ErrorSchema, GcBody, GcResultSchema } from '../../../protocol/schemas.js'
import { requestOwner } from '../owner-scope.js'

/** Finished tasks older than this are collected when no age is given: one day. */
export const DEFAULT_GC_AGE_MS = 24 * 3_600_000

/**
 * POST /v1/gc — deletes finished tasks that ended longer ago than olderThanMs, and every corrupt
 * spool entry whatever its age (it has no end time to trust).
 */
export function registerGcRoute(app: TendApp, context: DaemonContext): void {
  app.post(
    '/v1/gc',
    { schema: { summary: 'Delete old finished tasks', body: Type.Optional(GcBody), response: { 200: GcResultSchema, 400: ErrorSchema } } },
    async (request) => {
      const { olderThanMs = DEFAULT_GC_AGE_MS } = (request.body ?? {}) as GcBody
      return context.cleanup.removeOlderThan(olderThanMs, requestOwner(request))
    },
  )
}
