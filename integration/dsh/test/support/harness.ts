import { Context } from '@deepseek-ai/cordis'
import AgentLoop from '@deepseek-ai/dsh-agent-loop'
import AgentRegistry, { type Agent, type AgentHandle } from '@deepseek-ai/dsh-agent'
import LlmRuntime, { createUserMessage, LlmAdapter, type GenerateOptions, type Message, type StreamChunk } from '@deepseek-ai/dsh-llm'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import SystemPrompt from '@deepseek-ai/dsh-system-prompt'
import ToolRuntime from '@deepseek-ai/dsh-tools'
import { fileURLToPath } from 'node:url'
import { dirname, resolve } from 'node:path'
// tend's plugin, as a harness user loads it: the built package, not its sources.
import * as tendPlugin from '../../../../dist/tools/dsh/index.js'

/** This folder: the harness packages are installed here, not beside tend's sources. */
export const INTEGRATION_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** What the scripted model answers to one request. */
export type ModelReply = { calls: Array<{ name: string; args: Record<string, unknown> }> } | { text: string }

/** Decides one reply from the request's last message (and the whole request when needed). */
export type Script = (last: Message, request: GenerateOptions) => ModelReply

/**
 * The scripted model: one script per agent (by session id). Streams a reply the way a provider
 * adapter does — block-start, deltas, block-end, usage, finish.
 */
export class ScriptedModel extends LlmAdapter {
  readonly scripts = new Map<string, Script>()
  readonly requests: GenerateOptions[] = []
  private calls = 0

  override async *stream(options: GenerateOptions): AsyncIterable<StreamChunk> {
    this.requests.push(options)
    const script = this.scripts.get(String(options.sessionId))
    if (!script) throw new Error(`no script for session ${String(options.sessionId)}`)
    const reply = script(options.messages[options.messages.length - 1]!, options)
    if ('text' in reply) {
      yield { type: 'block-start', index: 0, blockType: 'text' }
      yield { type: 'text-delta', index: 0, text: reply.text }
      yield { type: 'block-end', index: 0, block: { type: 'text', text: reply.text } }
      yield { type: 'usage', usage: { inputTokens: 1, outputTokens: 1 } }
      yield { type: 'finish', reason: { kind: 'stop' } }
      return
    }
    for (const [index, call] of reply.calls.entries()) {
      this.calls += 1
      const id = `call-${this.calls}` as never
      const args = JSON.stringify(call.args)
      yield { type: 'block-start', index, blockType: 'tool-call' }
      yield { type: 'tool-call-delta', index, id, name: call.name, argumentsDelta: args }
      yield { type: 'block-end', index, block: { type: 'tool-call', id, name: call.name, arguments: args } }
    }
    yield { type: 'usage', usage: { inputTokens: 1, outputTokens: 1 } }
    yield { type: 'finish', reason: { kind: 'tool-calls' } }
  }
}

export interface Harness {
  root: Context
  model: ScriptedModel
  /** Loads tend's plugin against `home`; resolves once its tools are registered. */
  loadTend(config: Record<string, unknown>): Promise<{ dispose: () => Promise<void> }>
  /** An agent owned by the root (ctx.agentLoop.create), driven by `script`; `meta.cwd` is its session's folder. */
  createAgent(id: string, script: Script, meta?: { cwd?: string }): Agent
  /** An agent with its own handle, so a test can dispose it. */
  createOwnedAgent(id: string, script: Script): Promise<AgentHandle>
  dispose(): Promise<void>
}

/** The published services composed as the issue lists them, with the scripted model on `mock`. */
export async function createHarness(): Promise<Harness> {
  const root = new Context()
  await root.plugin(LlmRuntime)
  await root.plugin(SessionStore)
  await root.plugin(SystemPrompt)
  await root.plugin(ToolRuntime)
  await root.plugin(AgentRegistry)
  await root.plugin(AgentLoop, { agents: [] })
  const model = new ScriptedModel()
  root.llm.registerAdapter(['mock'], model)
  return {
    root,
    model,
    async loadTend(config) {
      const fiber = root.plugin(tendPlugin, { harnessFrom: INTEGRATION_DIR, ...config })
      await fiber
      return { dispose: () => fiber.dispose() }
    },
    createAgent(id, script, meta) {
      model.scripts.set(id, script)
      return root.agentLoop.create(SessionId(id), { provider: 'mock', model: 'mock' }, meta)
    },
    async createOwnedAgent(id, script) {
      model.scripts.set(id, script)
      return root.agents.create({ sessionId: SessionId(id), agentOptions: { provider: 'mock', model: 'mock' } })
    },
    dispose: () => root.fiber.dispose(),
  }
}

/** The user says `text`: a follow-up turn that wakes the agent. */
export function say(agent: Agent, text: string): void {
  agent.followup(createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'user' } }))
}
