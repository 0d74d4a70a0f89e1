import type { FastifyInstance } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'

/** A fastify app of the daemon: the socket's, the console's TCP listener's, or a test's. */
export type TendApp = FastifyInstance

/**
 * Routes are declared on the app seen through the TypeBox type provider: a handler's request
 * parts and answers are typed by the route's own schemas, never cast.
 */
export function typedRoutes(app: TendApp) {
  return app.withTypeProvider<TypeBoxTypeProvider>()
}
