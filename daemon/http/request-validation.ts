import type { ErrorObject } from 'ajv'
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify'
import { ABSOLUTE_PATH_PATTERN, IDEMPOTENCY_KEY_PATTERN, NO_NUL_PATTERN, OWNER_PATTERN, TendError } from '../../protocol/index.js'
import { compileValidator } from '../precompiled/schema-code.js'
import { OWNER_SHAPE } from './owner-scope.js'

/** Bodies are JSON; query strings, path parameters and headers are text, which alone is coerced. */
export function validatorKind(httpPart: string | undefined): 'body' | 'text' {
  return httpPart === 'body' ? 'body' : 'text'
}

/** Strict request validation: an unknown or mistyped field is a 400 that names it. */
export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const validate = compileValidator(validatorKind(httpPart), schema as object)
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
    case 'maximum':
    case 'minimum':
      return `${path}: expected ${describeNumber(error)} ${String(params.comparison)} ${String(params.limit)}, got ${describeValue(error.data)}`
    case 'maxItems':
      return `${path}: expected at most ${String(params.limit)} items, got ${Array.isArray(error.data) ? error.data.length : describeValue(error.data)}`
    case 'pattern':
      if (params.pattern === NO_NUL_PATTERN) return `${path}: expected text without NUL bytes, got ${describeValue(error.data)}`
      // A header's value is shown as sent, the idempotency key's up to 140 characters.
      if (params.pattern === OWNER_PATTERN)
        return `${path}: expected ${OWNER_SHAPE}, got ${part === 'headers' ? JSON.stringify(error.data) : describeValue(error.data)}`
      if (params.pattern === IDEMPOTENCY_KEY_PATTERN)
        return `${path}: expected 1 to 128 letters, digits or ._:-, got ${JSON.stringify(String(error.data).slice(0, 140))}`
      if (params.pattern === ABSOLUTE_PATH_PATTERN) return `${path}: expected an absolute path without NUL bytes, got ${describeValue(error.data)}`
      return defaultProblem(path, error)
    case 'const':
      return `${path}: expected ${JSON.stringify(params.allowedValue)}, got ${describeValue(error.data)}`
    case 'enum':
      return (
        `${path}: expected one of ${(params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(', ')}` +
        `, got ${describeValue(error.data)}`
      )
    case 'anyOf':
    case 'oneOf':
      return `${path}: expected ${describeAlternatives(error)}, got ${describeValue(error.data)}`
    default:
      return defaultProblem(path, error)
  }
}

function defaultProblem(path: string, error: ErrorObject): string {
  return `${path}: ${error.message ?? error.keyword}${error.data === undefined ? '' : `, got ${describeValue(error.data)}`}`
}

function describeNumber(error: ErrorObject): string {
  return (error.parentSchema as { type?: string } | undefined)?.type === 'integer' ? 'an integer' : 'a number'
}

function describeAlternatives(error: ErrorObject): string {
  const branches = (error.schema as Array<{ type?: string; const?: unknown }> | undefined) ?? []
  const names = branches.map((branch) => (branch.const !== undefined ? JSON.stringify(branch.const) : (branch.type ?? 'value')))
  return names.length > 0 ? `one of ${names.join(', ')}` : 'another shape'
}

function describeValue(value: unknown): string {
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch {
    // Nested deeper than the stack allows (the body parser takes what JSON.stringify cannot give back).
    return Array.isArray(value) ? 'an array nested too deep to show' : 'a value nested too deep to show'
  }
  if (text === undefined) return String(value)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}
