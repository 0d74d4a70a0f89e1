import type { FieldSpec, SchemaSpec } from '../harness/index.js'
import type { DshParameters, DshProperty, DshValueSchema } from './host-types.js'

/**
 * The published harness's parameter schema for a tool described in the seed DSL, so every host
 * shows the model the same parameters and descriptions. Explicit objects state
 * `additionalProperties: false`, as the published DSL requires.
 */
export function toDshParameters(spec: SchemaSpec): DshParameters {
  return Object.fromEntries(Object.entries(spec).map(([key, field]) => [key, toDshProperty(field)]))
}

function toDshProperty(field: FieldSpec): DshProperty {
  const value = toDshValue(field)
  return field.required ? { ...value, required: true } : value
}

function toDshValue(field: FieldSpec): DshValueSchema {
  const description = field.description === undefined ? {} : { description: field.description }
  switch (field.type) {
    case 'string':
      return { type: 'string', ...description, ...(field.enum ? { enum: field.enum } : {}) }
    case 'number':
      return { type: 'number', ...description, ...(field.enum ? { enum: field.enum } : {}) }
    case 'boolean':
      return { type: 'boolean', ...description }
    case 'object':
      return { type: 'object', properties: toDshParameters(field.properties), additionalProperties: false, ...description }
    case 'array':
      return { type: 'array', items: toDshValue(field.items), ...description }
  }
}
