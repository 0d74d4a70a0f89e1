import { processFolder, SessionRegistry, ToolFailure, type FolderCandidate, type OwnerAgent, type OwnerSession } from '../core/index.js'
import { normalizeDshPluginConfig, type DshPluginConfig } from './config.js'
import { loadHarness } from './harness-loader.js'
import type { DshAgent, DshHost } from './host-types.js'
import { NoticeRouter } from './notice-router.js'
import { ownerOfSession } from './owner.js'
import { createDshTools } from './tools.js'

/** The registry's view of an agent: its tend owner, and the agent the notices go to. */
interface DshOwner extends OwnerAgent {
  readonly agent: DshAgent
}

export const name = 'tend'
export const inject = ['tools']

/**
 * The tend plugin for the published DeepSeek Harness: registers bash, task_output, task_input,
 * task_kill and task_list on `ctx.tools`. Each agent's tasks belong to its session; completion notices reach it
 * through inject / followup (see NoticeRouter). Disposing an agent stops its running tasks (unless
 * stopTasksOnDispose is false); disposing the plugin unregisters the tools and closes every
 * connection and timer it holds, leaving the tasks to run.
 */
export async function apply(ctx: DshHost, config?: DshPluginConfig): Promise<void> {
  const options = normalizeDshPluginConfig(config)
  const harness = await loadHarness(options.harnessFrom)
  const router = new NoticeRouter({
    maxWakeupsPerUserMessage: options.maxWakeupsPerUserMessage,
    createUserMessage: harness.createUserMessage,
    onRouted: (event) => ctx.emit('tend/notice', event),
  })
  const sessions = new SessionRegistry({
    client: { home: options.home, cluster: options.cluster, clusterQueue: options.clusterQueue },
    stopTasksOnDispose: options.stopTasksOnDispose,
    sinkFor: (owner) => {
      const { agent } = owner as DshOwner
      router.track(agent.id)
      return (text, task) => router.deliver(agent, text, task)
    },
  })
  const owners = new Map<string, DshOwner>()
  const releasing = new Set<Promise<void>>()

  const sessionOf = (agent: DshAgent | undefined): OwnerSession => {
    if (!agent) throw new ToolFailure('this tool needs the calling agent: tasks belong to its session')
    let owner = owners.get(agent.id)
    if (!owner) {
      owner = { id: ownerOfSession(agent.id), agent, workingFolders: async () => sessionFolders(agent) }
      owners.set(agent.id, owner)
    }
    return sessions.sessionFor(owner)
  }

  for (const definition of createDshTools({ sessions, settings: options.settings, sessionOf }, harness)) ctx.tools.register(definition)
  ctx.on('agent/pre-step', (payload, next) => router.onPreStep(payload, next))
  ctx.on('agent/disposed', ({ agent }) => {
    const owner = owners.get(agent.id)
    if (!owner || owner.agent !== agent) return
    owners.delete(agent.id)
    router.forget(agent.id)
    const release = sessions.release(owner.id, options.stopTasksOnDispose).catch(() => undefined)
    releasing.add(release)
    void release.finally(() => releasing.delete(release))
  })
  ctx.effect(
    () => async () => {
      await Promise.all(releasing)
      await sessions.closeAll(false)
    },
    'tend: close agent sessions',
  )
}

/** Where the agent's calls without cwd run: its session's folder, else the folder the harness runs in. */
function sessionFolders(agent: DshAgent): FolderCandidate[] {
  const cwd = agent.session.header?.cwd
  return [...(cwd ? [{ path: cwd, source: "the agent session's folder" }] : []), processFolder('the folder the harness runs in')]
}
