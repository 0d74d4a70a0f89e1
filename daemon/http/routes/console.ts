import { Type } from 'typebox'
import { ConsoleBody, ConsoleInfoSchema, ErrorSchema } from '../../../protocol/schemas.js'
import type { ConsoleControl } from '../../console/console-control.js'
import { OwnerHeaders, requireOperator } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface ConsoleRoutesDeps {
  console: Pick<ConsoleControl, 'info' | 'open' | 'close' | 'revoke'>
}

const responses = { 200: ConsoleInfoSchema, 400: ErrorSchema, 403: ErrorSchema, 409: ErrorSchema }

/**
 * The console's control, on the Unix socket only (operator only): GET /v1/console says where it
 * listens; POST starts it (or moves it) and answers a fresh token; DELETE stops it;
 * POST /v1/console/revoke revokes every token and ends every session.
 */
export function registerConsoleRoutes(app: TendApp, { console: control }: ConsoleRoutesDeps): void {
  const routes = typedRoutes(app)
  routes.get(
    '/v1/console',
    { schema: { summary: 'Where the operator console listens (operator only)', headers: OwnerHeaders, response: responses } },
    async (request) => {
      requireOperator(request, 'the console')
      return control.info()
    },
  )
  routes.post(
    '/v1/console',
    {
      schema: {
        summary: 'Start the operator console, or move it, and make a fresh token (operator only)',
        headers: OwnerHeaders,
        body: Type.Optional(ConsoleBody),
        response: responses,
      },
    },
    async (request) => {
      requireOperator(request, 'the console')
      return control.open(request.body ?? {})
    },
  )
  routes.delete(
    '/v1/console',
    { schema: { summary: 'Stop the operator console (operator only)', headers: OwnerHeaders, response: responses } },
    async (request) => {
      requireOperator(request, 'the console')
      return control.close()
    },
  )
  routes.post(
    '/v1/console/revoke',
    { schema: { summary: "Revoke every console token and end every page's session (operator only)", headers: OwnerHeaders, response: responses } },
    async (request) => {
      requireOperator(request, 'the console')
      return control.revoke()
    },
  )
}
