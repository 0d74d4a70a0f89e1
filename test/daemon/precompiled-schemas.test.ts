import { describe, expect, test } from 'vitest'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import Fastify from 'fastify'
import { DaemonSettingsSchema } from '../../daemon/config.js'
import type { DaemonContext } from '../../daemon/context.js'
import type { PeerCheckStatus } from '../../daemon/peer/index.js'
import { registerApi } from '../../daemon/http/server.js'
import { validatorKind } from '../../daemon/http/request-validation.js'
import { loadSchemaCode, schemaKey } from '../../daemon/precompiled/schema-code.js'

const BUILT = join(import.meta.dirname, '..', '..', 'dist', 'daemon', 'precompiled', 'schema-code', 'index.cjs')

/** Every schema key the daemon's API asks its compilers for, as fastify hands the schemas over. */
async function keysTheDaemonCompiles(): Promise<string[]> {
  const keys: string[] = []
  const app = Fastify({
    logger: false,
    schemaController: {
      compilersFactory: {
        buildSerializer: (externalSchemas: unknown) => (route: { schema?: unknown }) => {
          keys.push(`response ${schemaKey('response', route.schema, externalSchemas)}`)
          return (data: unknown) => JSON.stringify(data)
        },
      },
    },
  })
  app.setValidatorCompiler(({ schema, httpPart }) => {
    keys.push(`${validatorKind(httpPart)} ${schemaKey(validatorKind(httpPart), schema)}`)
    return () => true
  })
  registerApi(app as never, { version: '' } as DaemonContext, {} as PeerCheckStatus)
  await app.ready()
  await app.close()
  keys.push(`settings ${schemaKey('settings', DaemonSettingsSchema)}`)
  return keys
}

describe('schemas compiled at build time', () => {
  test('the build compiled every validator and serializer the daemon uses, from the current source', async () => {
    expect(existsSync(BUILT), `${BUILT} is missing: run npm run build`).toBe(true)
    const table = loadSchemaCode(BUILT)
    const keys = await keysTheDaemonCompiles()
    expect(keys.length).toBeGreaterThan(15)
    expect(keys.filter((key) => !table.has(key.split(' ')[1]!)), 'schemas without code from the build (stale dist/?)').toEqual([])
  })

  test('a compiled validator answers as ajv at run time does: defaults filled, every error listed', () => {
    const validate = loadSchemaCode(BUILT).get(schemaKey('settings', DaemonSettingsSchema))!() as ((data: unknown) => boolean) & { errors?: Array<{ instancePath: string }> }
    const settings: Record<string, unknown> = { concurrency: 3 }
    expect(validate(settings)).toBe(true)
    expect(settings).toMatchObject({ concurrency: 3, perOwnerConcurrency: 4, sandbox: 'workspace', writablePaths: [] })
    expect(validate({ concurrency: 0, sandbox: 'nope' })).toBe(false)
    expect(validate.errors!.map((error) => error.instancePath)).toEqual(expect.arrayContaining(['/concurrency', '/sandbox']))
  })
})
