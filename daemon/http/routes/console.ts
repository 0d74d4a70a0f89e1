import { Type } from 'typebox'
import type { TendApp } from '../server.js'
import type { DaemonContext } from '../../context.js'
import { ConsoleBody, ConsoleInfoSchema, ErrorSchema } from '../../../protocol/schemas.js'
import { requireOperator } from '../owner-scope.js'
import type { ConsoleControl } from '../../console/console-control.js'

const responses = { 200: ConsoleInfoSchema, 400: ErrorSchema, 403: ErrorSchema, 409: ErrorSchema }

/**
 * The console's control, on the Unix socket only (operator only): GET /v1/console says where it
 * listens; POST starts it (or moves it) and answers a fresh token; DELETE stops it;
 * POST /v1/console/revoke revokes every token and ends every session.
 */
export function registerConsoleRoutes(app: TendApp, context: DaemonContext): void {
  const control = (): ConsoleControl => context.console
  app.get('/v1/console', { schema: { summary: 'Where the operator console listens (operator only)', response: responses } }, async (request) => {
    requireOperator(request, 'the console')
    return control().info()
  })
  app.post('/v1/console', { schema: { summary: 'Start the operator console, or move it, and make a fresh token (operator only)', body: Type.Optional(ConsoleBody), response: responses } }, async (request) => {
    requireOperator(request, 'the console')
    return control().open((request.body as ConsoleBody | undefined) ?? {})
  })
  app.delete('/v1/console', { schema: { summary: 'Stop the operator console (operator only)', response: responses } }, async (request) => {
    requireOperator(request, 'the console')
    return control().close()
  })
  app.post('/v1/console/revoke', { schema: { summary: "Revoke every console token and end every page's session (operator only)", response: responses } }, async (request) => {
    requireOperator(request, 'the console')
    return control().revoke()
  })
}
