import { createBashTool } from './bash.js'
import { DEFAULT_TOOL_SETTINGS, SessionRegistry, type ToolSettings } from './core/index.js'
import type { AgentLike, Tool } from './harness/index.js'
import { createTaskInputTool } from './task-input.js'
import { createTaskKillTool } from './task-kill.js'
import { createTaskListTool } from './task-list.js'
import { createTaskOutputTool } from './task-output.js'
import type { ToolDeps } from './tool-context.js'

/** Plugin options; every one is optional. */
export interface TendPluginConfig extends Partial<ToolSettings> {
  /** tend's state folder (default: TEND_HOME, else the XDG state folder). */
  home?: string
  /** Stop an agent's running tasks when the agent is disposed (false keeps them). Default true. */
  stopTasksOnDispose?: boolean
  /** A cluster's Redis (redis://host:port): the tasks run on its workers. Default TEND_CLUSTER; unset: the local daemon. */
  cluster?: string
  /** The cluster's queue. Default TEND_CLUSTER_QUEUE, else the default queue. */
  clusterQueue?: string
}

/** The host surface the plugin uses: a cordis context with the harness's `tools` service. */
export interface ToolsHost {
  tools: { register(tool: Tool): unknown }
  effect(callback: () => () => void): unknown
}

/** An agent as the seed harness hands it to tools, with an optional disposal hook. */
export type TendAgent = AgentLike & { onDispose?(callback: () => void): unknown }

export const name = 'tend'
export const inject = ['tools']

export function createTendTools(deps: ToolDeps): Tool[] {
  return [createBashTool(deps), createTaskOutputTool(deps), createTaskInputTool(deps), createTaskKillTool(deps), createTaskListTool(deps)]
}

/**
 * Registers bash, task_output, task_input, task_kill and task_list. Disposing the plugin unregisters them
 * (registration is an effect of the plugin's scope) and closes the agents' sessions; tasks keep
 * running unless their agent is disposed.
 */
export function apply(ctx: ToolsHost, config: TendPluginConfig = {}): void {
  const { home, stopTasksOnDispose = true, cluster, clusterQueue, ...overrides } = config
  const settings: ToolSettings = { ...DEFAULT_TOOL_SETTINGS, ...overrides }
  const sessions = new SessionRegistry({
    client: { home, cluster, clusterQueue },
    stopTasksOnDispose,
    sinkFor: (agent) => (notice) => {
      // A disposed agent throws here; the session then keeps the notice for the next result.
      ;(agent as TendAgent).inject([{ type: 'text', text: notice }], { source: { kind: 'plugin', plugin: 'tend' } })
      return true
    },
  })
  for (const tool of createTendTools({ sessions, settings })) ctx.tools.register(tool)
  ctx.effect(() => () => void sessions.closeAll(false))
}
