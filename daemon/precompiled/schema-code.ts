import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { Ajv, Options as AjvOptions, ValidateFunction } from 'ajv'

/**
 * Validators and serializers are compiled from their schemas at `npm run build` (ajv's and
 * fast-json-stringify's standalone code, daemon/precompiled/build.mjs), not in the daemon: compiling
 * them at run time took ~40 ms for the settings at every start and 20–50 ms at each route's first
 * request, the first `tend status` of a cold start among them. A schema without code from the build
 * (a build older than the source) is compiled at run time, as before; only then is an ajv
 * instance made. test/daemon/precompiled/precompiled-schemas.test.ts fails on a build that misses one.
 */

const common = { allErrors: true, strict: false } as const

/** Each validator kind with the ajv options it is compiled with, at build time and at run time alike. */
export const VALIDATOR_OPTIONS = {
  /** Request bodies are JSON and must arrive with the right types. */
  body: { ...common, verbose: true, removeAdditional: false, useDefaults: false, coerceTypes: false },
  /** Query strings, path parameters and headers are text, so only they are coerced. */
  text: { ...common, verbose: true, removeAdditional: false, useDefaults: false, coerceTypes: true },
  /** Daemon settings: the defaults are filled in place. */
  settings: { ...common, useDefaults: true },
} as const satisfies Record<string, AjvOptions>
export type ValidatorKind = keyof typeof VALIDATOR_OPTIONS

/** The index of the build's compiled code (a file per function beside it), next to this module in dist/. */
export const SCHEMA_CODE_PATH = fileURLToPath(new URL('./schema-code/index.cjs', import.meta.url))

/** The identity of one compiled schema: which compiler, the schema, and the schemas it may refer to. */
export function schemaKey(kind: ValidatorKind | 'response', schema: unknown, externalSchemas?: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify([kind, schema, externalSchemas ?? null]))
    .digest('base64url')
}

/** Compiled function per schemaKey, each loaded on first use. */
export type SchemaCodeTable = ReadonlyMap<string, () => unknown>
let table: SchemaCodeTable | undefined
const codeTable = (): SchemaCodeTable => (table ??= loadSchemaCode(SCHEMA_CODE_PATH))

/** The build's code for this key, or undefined (no build output, or none for this schema). */
export function precompiled<T>(key: string): T | undefined {
  return codeTable().get(key)?.() as T | undefined
}

/** How many schemas the build compiled (0: no build output next to this module). */
export function precompiledCount(): number {
  return codeTable().size
}

/** The build's table at `path`; empty when there is none. */
export function loadSchemaCode(path: string): SchemaCodeTable {
  try {
    return createRequire(import.meta.url)(path) as SchemaCodeTable
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return new Map()
    throw error
  }
}

const runtimeAjv = new Map<ValidatorKind, Ajv>()

/** The validator of this schema: the build's, else compiled now. */
export function compileValidator(kind: ValidatorKind, schema: object): ValidateFunction {
  const key = schemaKey(kind, schema)
  const built = precompiled<ValidateFunction>(key)
  if (built) return built
  let ajv = runtimeAjv.get(kind)
  if (!ajv) {
    const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv')
    runtimeAjv.set(kind, (ajv = new Ajv(VALIDATOR_OPTIONS[kind])))
  }
  return ajv.compile(schema)
}
