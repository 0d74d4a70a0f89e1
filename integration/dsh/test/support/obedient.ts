import type { Message } from '@deepseek-ai/dsh-llm'
import { say, type Harness, type ModelReply } from './harness.js'
import { textOf, toolCalls } from './session.js'

export type ToolCallSpec = { name: string; args: Record<string, unknown> }

/** A model that makes the calls the user's message names (as JSON), then says it is done; a notice it only acknowledges. */
export const obedientModel = (last: Message): ModelReply => {
  if (last.source.kind !== 'user') return { text: 'done' }
  return { calls: JSON.parse(textOf(last.content)) as ToolCallSpec[] }
}

/** Has the agent (made obedient on first use) make these calls in one turn; answers the agent and the calls' results. */
export async function runCalls(harness: Harness, agentId: string, calls: ToolCallSpec[]) {
  const agent = harness.root.agents.get(agentId as never) ?? harness.createAgent(agentId, obedientModel)
  const before = toolCalls(agent).length
  say(agent, JSON.stringify(calls))
  await agent.whenIdle()
  return { agent, results: toolCalls(agent).slice(before) }
}
