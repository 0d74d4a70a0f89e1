import type { Agent } from '@deepseek-ai/dsh-agent'
import type { Message } from '@deepseek-ai/dsh-llm'

/** Readers over an agent's durable session log (`agent.session.events`). */

interface LoggedEvent {
  type: string
  data: unknown
}

const events = (agent: Agent): LoggedEvent[] => agent.session.events as unknown as LoggedEvent[]

export interface ToolCallRecord {
  callId: string
  name: string
  arguments: Record<string, unknown>
  /** The text of the result's content blocks, joined by newlines. */
  text: string
  isError: boolean
  meta: unknown
}

/** Every tool/call with its tool/result, in order. */
export function toolCalls(agent: Agent): ToolCallRecord[] {
  const results = new Map<string, { text: string; isError: boolean; meta: unknown }>()
  for (const event of events(agent)) {
    if (event.type !== 'tool/result') continue
    const data = event.data as { message: Message; meta?: unknown }
    for (const block of data.message.content) {
      if (block.type !== 'tool-result') continue
      results.set(block.toolCallId, { text: textOf(block.content), isError: block.isError === true, meta: data.meta })
    }
  }
  return events(agent)
    .filter((event) => event.type === 'tool/call')
    .map((event) => {
      const data = event.data as { callId: string; name: string; arguments: string }
      const result = results.get(data.callId)
      return { callId: data.callId, name: data.name, arguments: JSON.parse(data.arguments) as Record<string, unknown>, text: result?.text ?? '', isError: result?.isError ?? false, meta: result?.meta }
    })
}

/** The user/message events tend's plugin produced (completion notices), as messages. */
export function noticeMessages(agent: Agent): Message[] {
  return events(agent)
    .filter((event) => event.type === 'user/message')
    .map((event) => event.data as Message)
    .filter((message) => message.source.kind === 'plugin' && (message.source as { plugin?: string }).plugin === 'tend')
}

export const noticeTexts = (agent: Agent): string[] => noticeMessages(agent).map((message) => textOf(message.content))

/** How many turns the agent has opened. */
export const turnCount = (agent: Agent): number => events(agent).filter((event) => event.type === 'turn/start').length

/** The text of content blocks, tool-result blocks included. */
export function textOf(content: readonly unknown[]): string {
  return content
    .map((block) => {
      const each = block as { type: string; text?: string; content?: unknown[] }
      if (each.type === 'text') return each.text ?? ''
      if (each.type === 'tool-result') return textOf(each.content ?? [])
      return ''
    })
    .join('\n')
}

/** The task id a bash background start announced. */
export function startedTaskId(text: string): string {
  const match = /Started background task ([0-9a-z]{12})/.exec(text)
  if (!match) throw new Error(`no background task id in: ${text}`)
  return match[1]!
}

/** The task id a completion notice names. */
export function noticedTaskId(text: string): string {
  const match = /^background task ([0-9a-z]{12}) /.exec(text)
  if (!match) throw new Error(`not a completion notice: ${text}`)
  return match[1]!
}
