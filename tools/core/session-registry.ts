import type { TaskServiceOptions } from '../../client/connect-tasks.js'
import { OwnerSession, type NoticeSink } from './owner-session.js'
import { ToolFailure } from './operations.js'
import type { FolderCandidate } from './working-folder.js'

/** What the registry needs of an agent: its session id (the owner) and, optionally, disposal and its folders. */
export interface OwnerAgent {
  readonly id: string
  onDispose?(callback: () => void): unknown
  /** The folders its host names for its work, best first: where a call without cwd runs (see chooseWorkingFolder). */
  workingFolders?(): Promise<readonly FolderCandidate[]>
}

export interface SessionRegistryOptions {
  /** The local daemon's client options, or a cluster (`cluster`, else TEND_CLUSTER). */
  client: TaskServiceOptions
  /** Stop an agent's running tasks when it is disposed. Default true. */
  stopTasksOnDispose: boolean
  /** Builds the notice sink for an agent (the host's delivery: inject, followup, MCP log...). */
  sinkFor: (agent: OwnerAgent) => NoticeSink
}

/** One OwnerSession per agent, created at its first tool call, closed when it is disposed. */
export class SessionRegistry {
  private readonly sessions = new Map<string, OwnerSession>()

  constructor(private readonly options: SessionRegistryOptions) {}

  sessionFor(agent: OwnerAgent | undefined): OwnerSession {
    if (!agent) throw new ToolFailure('this tool needs the calling agent: tasks belong to its session')
    const existing = this.sessions.get(agent.id)
    if (existing) return existing
    const session = new OwnerSession(agent.id, this.options.client, this.options.sinkFor(agent), () => agent.workingFolders?.() ?? Promise.resolve([]))
    this.sessions.set(agent.id, session)
    agent.onDispose?.(() => void this.release(agent.id, this.options.stopTasksOnDispose))
    return session
  }

  /** Forgets an agent's session, stopping its tasks first when asked to. */
  async release(owner: string, stopTasks: boolean): Promise<void> {
    const session = this.sessions.get(owner)
    if (!session) return
    this.sessions.delete(owner)
    if (stopTasks) await session.stopTasks().catch(() => undefined)
    await session.close()
  }

  async closeAll(stopTasks: boolean): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((owner) => this.release(owner, stopTasks)))
  }
}
