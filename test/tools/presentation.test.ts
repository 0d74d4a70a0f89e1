import { describe, expect, test } from 'vitest'
import { createTendTools, DEFAULT_TOOL_SETTINGS, SessionRegistry, type Tool } from '../../tools/index.js'

// Presenters are pure: no daemon is needed, and the registry is never asked for a session.
const sessions = new SessionRegistry({ client: { autoStart: false }, stopTasksOnDispose: false, sinkFor: () => () => false })
const tools = new Map<string, Tool>(createTendTools({ sessions, settings: DEFAULT_TOOL_SETTINGS }).map((tool) => [tool.name, tool]))
const tool = (name: string) => tools.get(name)!

describe('editor cards', () => {
  test('bash shows a terminal card with the command, description and cwd', () => {
    expect(tool('bash').presentCall({ command: 'npm test', description: 'run tests', cwd: '/work' })).toEqual({
      card: 'terminal',
      title: 'npm test',
      description: 'run tests',
      cwd: '/work',
    })
    expect(tool('bash').presentCall({ command: 'ls' })).toEqual({ card: 'terminal', title: 'ls' })
  })

  test('a bash result card carries the raw output, exit code and signal from meta', () => {
    const result = {
      content: [{ type: 'text' as const, text: 'out\n[exit code: 2]' }],
      isError: false,
      meta: { taskId: 'abcdefghijkl', background: false, output: 'out\n', exitCode: 2, signal: null },
    }
    expect(tool('bash').presentResult({ command: 'make' }, result)).toEqual({ card: 'terminal', title: 'make', output: 'out\n', exitCode: 2, signal: null })
    const background = { ...result, meta: { ...result.meta, background: true, output: '', exitCode: null } }
    expect(tool('bash').presentResult({ command: 'make' }, background)).toEqual({ card: 'terminal', title: 'make' })
    // A yielded call: the output so far, no exit yet.
    const yielded = { ...result, meta: { ...result.meta, yielded: true, output: 'ready\n', exitCode: null } }
    expect(tool('bash').presentResult({ command: 'make' }, yielded)).toEqual({ card: 'terminal', title: 'make', output: 'ready\n' })
  })

  test('task_output and task_kill show terminal result cards for their task; task_list a generic card', () => {
    expect(tool('task_output').presentCall({ task_id: 'abcdefghijkl' })).toEqual({
      card: 'generic',
      title: 'task_output abcdefghijkl',
      kind: 'read',
      rawInput: { task_id: 'abcdefghijkl' },
    })
    const outputResult = {
      content: [{ type: 'text' as const, text: 'x' }],
      isError: false,
      meta: { taskId: 'abcdefghijkl', output: 'line\n', exitCode: 0, signal: null, done: true },
    }
    expect(tool('task_output').presentResult({ task_id: 'abcdefghijkl' }, outputResult)).toEqual({
      card: 'terminal',
      title: 'task abcdefghijkl',
      output: 'line\n',
      exitCode: 0,
      signal: null,
    })
    const running = { ...outputResult, meta: { ...outputResult.meta, done: false, exitCode: null } }
    expect(tool('task_output').presentResult({ task_id: 'abcdefghijkl' }, running)).toEqual({ card: 'terminal', title: 'task abcdefghijkl', output: 'line\n' })
    const killResult = {
      content: [{ type: 'text' as const, text: 'killed' }],
      isError: false,
      meta: { taskId: 'abcdefghijkl', state: 'killed', exitCode: null, signal: 'SIGTERM' },
    }
    expect(tool('task_kill').presentResult({ task_id: 'abcdefghijkl' }, killResult)).toEqual({
      card: 'terminal',
      title: 'task abcdefghijkl',
      output: '',
      exitCode: null,
      signal: 'SIGTERM',
    })
    expect(tool('task_list').presentCall({})).toEqual({ card: 'generic', title: 'task_list', kind: 'read' })
    expect(tool('task_list').presentResult({}, { content: [{ type: 'text', text: 'no tasks' }], isError: false })).toEqual({
      card: 'generic',
      title: 'task_list',
      content: [{ type: 'text', text: 'no tasks' }],
    })
  })

  test('malformed logged arguments get the generic fallback instead of a throw', () => {
    expect(tool('bash').presentCall({ cmd: 'old shape' })).toBeUndefined()
    expect(tool('bash').presentCall(null)).toBeUndefined()
    expect(tool('task_output').presentResult({ task_id: 7 }, { content: [], isError: false })).toBeUndefined()
  })

  test('UI formatting stays out of the model-facing descriptions and schemas', () => {
    for (const each of tools.values()) {
      expect(each.description).not.toContain('```')
      expect(each.inputSchema).toMatchObject({ type: 'object', additionalProperties: false })
    }
    expect(tool('bash').inputSchema).toMatchObject({ required: ['command'] })
  })
})
