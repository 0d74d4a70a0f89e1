import { existsSync, mkdtempSync, readFileSync, realpathSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createTendTools, DEFAULT_TOOL_SETTINGS, SessionRegistry } from '../../../dist/tools/index.js'
import { ownerOfSession } from '../../../dist/tools/dsh/index.js'
import { say } from './support/harness.js'
import { FIXTURES, isAlive, waitFor, textWithCost } from './support/daemon.js'
import { harnessPerFile } from './support/harness-per-file.js'
import { obedientModel } from './support/obedient.js'
import { startedTaskId, toolCalls } from './support/session.js'

const shared = harnessPerFile('tools')
const { run } = shared

describe('the tools on the published harness', () => {
  test('they register with the seed tools’ names, descriptions and parameters, and declare output schemas', () => {
    const seed = createTendTools({ sessions: new SessionRegistry({ client: { autoStart: false }, stopTasksOnDispose: false, sinkFor: () => () => false }), settings: DEFAULT_TOOL_SETTINGS })
    const schemas = shared.harness.root.tools.schemas()
    expect(schemas.map((schema) => schema.name)).toEqual(['bash', 'task_output', 'task_input', 'task_kill', 'task_list'])
    for (const tool of seed) {
      const schema = schemas.find((each) => each.name === tool.name)!
      expect(schema.description).toBe(tool.description)
      const { additionalProperties: _closedInSeed, ...seedSchema } = tool.inputSchema
      expect(schema.parameters).toEqual(seedSchema)
      expect(shared.harness.root.tools.get(tool.name)!.output.schema).toMatchObject({ type: 'object', additionalProperties: false })
    }
  })

  test("a call without cwd runs in the agent session's folder", async () => {
    const folder = realpathSync(mkdtempSync(join(shared.scratch, 'session-folder-')))
    shared.harness.createAgent('fg-session-cwd', obedientModel, { cwd: folder })
    const { results } = await run('fg-session-cwd', [{ name: 'bash', args: { command: 'pwd' } }])
    expect(results[0]!.text).toMatch(textWithCost(`${folder}\n[exit code: 0]`, 'exited 0'))
  })

  test('a foreground call with a non-zero exit reports it in the result, not as an error, with a terminal card', async () => {
    const args = { command: 'echo to stdout; echo to stderr >&2; exit 3', description: 'fails on purpose' }
    const { results } = await run('fg-exit', [{ name: 'bash', args }])
    expect(results).toHaveLength(1)
    const [result] = results
    expect(result!.isError).toBe(false)
    expect(result!.text).toMatch(textWithCost('to stdout\nto stderr\n[exit code: 3]', 'exited 3'))
    expect(result!.meta).toMatchObject({ background: false, output: 'to stdout\nto stderr\n', exitCode: 3, signal: null })
    const bash = shared.harness.root.tools.get('bash')!
    expect(bash.presentCall!(args)).toEqual({ card: 'terminal', title: args.command, description: 'fails on purpose' })
    expect(bash.presentResult!(args, { content: [{ type: 'text', text: result!.text }], isError: false, meta: result!.meta as never })).toEqual({
      card: 'terminal',
      title: args.command,
      output: 'to stdout\nto stderr\n',
      exitCode: 3,
      signal: null,
    })
  })

  test('a command that cannot start is a tool error the model sees as text', async () => {
    const { results } = await run('fg-missing-cwd', [{ name: 'bash', args: { command: 'true', cwd: join(shared.scratch, 'no-such-folder') } }])
    expect(results[0]!.isError).toBe(true)
    expect(results[0]!.text).toMatch(/^Error: the command could not be started: .*no-such-folder/)
  })

  test('arguments that do not match the schema, or that it does not know, are refused before anything runs', async () => {
    const { results } = await run('bad-args', [
      { name: 'bash', args: { command: 42 } },
      { name: 'bash', args: { command: 'sleep 30', runInBackground: true } },
    ])
    expect(results.map((result) => [result.isError, result.text])).toEqual([
      [true, 'Error: invalid arguments: "command" must be a string'],
      [true, 'Error: invalid arguments for bash: arguments.runInBackground: unknown property (expected one of: command, description, timeout, run_in_background, cwd, yield_ms, persistent, stdin, tty, network, port, ready, after)'],
    ])
    expect(await shared.daemon.client.list({ owner: 'bad-args', all: true })).toEqual([])
  })

  test('task_kill stops a whole tree — setsid and double-forked children too — before it answers', async () => {
    const dir = mkdtempSync(join(shared.scratch, 'tree-'))
    const { agent, results } = await run('kill-tree', [{ name: 'bash', args: { command: `sh ${join(FIXTURES, 'escaping-tree.sh')} ${dir}`, description: 'escaping tree', run_in_background: true } }])
    const id = startedTaskId(results[0]!.text)
    const pidFiles = ['setsid', 'orphan', 'ignore-term'].map((name) => join(dir, `${name}.pid`))
    await waitFor('the tree to write its three pid files', () => pidFiles.every((file) => existsSync(file) && readFileSync(file, 'utf8').trim() !== ''))
    const pids = pidFiles.map((file) => Number(readFileSync(file, 'utf8')))
    expect(pids.every(isAlive)).toBe(true)

    const { results: killed } = await run('kill-tree', [{ name: 'task_kill', args: { task_id: id, reason: 'test over' } }])
    expect(killed[0]!.isError).toBe(false)
    expect(killed[0]!.text).toMatch(new RegExp(`^task ${id} \\(escaping tree\\) is killed .*no process of it is left\\. Reason: .*test over`))
    expect(pids.filter(isAlive)).toEqual([])
    expect(killed[0]!.meta).toMatchObject({ taskId: id, state: 'killed' })
    expect(shared.harness.root.tools.get('task_kill')!.presentResult!({ task_id: id }, { content: [], isError: false, meta: killed[0]!.meta as never })).toMatchObject({ card: 'terminal', title: `task ${id}` })
    expect(toolCalls(agent).map((call) => call.name)).toEqual(['bash', 'task_kill'])
  })

  test('two agents cannot see, read or kill each other’s tasks; each task is owned by its agent’s session', async () => {
    const gate = join(shared.scratch, 'isolation-gate')
    const { results } = await run('owner-alice', [{ name: 'bash', args: { command: `while [ ! -e ${gate} ]; do sleep 0.01; done`, description: 'alice job', run_in_background: true } }])
    const id = startedTaskId(results[0]!.text)
    expect((await shared.daemon.client.get(id)).owner).toBe('owner-alice')
    await waitFor('alice’s task to run', async () => (await shared.daemon.client.get(id)).state === 'running')

    const { results: bob } = await run('owner-bob', [
      { name: 'task_list', args: {} },
      { name: 'task_output', args: { task_id: id } },
      { name: 'task_kill', args: { task_id: id } },
    ])
    expect(bob.map((result) => [result.isError, result.text])).toEqual([
      [false, 'no tasks'],
      [true, expect.stringMatching(new RegExp(`^Error: .*${id}`))],
      [true, expect.stringMatching(new RegExp(`^Error: .*${id}`))],
    ])
    expect((await shared.daemon.client.get(id)).state).toBe('running')

    const { results: alice } = await run('owner-alice', [{ name: 'task_list', args: {} }, { name: 'task_kill', args: { task_id: id } }])
    expect(alice[0]!.text).toContain(`${id}  running`)
    expect(alice[1]!.isError).toBe(false)
  })

  test('a session id tend cannot use as an owner name maps to a stable digest owner', async () => {
    const sessionId = 'a session/with spaces'
    const { results } = await run(sessionId, [{ name: 'bash', args: { command: 'echo mine' } }])
    const owner = ownerOfSession(sessionId)
    expect(owner).toMatch(/^dsh-[0-9a-f]{32}$/)
    expect(ownerOfSession(sessionId)).toBe(owner)
    const [task] = await shared.daemon.client.list({ owner, all: true })
    expect(task).toMatchObject({ owner, state: 'exited' })
    expect(results[0]!.text).toMatch(textWithCost('mine\n[exit code: 0]', 'exited 0'))
  })

  test('cancelling the agent aborts a foreground call and stops its task', async () => {
    const agent = shared.harness.createAgent('abort-foreground', obedientModel)
    say(agent, JSON.stringify([{ name: 'bash', args: { command: `while [ ! -e ${join(shared.scratch, 'never')} ]; do sleep 0.01; done`, description: 'waits forever' } }]))
    const [running] = await waitFor('the foreground task to run', async () => {
      const tasks = await shared.daemon.client.list({ owner: 'abort-foreground' })
      return tasks.length > 0 ? tasks : undefined
    })
    agent.cancel({ kind: 'user' })
    await agent.whenIdle()
    const [call] = toolCalls(agent)
    expect(call!.isError).toBe(true)
    // Depending on whether the abort beat the start's answer: "aborted before the task was
    // started" or "aborted; foreground task … was stopped". Either way the task is stopped.
    expect(call!.text).toMatch(/^Error: aborted/)
    expect((await shared.daemon.client.get(running!.id)).state).toBe('killed')
  })

  test('task_output and task_list results carry terminal and generic cards', async () => {
    const { results } = await run('cards', [{ name: 'bash', args: { command: 'printf "a\\nb\\n"', description: 'two lines', run_in_background: true } }])
    const id = startedTaskId(results[0]!.text)
    await shared.daemon.client.wait(id)
    const { results: reads } = await run('cards', [{ name: 'task_output', args: { task_id: id } }, { name: 'task_list', args: {} }])
    const [read, list] = reads
    expect(read!.text).toMatch(textWithCost(`task ${id} (two lines): exited; bytes 0–4 of 4\na\nb\n[exit code: 0]`, 'exited 0'))
    const tools = shared.harness.root.tools
    expect(tools.get('task_output')!.presentCall!({ task_id: id })).toEqual({ card: 'generic', title: `task_output ${id}`, kind: 'read', rawInput: { task_id: id } })
    expect(tools.get('task_output')!.presentResult!({ task_id: id }, { content: [], isError: false, meta: read!.meta as never })).toEqual({ card: 'terminal', title: `task ${id}`, output: 'a\nb\n', exitCode: 0, signal: null })
    expect(list!.text).toMatch(new RegExp(`^${id}  exited +exit 0 .* two lines$`))
    expect(list!.meta).toEqual({ count: 1 })
    expect(tools.get('task_list')!.presentResult!({}, { content: [{ type: 'text', text: list!.text }], isError: false, meta: list!.meta as never })).toEqual({ card: 'generic', title: 'task_list', content: [{ type: 'text', text: list!.text }] })
  })
})
