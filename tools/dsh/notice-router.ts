import { cutText, taskLabel, type Task } from '../../client/index.js'
import type { DshAgent, HarnessHelpers, PreStepDecision, PreStepPayload, UserMessage } from './host-types.js'

/** The harness's bound for a notice summary (CONTEXT_SUMMARY_MAX_CHARS). */
const SUMMARY_MAX_CHARS = 120

/** How one notice reached (or is waiting for) its agent. */
export type NoticeDelivery = 'injected' | 'followed-up' | 'held' | 'released'

/** Published as the `tend/notice` event, for logs and UIs (and tests) to follow notices. */
export interface NoticeRouted {
  agentId: string
  taskId: string
  delivery: NoticeDelivery
}

export interface NoticeRouterOptions {
  /** Turns (or extra steps) tend's notices may start on their own between two user messages. */
  maxWakeupsPerUserMessage: number
  createUserMessage: HarnessHelpers['createUserMessage']
  /** Told of every delivery decision. */
  onRouted?: (event: NoticeRouted) => void
}

interface AgentNotices {
  /** Turns or extra steps started by tend's notices alone since the last user message. */
  wakeups: number
  /** Notices waiting for the agent's next step (the wake-up budget was spent). */
  held: Array<{ text: string; summary: string; taskId: string }>
}

/**
 * Delivers completion notices to harness agents. A running agent gets the notice injected into its
 * current run (taken at its next step; the loop adds a step when the model had finished); an idle
 * one is followed up (woken). At most maxWakeupsPerUserMessage turns or steps are spent on
 * notices alone between two user messages, so a stream of notices cannot keep an agent going on
 * its own. Past the budget a notice is held and joins the agent's next step, whatever starts it.
 * Each notice is handed over exactly once.
 */
export class NoticeRouter {
  private readonly agents = new Map<string, AgentNotices>()

  constructor(private readonly options: NoticeRouterOptions) {}

  /** Starts counting an agent's wake-ups (at its first tend tool call, before any notice). */
  track(agentId: string): void {
    if (!this.agents.has(agentId)) this.agents.set(agentId, { wakeups: 0, held: [] })
  }

  forget(agentId: string): void {
    this.agents.delete(agentId)
  }

  /** The notice sink of one agent. Throws when the agent cannot take it (disposed). */
  deliver(agent: DshAgent, text: string, task: Task): boolean {
    this.track(agent.id)
    const state = this.agents.get(agent.id)!
    const summary = noticeSummary(task)
    if (state.wakeups >= this.options.maxWakeupsPerUserMessage) {
      state.held.push({ text, summary, taskId: task.id })
      this.routed(agent.id, task.id, 'held')
      return true
    }
    const message = this.message(text, summary)
    if (agent.status === 'running') {
      agent.inject(message)
      this.routed(agent.id, task.id, 'injected')
    } else {
      agent.followup(message)
      this.routed(agent.id, task.id, 'followed-up')
    }
    return true
  }

  /**
   * `agent/pre-step` observer: a user message resets the budget; a step that only tend notices
   * asked for spends one wake-up — the first step of a turn they opened (a follow-up), or a step
   * the loop added for a notice injected after the model had finished. Held notices join the
   * first step that is entered.
   */
  async onPreStep(payload: PreStepPayload, next: () => Promise<PreStepDecision>): Promise<PreStepDecision> {
    const state = this.agents.get(payload.agent.id)
    if (!state) return next()
    if (payload.messages.some((message) => message.source.kind === 'user')) state.wakeups = 0
    else if (payload.messages.length > 0 && payload.messages.every(isTendNotice) && !continuesToolCalls(payload)) state.wakeups += 1
    const decision = await next()
    if (decision.kind !== 'enter' || state.held.length === 0) return decision
    const held = state.held.splice(0)
    for (const notice of held) this.routed(payload.agent.id, notice.taskId, 'released')
    return { ...decision, messages: [...decision.messages, ...held.map(({ text, summary }) => this.message(text, summary))] }
  }

  private routed(agentId: string, taskId: string, delivery: NoticeDelivery): void {
    try {
      this.options.onRouted?.({ agentId, taskId, delivery })
    } catch {
      // An observer's failure must not cost the agent its notice.
    }
  }

  private message(text: string, summary: string): UserMessage {
    return this.options.createUserMessage({ content: [{ type: 'text', text }], source: { kind: 'plugin', plugin: 'tend', form: 'notice', summary } })
  }
}

/** Whether this step would run anyway: it follows a model response that called tools. */
function continuesToolCalls(payload: PreStepPayload): boolean {
  if (payload.step === 1) return false
  const events = payload.agent.session.events
  for (let index = events.length - 1; index >= 0; index -= 1) {
    const event = events[index]!
    if (event.type !== 'assistant/message') continue
    const content = (event.data as { message?: { content?: Array<{ type: string }> } }).message?.content ?? []
    return content.some((block) => block.type === 'tool-call')
  }
  return false
}

function isTendNotice(message: UserMessage): boolean {
  const source = message.source as { kind: string; plugin?: string }
  return source.kind === 'plugin' && source.plugin === 'tend'
}

/** One line for the collapsed transcript row: the task, how it ended, and its label. */
export function noticeSummary(task: Task): string {
  const exit = task.exitCode === null ? '' : ` (exit code ${task.exitCode})`
  const summary = `tend task ${task.id} ${task.state}${exit}: ${taskLabel(task).replace(/\s+/g, ' ')}`
  return cutText(summary, SUMMARY_MAX_CHARS, '…')
}
