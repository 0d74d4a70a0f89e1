import type { Logger } from 'pino'
import type { RunningTask, Task } from '../../../protocol/index.js'
import type { DaemonConfig } from '../../config.js'
import type { OwnerNetworks } from '../../network/owner-networks.js'
import type { LaunchPlan, ProtectedView, SandboxCapabilities, TaskPaths } from '../../sandbox/index.js'
import { leaderIdentity, type ProcessIdentity } from '../../spawn/process-scan.js'
import type { TaskGroup } from '../../spawn/kill-tree.js'
import type { SpawnExit, Spawner } from '../../spawn/spawner.js'
import type { TaskStore } from '../../store/task-store.js'
import type { HeldOutputs } from '../output/held-outputs.js'
import type { OutputWatch } from '../output/output-watch.js'

// What a TaskRun (task-run.ts) is given and what it tracks.

/** What a queued task's launch needs that is never persisted: its env values, and the folders pinned at admission. */
export interface LaunchNeeds {
  env: Record<string, string>
  paths: TaskPaths
  /** This daemon starts it to end with it (endsWithDaemon): a restart cannot hand it over. */
  endsWithDaemon: boolean
}

/** What every task's run reads: one object, shared by all of a supervisor's runs. */
export interface TaskRunContext {
  config: Readonly<DaemonConfig>
  store: TaskStore
  log: Logger
  spawner: Spawner
  capabilities: SandboxCapabilities
  /** The owners' private networks (loopback and allow); null where none can be made. */
  networks: OwnerNetworks | null
  outputs: HeldOutputs
  outputWatch: OutputWatch
  /** What sandboxed tasks may not be given and get masked: asked again at launch. */
  protectedView: () => ProtectedView
  /** This boot's id, recorded with a running task. */
  bootId: string
  /** Runs before a started task's ending is recorded, which then carries what it did (the network ledger's flush). */
  beforeEnding: (id: string) => Promise<void>
  /** Read live: false once the daemon stops admitting; keepingTasks while it leaves its running tasks to the next one. */
  daemon: { readonly accepting: boolean; readonly keepingTasks: boolean }
  /** The run is over (its final record landed, or it never started): the registry lets go of it. */
  forget: (run: { readonly id: string }) => void
}

/** What a running task holds besides its processes: its cgroups, released once it has ended. */
export type TaskResources = Pick<LaunchPlan, 'cgroups' | 'release'>

/** The process of a started task, as tracked from its start (or resume) until its end is recorded. */
export interface Tracked {
  pid: number
  /** Resolves when the leader has exited; rejects if the spawner that watched it died. */
  exited: Promise<SpawnExit>
  resources: TaskResources
  /** The task's exact process list, when it has a cgroup. */
  members?: () => number[]
  /** The task's cgroup v2 group, when it has one (killed at once, its end watched: kill-tree.ts). */
  group?: TaskGroup
  /** The leader is bubblewrap around the command. */
  wrapped: boolean
  /**
   * The leader as its keeper started it (null: its pid was not the keeper's child when looked at);
   * absent without a keeper. Signals go to its pid only while that pid is still it (kill-tree.ts).
   */
  leader?: ProcessIdentity | null
  /** The task's keeper (absent without one): continued if found stopped while a stop waits for the exit. */
  keeper?: RunningTask['keeper']
}

/** What a run tracks of its started task (or of one an earlier daemon started, resume.ts) from now on. */
export function trackedProcess(task: Task, pid: number, exited: Promise<SpawnExit>, resources: TaskResources, keeper: RunningTask['keeper']): Tracked {
  const { cgroups } = resources
  return {
    pid,
    exited,
    resources,
    // Read now, while the keeper (its parent, which reaps it) holds it: a daemon later frozen
    // past its end could otherwise take a reused pid for it.
    ...(keeper ? { leader: leaderIdentity(pid, keeper.pid), keeper } : {}),
    members: cgroups ? () => cgroups.members() : undefined,
    ...(cgroups?.unified ? { group: cgroups } : {}),
    wrapped: task.sandbox !== 'off',
  }
}
