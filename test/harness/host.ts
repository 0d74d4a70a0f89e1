import { Context, Service } from 'cordis'
import type { ContentBlock, ExecContext, InjectOptions, Tool, ToolOutput } from '../../tools/index.js'

/**
 * A small stand-in for the agent harness: a cordis `tools` service whose registrations are
 * effects of the registering plugin, agents with inject and disposal, and a scripted model that
 * drives tool calls and records the session's events.
 */
export class ToolsService extends Service {
  readonly tools = new Map<string, Tool>()

  constructor(ctx: Context) {
    super(ctx, 'tools', true)
  }

  register(tool: Tool): () => void {
    // Reached through a plugin's context, a cordis service sees that plugin's context as this.ctx:
    // the registration becomes an effect of the registering plugin.
    return this.ctx.effect(() => {
      this.tools.set(tool.name, tool)
      return () => this.tools.delete(tool.name)
    })
  }
}

declare module 'cordis' {
  interface Context {
    tools: ToolsService
  }
}

export type SessionEvent =
  | { type: 'tool/call'; data: { callId: string; name: string; arguments: unknown } }
  | { type: 'tool/result'; data: { callId: string; name: string; content: ContentBlock[]; isError: boolean; meta?: unknown } }
  | { type: 'notice'; data: { content: ContentBlock[]; source: InjectOptions['source'] } }

export class TestAgent {
  readonly events: SessionEvent[] = []
  private readonly disposers: Array<() => void> = []
  private disposed = false
  /** Makes inject throw, as a disposed or broken agent would. */
  failInjects = false
  private calls = 0

  constructor(readonly id: string) {}

  inject(content: ContentBlock[], options: InjectOptions): void {
    if (this.disposed || this.failInjects) throw new Error(`agent ${this.id} cannot take notices`)
    this.events.push({ type: 'notice', data: { content, source: options.source } })
  }

  onDispose(callback: () => void): void {
    this.disposers.push(callback)
  }

  dispose(): void {
    this.disposed = true
    for (const callback of this.disposers.splice(0)) callback()
  }

  notices(): string[] {
    return this.events.flatMap((event) => (event.type === 'notice' ? event.data.content.map((block) => block.text) : []))
  }

  nextCallId(): string {
    this.calls += 1
    return `${this.id}-call-${this.calls}`
  }
}

export interface ScriptedCall {
  name: string
  arguments: unknown
  signal?: AbortSignal
}

/**
 * The scripted model: each step is the tool call the "model" makes, possibly computed from the
 * previous result. The loop executes it through the registry like a harness would — a throw
 * becomes isError — and records tool/call and tool/result on the agent.
 */
export async function runScript(
  ctx: Context,
  agent: TestAgent,
  steps: Array<ScriptedCall | ((previous: ToolOutput & { isError: boolean }) => ScriptedCall)>,
): Promise<Array<ToolOutput & { isError: boolean }>> {
  const results: Array<ToolOutput & { isError: boolean }> = []
  for (const step of steps) {
    const call = typeof step === 'function' ? step(results[results.length - 1]!) : step
    results.push(await callTool(ctx, agent, call))
  }
  return results
}

export async function callTool(ctx: Context, agent: TestAgent, call: ScriptedCall): Promise<ToolOutput & { isError: boolean }> {
  const callId = agent.nextCallId()
  agent.events.push({ type: 'tool/call', data: { callId, name: call.name, arguments: call.arguments } })
  const tool = ctx.tools.tools.get(call.name)
  let result: ToolOutput & { isError: boolean }
  if (!tool) {
    result = { content: [{ type: 'text', text: `unknown tool ${call.name}` }], isError: true }
  } else {
    const exec: ExecContext = { callId, name: call.name, arguments: call.arguments, agent, signal: call.signal }
    try {
      result = { ...(await tool.execute(call.arguments, exec)), isError: false }
    } catch (error) {
      result = { content: [{ type: 'text', text: (error as Error).message }], isError: true }
    }
  }
  agent.events.push({ type: 'tool/result', data: { callId, name: call.name, content: result.content, isError: result.isError, meta: result.meta } })
  return result
}

export function createHost(): Context {
  const root = new Context()
  root.plugin(ToolsService)
  return root
}

export const textOf = (result: { content: ContentBlock[] }): string => result.content.map((block) => block.text).join('\n')
