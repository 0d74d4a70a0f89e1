import { createRequire } from 'node:module'
import type { FastifySchemaCompiler } from 'fastify'
import type { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import { precompiled, schemaKey } from '../precompiled/schema-code.js'

/**
 * Each route's request validators and response serializers come from the build's compiled code
 * (daemon/precompiled/). One the build did not cover is compiled on its route's first request, not
 * at start: compiling them all took about half of a daemon's start, and a client that auto-started
 * the daemon waited for all of it.
 */
export function lazyValidatorCompiler(compile: FastifySchemaCompiler<unknown>): FastifySchemaCompiler<unknown> {
  return (route) => {
    let validate: ReturnType<FastifySchemaCompiler<unknown>> | undefined
    return (data: unknown) => (validate ??= compile(route))(data)
  }
}

type SerializerFactory = ReturnType<typeof SerializerSelector>
type Serialize = (doc: unknown) => string

/**
 * fastify's serializer factory: the build's fast-json-stringify code, else fastify's own compiler
 * on first use, loaded only then (imported, it would start with the daemon).
 */
export const lazySerializerFactory: SerializerFactory = (externalSchemas, options) => {
  let compile: ReturnType<SerializerFactory> | undefined
  const buildSerializerCompiler = (): SerializerFactory => {
    const selector = createRequire(import.meta.url)('@fastify/fast-json-stringify-compiler') as { SerializerSelector: typeof SerializerSelector }
    return selector.SerializerSelector()
  }
  return (route) => {
    let serialize: Serialize | undefined
    const compileNow = (): Serialize => {
      const built = precompiled<Serialize>(schemaKey('response', route.schema, externalSchemas))
      if (built) return built
      return (compile ??= buildSerializerCompiler()(externalSchemas, options))(route) as Serialize
    }
    return (doc) => (serialize ??= compileNow())(doc)
  }
}
