import Fastify, { type RouteOptions } from 'fastify'
import { TaskSchema } from '../../../protocol/schemas.js'
import type { TendApp } from '../tend-app.js'

/**
 * GET /v1/openapi.json — the OpenAPI document generated from the route schemas. @fastify/swagger
 * (and the YAML and $ref libraries under it) is loaded on the first request for the document, not
 * at every daemon start: the routes are recorded as they are declared and replayed, schemas and
 * all, into a throwaway instance that only generates the document.
 */
export function registerOpenApiRoute(app: TendApp, version: string): void {
  const routes: RouteOptions[] = []
  app.addHook('onRoute', (route) => void routes.push(route))
  let document: Promise<unknown> | undefined
  const build = () =>
    openApiDocument(routes, version).catch((error: unknown) => {
      document = undefined // the next request tries again
      throw error
    })
  app.get('/v1/openapi.json', { schema: { hide: true } }, () => (document ??= build()))
}

async function openApiDocument(routes: readonly RouteOptions[], version: string): Promise<unknown> {
  const { default: swagger } = await import('@fastify/swagger')
  // Only the schemas matter here: nothing is validated or serialized, and HEAD routes come from the list.
  const scratch = Fastify({ logger: false, exposeHeadRoutes: false })
  scratch.setValidatorCompiler(() => () => true)
  scratch.setSerializerCompiler(() => (data) => JSON.stringify(data))
  try {
    await scratch.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: { title: 'tend daemon API', version, description: 'Start, read, wait on and stop background tasks.' },
      },
    })
    scratch.addSchema(TaskSchema)
    for (const { method, url, schema } of routes) scratch.route({ method, url, schema, handler: async () => null })
    await scratch.ready()
    return scratch.swagger()
  } finally {
    await scratch.close()
  }
}
