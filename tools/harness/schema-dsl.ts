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

/** Throws a ToolArgsError for the first field that does not match; unknown keys are refused too. */
export function validateArgs(tool: string, spec: SchemaSpec, args: unknown, path = 'arguments'): void {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) throw new ToolArgsError(tool, path, `expected an object, got ${describe(args)}`)
  const record = args as Record<string, unknown>
  for (const key of Object.keys(record)) {
    if (!(key in spec)) throw new ToolArgsError(tool, `${path}.${key}`, `unknown property (expected one of: ${Object.keys(spec).join(', ')})`)
  }
  for (const [key, field] of Object.entries(spec)) {
    const value = record[key]
    if (value === undefined || value === null) {
      if (field.required) throw new ToolArgsError(tool, `${path}.${key}`, 'is required')
      continue
    }
    validateField(tool, field, value, `${path}.${key}`)
  }
}

function validateField(tool: string, field: FieldSpec, value: unknown, path: string): void {
  switch (field.type) {
    case 'string':
    case 'number':
    case 'boolean':
      if (typeof value !== field.type || (field.type === 'number' && !Number.isFinite(value))) {
        throw new ToolArgsError(tool, path, `expected a ${field.type}, got ${describe(value)}`)
      }
      if ('enum' in field && field.enum && !(field.enum as readonly unknown[]).includes(value)) {
        throw new ToolArgsError(tool, path, `expected one of ${field.enum.map((item) => JSON.stringify(item)).join(', ')}, got ${describe(value)}`)
      }
      return
    case 'object':
      validateArgs(tool, field.properties, value, path)
      return
    case 'array':
      if (!Array.isArray(value)) throw new ToolArgsError(tool, path, `expected an array, got ${describe(value)}`)
      value.forEach((item, index) => validateField(tool, field.items, item, `${path}[${index}]`))
  }
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
