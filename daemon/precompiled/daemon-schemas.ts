import Fastify from 'fastify'
import { DaemonSettingsSchema } from '../config.js'
import { validatorKind } from '../http/request-validation.js'
import { registerApi, registerSocketOnlyApi, type ApiDeps } from '../http/api.js'
import type { ConsoleRoutesDeps } from '../http/routes/console.js'
import type { TendApp } from '../http/tend-app.js'
import type { ValidatorKind } from './schema-code.js'

/** One schema the daemon compiles: a validator's, or a response serializer's with the shared schemas it may refer to. */
export type DaemonSchema = { kind: ValidatorKind; schema: object } | { kind: 'response'; schema: object; externalSchemas: unknown }

/**
 * Every schema the daemon compiles, as fastify hands them to its compilers: the API's routes
 * registered on an app of their own (their handlers never run), then the settings. What the build
 * compiles ahead of time (daemon/precompiled/build.mjs), and what a test checks the build against.
 */
export async function schemasTheDaemonCompiles(): Promise<DaemonSchema[]> {
  const found: DaemonSchema[] = []
  const app = Fastify({
    logger: false,
    schemaController: {
      compilersFactory: {
        buildSerializer: (externalSchemas: unknown) => (route: { schema?: unknown }) => {
          found.push({ kind: 'response', schema: route.schema as object, externalSchemas })
          return (data: unknown) => JSON.stringify(data)
        },
      },
    },
  })
  app.setValidatorCompiler(({ schema, httpPart }) => {
    found.push({ kind: validatorKind(httpPart), schema: schema as object })
    return () => true
  })
  // Only the routes' schemas are read: no route uses its deps before a request.
  registerApi(app as unknown as TendApp, { version: '' } as ApiDeps)
  registerSocketOnlyApi(app as unknown as TendApp, {} as ConsoleRoutesDeps)
  await app.ready()
  await app.close()
  found.push({ kind: 'settings', schema: DaemonSettingsSchema })
  return found
}
