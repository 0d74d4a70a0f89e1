import { Ajv, type ErrorObject } from 'ajv'
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify'
import { TendError } from '../protocol/index.js'

const common = { allErrors: true, verbose: true, removeAdditional: false, useDefaults: false, strict: false } as const
// Bodies are JSON and must arrive with the right types; query strings and path parameters are
// text, so only they are coerced.
const bodyAjv = new Ajv({ ...common, coerceTypes: false })
const textAjv = new Ajv({ ...common, coerceTypes: true })

/** Strict request validation: an unknown or mistyped field is a 400 that names it. */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const ajv = httpPart === 'body' ? bodyAjv : textAjv
  const validate = ajv.compile(schema as object)
  return (data: unknown) => {
    // A POST without a body is an empty object: every field of an optional body is optional.
    const value = httpPart === 'body' && (data === undefined || data === null) ? {} : data
    return validate(value) ? { value } : { error: validationError(httpPart ?? 'request', validate.errors ?? [], value) }
  }
}

/** One 400 naming every offending field, the shape expected and the value received. */
export function validationError(part: string, errors: ReadonlyArray<ErrorObject | FastifySchemaValidationError>, data?: unknown): TendError {
  const problems = errors.map((error) => describeProblem(part, error as ErrorObject))
  const invalidId = part === 'params' && errors.some((error) => (error.instancePath ?? '').startsWith('/id'))
  if (invalidId) return new TendError('TEND_ERR_INVALID_TASK_ID', { id: (data as { id?: string } | undefined)?.id ?? 'the given id' })
  return new TendError('TEND_ERR_VALIDATION', { detail: [...new Set(problems)].join('; ') })
}

function describeProblem(part: string, error: ErrorObject): string {
  const path = `${part}${error.instancePath ?? ''}`
  const params = (error.params ?? {}) as Record<string, unknown>
  switch (error.keyword) {
    case 'additionalProperties':
      return `${path}: unknown property ${JSON.stringify(params.additionalProperty)}`
    case 'propertyNames':
      return `${path}: invalid name ${JSON.stringify(params.propertyName)}`
    case 'required':
      return `${path}: missing required property ${JSON.stringify(params.missingProperty)}`
    case 'type':
      return `${path}: expected ${String(params.type)}, got ${describeValue(error.data)}`
    case 'anyOf':
    case 'oneOf':
      return `${path}: expected ${describeAlternatives(error)}, got ${describeValue(error.data)}`
    default:
      return `${path}: ${error.message ?? error.keyword}${error.data === undefined ? '' : `, got ${describeValue(error.data)}`}`
  }
}

function describeAlternatives(error: ErrorObject): string {
  const branches = (error.schema as Array<{ type?: string; const?: unknown }> | undefined) ?? []
  const names = branches.map((branch) => (branch.const !== undefined ? JSON.stringify(branch.const) : (branch.type ?? 'value')))
  return names.length > 0 ? `one of ${names.join(', ')}` : 'another shape'
}

function describeValue(value: unknown): string {
  const text = JSON.stringify(value)
  if (text === undefined) return String(value)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}
