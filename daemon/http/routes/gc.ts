import { Type } from 'typebox'
import { ErrorSchema, GcBody, GcResultSchema } from '../../../protocol/schemas.js'
import type { SpoolCleanup } from '../../store/spool-cleanup.js'
import { OwnerHeaders, requestOwner } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

/** Finished tasks older than this are collected when no age is given: one day. */
export const DEFAULT_GC_AGE_MS = 24 * 3_600_000

export interface GcDeps {
  cleanup: Pick<SpoolCleanup, 'removeOlderThan'>
}

/**
 * POST /v1/gc — deletes finished tasks that ended longer ago than olderThanMs, and every corrupt
 * spool entry whatever its age (it has no end time to trust).
 */
export function registerGcRoute(app: TendApp, { cleanup }: GcDeps): void {
  typedRoutes(app).post(
    '/v1/gc',
    {
      schema: { summary: 'Delete old finished tasks', headers: OwnerHeaders, body: Type.Optional(GcBody), response: { 200: GcResultSchema, 400: ErrorSchema } },
    },
    async (request) => {
      const { olderThanMs = DEFAULT_GC_AGE_MS } = request.body ?? {}
      return cleanup.removeOlderThan(olderThanMs, requestOwner(request))
    },
  )
}
