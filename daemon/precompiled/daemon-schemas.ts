import Fastify from 'fastify'
import { DaemonSettingsSchema } from '../config.js'
import type { DaemonContext } from '../context.js'
import { validatorKind } from '../http/request-validation.js'
import { registerApi, registerSocketOnlyApi, type TendApp } from '../http/server.js'
import type { PeerCheckStatus } from '../peer/index.js'
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
  // Only the routes' schemas are read: neither the context nor the peer check is used before a request.
  registerApi(app as unknown as TendApp, { version: '' } as DaemonContext, {} as PeerCheckStatus)
  registerSocketOnlyApi(app as unknown as TendApp, { version: '' } as DaemonContext)
  await app.ready()
  await app.close()
  found.push({ kind: 'settings', schema: DaemonSettingsSchema })
  return found
}
