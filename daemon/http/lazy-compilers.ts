import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import type { FastifySchemaCompiler } from 'fastify'

/**
 * Compiling every route's request validators and response serializers took about half of a
 * daemon's start (ajv, fast-json-stringify), and a client that auto-started the daemon waited for
 * all of it. Each is compiled on its route's first request instead, once, with the same compiler.
 */
export function lazyValidatorCompiler(compile: FastifySchemaCompiler<unknown>): FastifySchemaCompiler<unknown> {
  return (route) => {
    let validate: ReturnType<FastifySchemaCompiler<unknown>> | undefined
    return (data: unknown) => (validate ??= compile(route))(data)
  }
}

const buildSerializerCompiler = SerializerSelector()

/** fastify's own serializer factory (fast-json-stringify), each route's serializer built on first use. */
export const lazySerializerFactory: typeof buildSerializerCompiler = (externalSchemas, options) => {
  let compile: ReturnType<typeof buildSerializerCompiler> | undefined
  return (route) => {
    let serialize: ((doc: unknown) => string) | undefined
    return (doc) => (serialize ??= (compile ??= buildSerializerCompiler(externalSchemas, options))(route))(doc)
  }
}
