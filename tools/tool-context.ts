import { text, type ContentBlock, type ExecContext } from './harness/index.js'
import { type OwnerSession, type SessionRegistry, type ToolSettings } from './core/index.js'

/** What every seed-contract tool is built from. */
export interface ToolDeps {
  sessions: SessionRegistry
  settings: ToolSettings
}

export function sessionOf(deps: ToolDeps, exec: ExecContext): OwnerSession {
  return deps.sessions.sessionFor(exec.agent)
}

/** The result's text, followed by any notices that could not be delivered to this agent before. */
export function withPendingNotices(session: OwnerSession, main: string): ContentBlock[] {
  return [text(main), ...session.takePendingNotices().map(text)]
}
