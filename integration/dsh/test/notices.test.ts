import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Message } from '@deepseek-ai/dsh-llm'
import { createHarness, say, type Harness, type ModelReply } from './support/harness.js'
import { startTestDaemon, waitFor, textWithCost, type TestDaemon } from './support/daemon.js'
import { noticedTaskId, noticeMessages, noticeTexts, startedTaskId, textOf, toolCalls, turnCount } from './support/session.js'

let daemon: TestDaemon
let harness: Harness
let scratch: string
const routed: Array<{ agentId: string; taskId: string; delivery: string }> = []

beforeAll(async () => {
  daemon = await startTestDaemon()
  scratch = mkdtempSync(join(tmpdir(), 'tend-dsh-notices-'))
  harness = await createHarness()
  harness.root.on('tend/notice' as never, ((event: (typeof routed)[number]) => void routed.push(event)) as never)
  await harness.loadTend({ home: daemon.home, maxWakeupsPerUserMessage: 2 })
})
afterAll(async () => {
  await harness?.dispose()
  await daemon?.stop()
  rmSync(scratch, { recursive: true, force: true })
})

/** A shell line that waits for `gate` to exist, then prints `output`. */
const gated = (gate: string, output: string) => `while [ ! -e ${gate} ]; do sleep 0.01; done; echo ${output}`

const isNotice = (message: Message) => message.source.kind === 'plugin'
const isToolResult = (message: Message) => message.source.kind === 'tool'

/**
 * The model of these tests: on "start A B" it starts one gated background job per gate; on a
 * notice it reads that task's output; after any tool result or other message it says it is done.
 */
function reactiveModel(gates: Record<string, string>) {
  return (last: Message): ModelReply => {
    const text = textOf(last.content)
    if (last.source.kind === 'user' && text.startsWith('start')) {
      return { calls: text.split(' ').slice(1).map((label) => ({ name: 'bash', args: { command: gated(gates[label]!, `output of ${label}`), description: `job ${label}`, run_in_background: true } })) }
    }
    if (isNotice(last)) return { calls: [{ name: 'task_output', args: { task_id: noticedTaskId(text) } }] }
    if (isToolResult(last)) return { text: 'ok' }
    return { text: 'nothing to do' }
  }
}

