/**
 * The part of the published DeepSeek Harness (`@deepseek-ai/*` 0.1.0-rc.8) this adapter uses,
 * declared structurally so tend compiles and runs without the harness installed. The runtime
 * helpers (`defineTool`, `createUserMessage`) come from the host's own packages at apply time.
 * integration/dsh checks these shapes against the real packages.
 */

export type TextBlock = { type: 'text'; text: string }

/** A message source; tend's notices are `{kind: 'plugin', plugin: 'tend', form: 'notice', summary}`. */
export type MessageSource = { kind: 'user' } | { kind: 'plugin'; plugin: string; form?: string; summary?: string } | { kind: string }

export interface UserMessage {
  readonly id: string
  readonly role: 'user'
  readonly content: ReadonlyArray<{ type: string }>
  readonly source: MessageSource
}

/** What a tool and the notice router use of a live agent. */
export interface DshAgent {
  /** The agent's session id, shared with its session. */
  readonly id: string
  readonly status: 'idle' | 'running'
  /** The agent's durable log; tend reads whether the model's last response called tools. */
  readonly session: {
    readonly events: ReadonlyArray<{ readonly type: string; readonly data: unknown }>
    /** The session's creation metadata; `cwd` is the absolute folder it was created in (tend's default cwd). */
    readonly header?: { readonly cwd?: string }
  }
  /** Context for the next request; does not wake an idle agent. */
  inject(message: UserMessage): void
  /** A follow-up turn: wakes an idle agent. */
  followup(message: UserMessage): void
}

/** The execution context a tool body receives (`ToolRunContext`). */
export interface DshRunContext {
  readonly callId: string
  readonly name: string
  readonly arguments: unknown
  readonly agent?: DshAgent
  readonly signal: AbortSignal
}

/** The durable result a `presentResult` receives. */
export interface DshToolResult {
  content: TextBlock[]
  isError: boolean
  meta?: unknown
}

/** The harness's value-schema DSL, as far as tend's output schemas use it. */
export type DshValueSchema =
  | { type: 'string'; description?: string; enum?: readonly string[] }
  | { type: 'number' | 'integer'; description?: string; enum?: readonly number[] }
  | { type: 'boolean'; description?: string }
  | { type: 'null' }
  | { type: 'array'; items?: DshValueSchema; description?: string }
  | { type: 'object'; properties?: DshParameters; additionalProperties: boolean; description?: string }
  | { oneOf: readonly [DshValueSchema, DshValueSchema, ...DshValueSchema[]] }

/** A parameter-root property: a value schema, optionally marked required. */
export type DshProperty = DshValueSchema & { required?: true }
export type DshParameters = { [key: string]: DshProperty }

/** The options `defineTool` takes (args and values are typed by each tool, not inferred). */
export interface DshToolOptions<Args, Value> {
  name: string
  description: string
  parameters: DshParameters
  output: {
    schema: DshValueSchema
    render(args: Args, value: Value): TextBlock[]
    presentationMeta?(args: Args, value: Value): unknown
  }
  execute(args: Args, exec: DshRunContext): Promise<Value>
  presentCall?(args: Args): unknown
  presentResult?(args: Args, result: DshToolResult): unknown
}

/** A registry-ready definition; opaque to tend. */
export type DshToolDefinition = { readonly name: string }

/** Runtime helpers taken from the host's harness packages. */
export interface HarnessHelpers {
  /** `defineTool` of `@deepseek-ai/dsh-tools`. */
  defineTool<Args, Value>(options: DshToolOptions<Args, Value>): DshToolDefinition
  /** `createUserMessage` of `@deepseek-ai/dsh-llm`. */
  createUserMessage(input: { content: TextBlock[]; source: MessageSource }): UserMessage
}

/** `agent/pre-step`'s decision: reject the step, or the messages that enter it. */
export type PreStepDecision = { kind: 'reject' } | { kind: 'enter'; messages: UserMessage[] }

export interface PreStepPayload {
  agent: DshAgent
  messages: UserMessage[]
  turn: number
  step: number
}

/** The cordis context the plugin is applied in: the harness's `tools` service, events, effects. */
export interface DshHost {
  tools: { register(definition: DshToolDefinition): unknown }
  on(name: 'agent/pre-step', listener: (payload: PreStepPayload, next: () => Promise<PreStepDecision>) => Promise<PreStepDecision>): unknown
  on(name: 'agent/disposed', listener: (payload: { agent: DshAgent }) => void): unknown
  emit(name: 'tend/notice', event: { agentId: string; taskId: string; delivery: string }): void
  effect(execute: () => () => unknown, label?: string): unknown
}
