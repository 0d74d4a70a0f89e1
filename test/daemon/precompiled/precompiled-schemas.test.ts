import { describe, expect, test } from 'vitest'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { DaemonSettingsSchema } from '../../../daemon/config.js'
import { schemasTheDaemonCompiles } from '../../../daemon/precompiled/daemon-schemas.js'
import { loadSchemaCode, schemaKey } from '../../../daemon/precompiled/schema-code.js'

const BUILT = join(import.meta.dirname, '..', '..', '..', 'dist', 'daemon', 'precompiled', 'schema-code', 'index.cjs')

/** Every schema key the daemon compiles, each labelled with its kind. */
async function keysTheDaemonCompiles(): Promise<string[]> {
  return (await schemasTheDaemonCompiles()).map(
    (each) => `${each.kind} ${schemaKey(each.kind, each.schema, each.kind === 'response' ? each.externalSchemas : undefined)}`,
  )
}

describe('schemas compiled at build time', () => {
  test('the build compiled every validator and serializer the daemon uses, from the current source', async () => {
    expect(existsSync(BUILT), `${BUILT} is missing: run npm run build`).toBe(true)
    const table = loadSchemaCode(BUILT)
    const keys = await keysTheDaemonCompiles()
    expect(keys.length).toBeGreaterThan(15)
    expect(
      keys.filter((key) => !table.has(key.split(' ')[1]!)),
      'schemas without code from the build (stale dist/?)',
    ).toEqual([])
  })

  test('a compiled validator answers as ajv at run time does: defaults filled, every error listed', () => {
    const validate = loadSchemaCode(BUILT).get(schemaKey('settings', DaemonSettingsSchema))!() as ((data: unknown) => boolean) & {
      errors?: Array<{ instancePath: string }>
    }
    const settings: Record<string, unknown> = { concurrency: 3 }
    expect(validate(settings)).toBe(true)
    expect(settings).toMatchObject({ concurrency: 3, perOwnerConcurrency: 4, sandbox: 'workspace', writablePaths: [] })
    expect(validate({ concurrency: 0, sandbox: 'nope' })).toBe(false)
    expect(validate.errors!.map((error) => error.instancePath)).toEqual(expect.arrayContaining(['/concurrency', '/sandbox']))
  })
})