describe('completion notices on the published harness', () => {
  test('an idle agent is woken once per finished task, and its task_output call gets the output', async () => {
    const gates = { A: join(scratch, 'idle-a'), B: join(scratch, 'idle-b') }
    const agent = harness.createAgent('notice-idle', reactiveModel(gates))
    say(agent, 'start A B')
    await agent.whenIdle()
    const [startA, startB] = toolCalls(agent)
    const idA = startedTaskId(startA!.text)
    const idB = startedTaskId(startB!.text)
    expect(turnCount(agent)).toBe(1)
    expect(agent.status).toBe('idle')

    writeFileSync(gates.A, '')
    await waitFor('the agent to be woken and to read task A', () => toolCalls(agent).some((call) => call.name === 'task_output' && call.arguments.task_id === idA))
    await agent.whenIdle()
    // Task B's ending comes after A's on the same event stream: once its notice is in, a
    // duplicate of A's would be too.
    writeFileSync(gates.B, '')
    await waitFor('the agent to be woken and to read task B', () => toolCalls(agent).some((call) => call.name === 'task_output' && call.arguments.task_id === idB))
    await agent.whenIdle()

    expect(noticeTexts(agent)).toEqual([
      expect.stringMatching(textWithCost(`background task ${idA} (job A) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0')),
      expect.stringMatching(textWithCost(`background task ${idB} (job B) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0')),
    ])
    expect(noticeMessages(agent)[0]!.source).toEqual({ kind: 'plugin', plugin: 'tend', form: 'notice', summary: `tend task ${idA} exited (exit code 0): job A` })
    expect(turnCount(agent)).toBe(3)
    expect(routed.filter((event) => event.agentId === 'notice-idle')).toEqual([
      { agentId: 'notice-idle', taskId: idA, delivery: 'followed-up' },
      { agentId: 'notice-idle', taskId: idB, delivery: 'followed-up' },
    ])
    const readA = toolCalls(agent).find((call) => call.name === 'task_output' && call.arguments.task_id === idA)!
    expect(readA.isError).toBe(false)
    expect(readA.text).toMatch(textWithCost(`task ${idA} (job A): exited; bytes 0–12 of 12\noutput of A\n[exit code: 0]`, 'exited 0'))
    expect(readA.meta).toEqual({ taskId: idA, output: 'output of A\n', exitCode: 0, signal: null, done: true })
  })

  test('a task that ends while its agent is running is injected into that run, not a new turn', async () => {
    const gates = { fast: join(scratch, 'running-fast'), hold: join(scratch, 'running-hold') }
    const agent = harness.createAgent('notice-running', (last) => {
      const text = textOf(last.content)
      if (last.source.kind === 'user') return { calls: [{ name: 'bash', args: { command: gated(gates.fast, 'fast'), description: 'fast job', run_in_background: true } }] }
      // Keeps the turn running (a foreground call) until the test opens its gate.
      if (isToolResult(last) && text.startsWith('Started background task')) return { calls: [{ name: 'bash', args: { command: gated(gates.hold, 'held'), description: 'hold the turn' } }] }
      if (isNotice(last)) return { calls: [{ name: 'task_output', args: { task_id: noticedTaskId(text) } }] }
      return { text: 'ok' }
    })
    say(agent, 'go')
    const idFast = startedTaskId(await waitFor('the background start’s result', () => toolCalls(agent)[0]?.text))
    await waitFor('the turn to be held by its foreground call', async () => {
      const tasks = await daemon.client.list({ owner: 'notice-running' })
      return tasks.some((task) => task.name === 'hold the turn' && task.state === 'running')
    })
    writeFileSync(gates.fast, '')
    await waitFor('the fast job’s notice to wait in the running agent’s inbox', () => agent.inbox.nextStep.some(isNotice))
    expect(agent.status).toBe('running')
    writeFileSync(gates.hold, '')
    await agent.whenIdle()

    expect(turnCount(agent)).toBe(1)
    expect(noticeTexts(agent)).toEqual([
      expect.stringMatching(textWithCost(`background task ${idFast} (fast job) finished [status: exited, exit code: 0]. Read its output with task_output.`, 'exited 0')),
    ])
    expect(toolCalls(agent).map((call) => call.name)).toEqual(['bash', 'bash', 'task_output'])
    expect(toolCalls(agent)[2]!.text).toContain('fast\n[exit code: 0]')
    expect(routed.filter((event) => event.agentId === 'notice-running').map((event) => event.delivery)).toEqual(['injected'])
  })

  test('past maxWakeupsPerUserMessage a notice waits for the next user message instead of waking the agent', async () => {
    const gates = { A: join(scratch, 'budget-a'), B: join(scratch, 'budget-b'), C: join(scratch, 'budget-c') }
    const agent = harness.createAgent('notice-budget', reactiveModel(gates))
    say(agent, 'start A B C')
    await agent.whenIdle()
    const ids = toolCalls(agent).map((call) => startedTaskId(call.text))
    const deliveries = () => routed.filter((event) => event.agentId === 'notice-budget')

    // The budget is 2: A and B each wake the agent, C's notice is held.
    for (const [index, label] of (['A', 'B', 'C'] as const).entries()) {
      writeFileSync(gates[label], '')
      await waitFor(`task ${label}'s notice to be routed`, () => deliveries().length === index + 1)
      await agent.whenIdle()
    }
    expect(deliveries().map((event) => [event.taskId, event.delivery])).toEqual([
      [ids[0], 'followed-up'],
      [ids[1], 'followed-up'],
      [ids[2], 'held'],
    ])
    expect(turnCount(agent)).toBe(3)
    expect(noticeTexts(agent).map(noticedTaskId)).toEqual([ids[0], ids[1]])

    say(agent, 'anything new?')
    await agent.whenIdle()
    expect(turnCount(agent)).toBe(4)
    expect(noticeTexts(agent).map(noticedTaskId)).toEqual([ids[0], ids[1], ids[2]])
    expect(deliveries().at(-1)).toEqual({ agentId: 'notice-budget', taskId: ids[2], delivery: 'released' })
    // The held notice entered the user's turn, right after the user's message.
    const events = agent.session.events as unknown as Array<{ type: string; data: Message }>
    const lastTurn = events.slice(events.findLastIndex((event) => event.type === 'turn/start'))
    const entered = lastTurn.filter((event) => event.type === 'user/message').map((event) => event.data.source.kind)
    expect(entered).toEqual(['user', 'plugin'])
  })

  test('a notice injected as the model finishes runs one more step, and that step spends a wake-up', async () => {
    const gates = { A: join(scratch, 'extra-a'), B: join(scratch, 'extra-b'), C: join(scratch, 'extra-c') }
    const agent = harness.createAgent('notice-extra-step', reactiveModel(gates))
    const deliveries = () => routed.filter((event) => event.agentId === 'notice-extra-step')
    // Hold the first turn at its stop boundary until task A's notice is in the inbox: the loop
    // then sees fresh input and runs another step instead of closing the turn.
    let holdOnce = true
    const release = harness.root.on('agent/turn-stopping', async ({ agent: stopping }) => {
      if (stopping.id !== agent.id || !holdOnce) return
      holdOnce = false
      writeFileSync(gates.A, '')
      await waitFor('task A’s notice to be injected', () => agent.inbox.nextStep.some(isNotice))
    })
    say(agent, 'start A B C')
    await agent.whenIdle()
    release()
    const ids = toolCalls(agent)
      .filter((call) => call.name === 'bash')
      .map((call) => startedTaskId(call.text))
    expect(turnCount(agent)).toBe(1)
    expect(toolCalls(agent).at(-1)).toMatchObject({ name: 'task_output', arguments: { task_id: ids[0] } })

    // The budget is 2 and the extra step spent one: B wakes the agent, C's notice is held.
    for (const [index, label] of (['B', 'C'] as const).entries()) {
      writeFileSync(gates[label], '')
      await waitFor(`task ${label}'s notice to be routed`, () => deliveries().length === index + 2)
      await agent.whenIdle()
    }
    expect(deliveries().map((event) => [event.taskId, event.delivery])).toEqual([
      [ids[0], 'injected'],
      [ids[1], 'followed-up'],
      [ids[2], 'held'],
    ])
    expect(turnCount(agent)).toBe(2)
  })
})
