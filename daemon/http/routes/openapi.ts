import type { TendApp } from '../server.js'

/** GET /v1/openapi.json — the OpenAPI document generated from the route schemas. */
export function registerOpenApiRoute(app: TendApp): void {
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger())
}
