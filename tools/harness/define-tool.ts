import { type InferArgs, type SchemaSpec, toJsonSchema, validateArgs } from './schema-dsl.js'
import type { ExecContext, ExecuteResult, PresentedResult, ToolCallView, ToolOutput, ToolResultView } from './types.js'

export interface ToolDefinition<S extends SchemaSpec> {
  name: string
  /** What the model sees. */
  description: string
  parameters: S
  execute(args: InferArgs<S>, exec: ExecContext): Promise<ExecuteResult>
  /** Pure: the pending card, from the arguments alone. */
  presentCall?(args: InferArgs<S>): ToolCallView
  /** Pure: the completed card, from the arguments and the result. */
  presentResult?(args: InferArgs<S>, result: PresentedResult): ToolResultView
}

/** A registered tool: arguments validated before execute; presenters never throw. */
export interface Tool {
  name: string
  description: string
  parameters: SchemaSpec
  inputSchema: Record<string, unknown>
  execute(args: unknown, exec: ExecContext): Promise<ToolOutput>
  presentCall(args: unknown): ToolCallView | undefined
  presentResult(args: unknown, result: PresentedResult): ToolResultView | undefined
}

export function defineTool<const S extends SchemaSpec>(definition: ToolDefinition<S>): Tool {
  const { name, parameters } = definition
  const isValid = (args: unknown) => {
    try {
      validateArgs(name, parameters, args)
      return true
    } catch {
      return false
    }
  }
  return {
    name,
    description: definition.description,
    parameters,
    inputSchema: toJsonSchema(parameters),
    async execute(args, exec) {
      validateArgs(name, parameters, args)
      const result = await definition.execute(args as InferArgs<S>, exec)
      return Array.isArray(result) ? { content: result } : result
    },
    // A malformed or older logged argument shape gets the generic fallback, never a throw.
    presentCall(args) {
      if (!definition.presentCall || !isValid(args)) return undefined
      try {
        return definition.presentCall(args as InferArgs<S>)
      } catch {
        return undefined
      }
    },
    presentResult(args, result) {
      if (!definition.presentResult || !isValid(args)) return undefined
      try {
        return definition.presentResult(args as InferArgs<S>, result)
      } catch {
        return undefined
      }
    },
  }
}
