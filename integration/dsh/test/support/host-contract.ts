/**
 * Compile-time check (run.sh type-checks this folder): tend declares the harness surface it uses
 * structurally (tools/dsh/host-types.ts) so that tend builds without the harness. These
 * assignments fail to compile when the published packages stop matching those declarations.
 */
import type { Agent } from '@deepseek-ai/dsh-agent'
import type { PreStepDecision as HarnessPreStepDecision } from '@deepseek-ai/dsh-agent'
import type { createUserMessage, UserMessage } from '@deepseek-ai/dsh-llm'
import type { defineTool, ParameterSchemaSpec, ToolDefinition, ToolResult, ToolRunContext, ValueSchemaSpec } from '@deepseek-ai/dsh-tools'
import type * as tend from '../../../../dist/tools/dsh/index.js'

type Accepts<Target, Source extends Target> = Source

/** What the harness hands tend fits tend's declarations. */
export type HarnessToTend = [
  Accepts<tend.DshAgent, Agent>,
  Accepts<tend.DshRunContext, ToolRunContext>,
  Accepts<tend.UserMessage, UserMessage>,
  Accepts<tend.DshToolResult, ToolResult & { content: Array<{ type: 'text'; text: string }> }>,
  Accepts<tend.DshToolDefinition, ToolDefinition>,
  Accepts<tend.PreStepDecision, HarnessPreStepDecision>,
  Accepts<tend.PreStepPayload, { agent: Agent; messages: UserMessage[]; turn: number; step: number }>,
]

/**
 * What tend hands the harness fits the harness's declarations. (The messages tend returns from
 * agent/pre-step are the harness's own, or made by its createUserMessage, so they are not checked
 * here: tend's UserMessage only declares what tend reads.)
 */
export type TendToHarness = [
  Accepts<ValueSchemaSpec, tend.DshValueSchema>,
  Accepts<ParameterSchemaSpec, tend.DshParameters>,
  Accepts<Parameters<typeof createUserMessage>[0], { content: tend.TextBlock[]; source: { kind: 'plugin'; plugin: 'tend'; form: 'notice'; summary: string } }>,
  Accepts<ReturnType<typeof defineTool>, ToolDefinition>,
]
