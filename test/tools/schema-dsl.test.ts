import { describe, expect, expectTypeOf, test } from 'vitest'
import { defineTool, toJsonSchema, ToolArgsError, validateArgs, type InferArgs } from '../../tools/index.js'

const spec = {
  name: { type: 'string', required: true, description: 'who' },
  mode: { type: 'string', enum: ['fast', 'slow'] },
  count: { type: 'number' },
  options: { type: 'object', properties: { deep: { type: 'boolean', required: true } } },
  tags: { type: 'array', items: { type: 'string' } },
} as const

describe('the schema DSL', () => {
  test('InferArgs types required, optional, enum, nested and array fields', () => {
    expectTypeOf<InferArgs<typeof spec>>().toEqualTypeOf<{
      name: string
      mode?: 'fast' | 'slow'
      count?: number
      options?: { deep: boolean }
      tags?: string[]
    }>()
  })

  test('valid arguments pass', () => {
    expect(() => validateArgs('t', spec, { name: 'x', mode: 'fast', count: 2, options: { deep: true }, tags: ['a'] })).not.toThrow()
  })

  test('a property given as null counts as not given', () => {
    expect(() => validateArgs('t', spec, { name: 'x', mode: null, options: null })).not.toThrow()
  })

  test.each([
    [{}, 'arguments.name: is required'],
    [{ name: null }, 'arguments.name: is required'],
    [{ extra: 1 }, 'arguments.extra: unknown property (expected one of: name, mode, count, options, tags)'],
    [{ name: 'x', tags: [null] }, 'arguments.tags[0]: expected a string, got null'],
    [{ name: 'x', count: 'many', mode: 'medium' }, 'arguments.mode: expected one of "fast", "slow", got string "medium"'],
    [{ name: 'x', options: [] }, 'arguments.options: expected an object, got an array'],
    [{ name: 3 }, 'arguments.name: expected a string, got number 3'],
    [{ name: 'x', mode: 'medium' }, 'arguments.mode: expected one of "fast", "slow", got string "medium"'],
    [{ name: 'x', options: { deep: 'yes' } }, 'arguments.options.deep: expected a boolean, got string "yes"'],
    [{ name: 'x', options: {} }, 'arguments.options.deep: is required'],
    [{ name: 'x', tags: ['a', 2] }, 'arguments.tags[1]: expected a string, got number 2'],
    [{ name: 'x', extra: 1 }, 'arguments.extra: unknown property (expected one of: name, mode, count, options, tags)'],
    [[], 'arguments: expected an object, got an array'],
  ])('%j is rejected with a ToolArgsError naming the path', (args, message) => {
    let caught: unknown
    try {
      validateArgs('t', spec, args)
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(ToolArgsError)
    expect((caught as Error).message).toBe(`invalid arguments for t: ${message}`)
  })

  test('defineTool validates before execute and accepts both result shapes', async () => {
    let executed = 0
    const tool = defineTool({
      name: 'echo',
      description: 'echo',
      parameters: { text: { type: 'string', required: true } },
      async execute(args) {
        executed += 1
        return args.text === 'meta' ? { content: [{ type: 'text', text: 'm' }], meta: { a: 1 } } : [{ type: 'text', text: args.text }]
      },
    })
    await expect(tool.execute({}, { callId: '1', name: 'echo', arguments: {} })).rejects.toThrow('invalid arguments for echo: arguments.text: is required')
    expect(executed).toBe(0)
    expect(await tool.execute({ text: 'hi' }, { callId: '2', name: 'echo', arguments: {} })).toEqual({ content: [{ type: 'text', text: 'hi' }] })
    expect(await tool.execute({ text: 'meta' }, { callId: '3', name: 'echo', arguments: {} })).toEqual({
      content: [{ type: 'text', text: 'm' }],
      meta: { a: 1 },
    })
  })

  test('the JSON Schema form keeps types, enums, nesting, requirements and descriptions', () => {
    expect(toJsonSchema(spec)).toEqual({
      type: 'object',
      additionalProperties: false,
      required: ['name'],
      properties: {
        name: { type: 'string', description: 'who' },
        mode: { type: 'string', enum: ['fast', 'slow'] },
        count: { type: 'number' },
        options: { type: 'object', additionalProperties: false, required: ['deep'], properties: { deep: { type: 'boolean' } } },
        tags: { type: 'array', items: { type: 'string' } },
      },
    })
  })
})
