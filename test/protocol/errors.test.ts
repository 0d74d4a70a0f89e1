import { describe, expect, test } from 'vitest'
import { ERROR_CATALOGUE, readTemplate, TendError, type ErrorCode } from '../../protocol/index.js'

describe('TendError params', () => {
  test('a code is built with the params its message names, and the message is filled from them', () => {
    const error = new TendError('TEND_ERR_TASK_NOT_FINISHED', { id: 'abcdefabcdef', state: 'running' })
    expect(error.message).toBe('task is still running: abcdefabcdef (kill it first, or wait for it)')
    expect(error.params).toEqual({ id: 'abcdefabcdef', state: 'running' })
  })

  test('a param left out of a code that names it does not compile', () => {
    // @ts-expect-error: TEND_ERR_TASK_NOT_FINISHED names {state}
    const missing = new TendError('TEND_ERR_TASK_NOT_FINISHED', { id: 'abcdefabcdef' })
    // @ts-expect-error: every code's template names at least one param
    const none = new TendError('TEND_ERR_INTERNAL', {})
    expect([missing.code, none.code]).toEqual(['TEND_ERR_TASK_NOT_FINISHED', 'TEND_ERR_INTERNAL'])
  })

  test('params beside those of the template are kept (retryAfterSeconds)', () => {
    const error = new TendError('TEND_ERR_TERMINAL_BUSY', { id: 'abcdefabcdef', retryAfterSeconds: 2 })
    expect(error.retryAfterSeconds).toBe(2)
  })

  test('a message of its own frees the params from the template', () => {
    const error = new TendError('TEND_ERR_STDIN_FULL', {}, { message: 'stdin of task x is full (and more)' })
    expect(error.message).toBe('stdin of task x is full (and more)')
  })
})

describe('TendError.fromWire', () => {
  test('keeps the params, read back out of the message by its template', () => {
    const sent = new TendError('TEND_ERR_STDIN_FULL', { id: 'abcdefabcdef', acceptedBytes: 10, totalBytes: 20, waitMs: 2000 })
    const received = TendError.fromWire(JSON.parse(JSON.stringify(sent.toWire())))
    expect(received.code).toBe('TEND_ERR_STDIN_FULL')
    expect(received.message).toBe(sent.message)
    expect(received.params).toEqual({ id: 'abcdefabcdef', acceptedBytes: '10', totalBytes: '20', waitMs: '2000' })
  })

  test('a last param that holds text of the template before it is read back whole', () => {
    const sent = new TendError('TEND_ERR_PIPE_GONE', {
      what: 'stdin pipe',
      id: 'abcdefabcdef',
      detail: 'it is gone: the task (or someone); nothing was written',
    })
    expect(TendError.fromWire(sent.toWire()).params).toEqual({
      what: 'stdin pipe',
      id: 'abcdefabcdef',
      detail: 'it is gone: the task (or someone); nothing was written',
    })
  })

  test('a message its template does not make keeps its whole text as detail', () => {
    const received = TendError.fromWire({ code: 'TEND_ERR_TASK_NOT_FOUND', message: 'something else entirely' })
    expect(received.code).toBe('TEND_ERR_TASK_NOT_FOUND')
    expect(received.message).toBe('something else entirely')
    expect(received.params).toEqual({ detail: 'something else entirely' })
  })

  test('an unknown code becomes TEND_ERR_PROTOCOL, with the answer as its detail', () => {
    const received = TendError.fromWire({ code: 'NOPE', message: 'what is this' })
    expect(received.code).toBe('TEND_ERR_PROTOCOL')
    expect(received.message).toBe('what is this')
    const silent = TendError.fromWire({ statusCode: 500 })
    expect(silent.message).toBe('unexpected answer from the daemon: {"statusCode":500}')
  })

  test.each(Object.keys(ERROR_CATALOGUE) as ErrorCode[])('the template of %s reads back what it filled', (code) => {
    const template = ERROR_CATALOGUE[code].message
    const names = [...template.matchAll(/\{(\w+)\}/g)].map((match) => match[1]!)
    // One word each: two params with only a space between them ({method} {route}) cannot tell where a spaced value ends.
    const params = Object.fromEntries(names.map((name) => [name, `<${name}>`]))
    const message = new TendError(code, params as never).message
    expect(readTemplate(template, message)).toEqual(params)
  })
})
