/** The seed harness contract (shared/seed/tool-cookbook.md), host-neutral. */

export type ContentBlock = { type: 'text'; text: string }

export interface InjectOptions {
  source: { kind: 'plugin'; plugin: string }
}

/** What a tool may use of the agent that called it. */
export interface AgentLike {
  /** The agent's session; tend uses it as the task owner. */
  readonly id: string
  inject(content: ContentBlock[], options: InjectOptions): unknown
}

export interface ExecContext {
  callId: string
  name: string
  arguments: unknown
  agent?: AgentLike
  signal?: AbortSignal
}

export interface ToolOutput {
  content: ContentBlock[]
  /** Opaque, JSON-serializable card data handed back to presentResult. */
  meta?: unknown
}

export type ExecuteResult = ContentBlock[] | ToolOutput

export type ToolCallView =
  | { card: 'generic'; title: string; kind?: string; rawInput?: unknown; content?: ContentBlock[]; locations?: Array<{ path: string; line?: number }> }
  | { card: 'terminal'; title: string; description?: string; cwd?: string }

export type ToolResultView =
  | { card: 'generic'; title?: string; content?: ContentBlock[] }
  | { card: 'terminal'; title?: string; output?: string; exitCode?: number | null; signal?: string | null }

export interface PresentedResult {
  content: ContentBlock[]
  isError: boolean
  meta?: unknown
}

export const text = (value: string): ContentBlock => ({ type: 'text', text: value })
