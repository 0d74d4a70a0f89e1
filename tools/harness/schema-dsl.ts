import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
/**
 * The harness's parameter DSL: string, number, boolean, object and array specs with `required`,
 * `enum`, nesting and descriptions. `InferArgs` types a tool's arguments from its spec, and
 * `validateArgs` checks model-generated arguments against it before `execute` runs.
 */
export type FieldSpec =
  | { type: 'string'; required?: boolean; description?: string; enum?: readonly string[] }
  | { type: 'number'; required?: boolean; description?: string; enum?: readonly number[] }
  | { type: 'boolean'; required?: boolean; description?: string }
  | { type: 'object'; required?: boolean; description?: string; properties: SchemaSpec }
  | { type: 'array'; required?: boolean; description?: string; items: FieldSpec }

export type SchemaSpec = Readonly<Record<string, FieldSpec>>

type ValueOf<F> = F extends { type: 'string'; enum: readonly (infer E)[] }
  ? E
  : F extends { type: 'string' }
    ? string
    : F extends { type: 'number'; enum: readonly (infer E)[] }
      ? E
      : F extends { type: 'number' }
        ? number
        : F extends { type: 'boolean' }
          ? boolean
          : F extends { type: 'object'; properties: infer P extends SchemaSpec }
            ? InferArgs<P>
            : F extends { type: 'array'; items: infer I }
              ? ValueOf<I>[]
              : never

type RequiredKeys<S extends SchemaSpec> = { [K in keyof S]: S[K] extends { required: true } ? K : never }[keyof S]
type OptionalKeys<S extends SchemaSpec> = Exclude<keyof S, RequiredKeys<S>>
type Flatten<T> = { [K in keyof T]: T[K] }

/** The arguments a tool receives, typed from its parameters spec. */
export type InferArgs<S extends SchemaSpec> = Flatten<{ [K in RequiredKeys<S>]: ValueOf<S[K]> } & { [K in OptionalKeys<S>]?: ValueOf<S[K]> }>

/** Model-generated arguments that do not match a tool's spec; `path` names the offending field. */
export class ToolArgsError extends Error {
  override readonly name = 'ToolArgsError'
  constructor(
    readonly tool: string,
    readonly path: string,
    readonly problem: string,
  ) {
    super(`invalid arguments for ${tool}: ${path}: ${problem}`)
  }
}

// ajv is the one validator of tend (the daemon's requests, its config and records; the MCP SDK
// loads it too): a spec is checked as its JSON Schema, compiled once per spec.
const ajv = new Ajv({ allErrors: true, verbose: true, strict: false })
const compiled = new WeakMap<SchemaSpec, ValidateFunction>()

/** Throws a ToolArgsError for the first field that does not match; unknown keys are refused too. */
export function validateArgs(tool: string, spec: SchemaSpec, args: unknown, path = 'arguments'): void {
  let validate = compiled.get(spec)
  if (!validate) compiled.set(spec, (validate = ajv.compile(toJsonSchema(spec))))
  // A property given as null counts as not given: optional, or "is required".
  const value = withoutNullProperties(args)
  if (validate(value)) return
  const errors = [...(validate.errors ?? [])]
  const first = errors.sort((a, b) => compareOrder(orderOf(spec, a), orderOf(spec, b)))[0]!
  const where = pathOf(path, value, first)
  throw new ToolArgsError(tool, where.path, where.problem)
}

/**
 * Where an error sits in the order the spec reads (unknown properties of an object before its
 * fields, fields in the spec's order), so the first one reported is the first a reader would meet.
 */
function orderOf(spec: SchemaSpec, error: ErrorObject): number[] {
  const order: number[] = []
  let fields: SchemaSpec | undefined = spec
  let field: FieldSpec | undefined
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty))
  for (const segment of segments) {
    if (field?.type === 'array') {
      order.push(Number(segment))
      field = field.items
      fields = field.type === 'object' ? field.properties : undefined
      continue
    }
    order.push(fields ? Object.keys(fields).indexOf(segment) : 0)
    field = fields?.[segment]
    fields = field?.type === 'object' ? field.properties : undefined
  }
  if (error.keyword === 'additionalProperties') order.push(-1)
  return order
}

function compareOrder(a: number[], b: number[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!
  return a.length - b.length
}

/** The offending field in the DSL's own notation (`arguments.tags[1]`) and what is wrong with it. */
function pathOf(root: string, args: unknown, error: ErrorObject): { path: string; problem: string } {
  let path = root
  let value = args
  for (const token of error.instancePath.split('/').slice(1)) {
    const key = token.replace(/~1/g, '/').replace(/~0/g, '~')
    path += Array.isArray(value) ? `[${key}]` : `.${key}`
    value = (value as Record<string, unknown>)[key]
  }
  const params = error.params as Record<string, unknown>
  switch (error.keyword) {
    case 'required':
      return { path: `${path}.${String(params.missingProperty)}`, problem: 'is required' }
    case 'additionalProperties': {
      const known = Object.keys((error.parentSchema as { properties?: object } | undefined)?.properties ?? {})
      return { path: `${path}.${String(params.additionalProperty)}`, problem: `unknown property (expected one of: ${known.join(', ')})` }
    }
    case 'type': {
      const type = String(params.type)
      return { path, problem: `expected ${type === 'object' || type === 'array' ? 'an' : 'a'} ${type}, got ${describe(error.data)}` }
    }
    case 'enum':
      return {
        path,
        problem: `expected one of ${(params.allowedValues as unknown[]).map((item) => JSON.stringify(item)).join(', ')}, got ${describe(error.data)}`,
      }
    default:
      return { path, problem: `${error.message ?? error.keyword}, got ${describe(error.data)}` }
  }
}

/** A copy without the properties whose value is null, at every depth (array items are kept as they are). */
function withoutNullProperties(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => (item !== null && typeof item === 'object' ? withoutNullProperties(item) : item))
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, item]) => item !== null)
      .map(([key, item]) => [key, typeof item === 'object' ? withoutNullProperties(item) : item]),
  )
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array'
  if (value === null) return 'null'
  const text = JSON.stringify(value)
  return `${typeof value} ${text && text.length > 40 ? `${text.slice(0, 37)}...` : text}`
}

/** The JSON Schema of a spec (for MCP and other hosts that take raw JSON Schema). */
export function toJsonSchema(spec: SchemaSpec): Record<string, unknown> {
  const properties: Record<string, unknown> = {}
  const required: string[] = []
  for (const [key, field] of Object.entries(spec)) {
    properties[key] = fieldToJsonSchema(field)
    if (field.required) required.push(key)
  }
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false }
}

function fieldToJsonSchema(field: FieldSpec): Record<string, unknown> {
  const description = field.description ? { description: field.description } : {}
  switch (field.type) {
    case 'object':
      return { ...toJsonSchema(field.properties), ...description }
    case 'array':
      return { type: 'array', items: fieldToJsonSchema(field.items), ...description }
    default:
      return { type: field.type, ...('enum' in field && field.enum ? { enum: field.enum } : {}), ...description }
  }
}
