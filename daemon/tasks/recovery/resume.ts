import type { RunningTask } from '../../../protocol/index.js'
import { exitPath, outputPath } from '../../../spool/index.js'
import type { DaemonConfig } from '../../config.js'
import { taskAllowList } from '../../network/allowlist.js'
import type { OwnerNetworks } from '../../network/owner-networks.js'
import { TaskCgroups } from '../../sandbox/cgroups.js'
import type { SandboxCapabilities } from '../../sandbox/index.js'
import { leaderIdentity, processState } from '../../spawn/process-scan.js'
import type { TaskResources, TaskRunContext } from '../run/task-run-context.js'
import type { TaskRun } from '../run/task-run.js'
import { makeRoomForResumedExit, spoolIsShort } from '../run/unanswered-exit.js'

/**
 * A task an earlier daemon started, still running under its keeper: supervised again by `run` as if
 * nothing had happened (kill, timeout, output cap, events, wait), through the same tracking as a
 * launch. A timeout that came due meanwhile stops it now. Answers false when its keeper cannot be
 * attached to (then it is not this daemon's to watch).
 */
export async function resumeRun(run: TaskRun, task: RunningTask, context: TaskRunContext): Promise<boolean> {
  const { spawner, config, log, capabilities, outputs, store } = context
  if (!task.keeper) return false
  const attached = await spawner.attach({ keeper: task.keeper, taskPid: task.pid, exitFile: exitPath(config.layout.spool, task.id) })
  if (!attached.attached) {
    log.warn({ taskId: task.id, code: attached.code, reason: attached.message }, 'the keeper of a running task could not be attached to')
    return false
  }
  // A kill under way when the last daemon died may have left a sandbox's monitor held (SIGSTOP,
  // see kill-tree.ts); nothing else stops it (the task cannot reach it): it goes on now.
  if (task.sandbox !== 'off' && processState(task.pid) === 'T' && leaderIdentity(task.pid, task.keeper.pid) !== null) {
    log.warn({ taskId: task.id, pid: task.pid }, 'the sandbox monitor of a resumed task was held by an interrupted kill; continuing it')
    try {
      process.kill(task.pid, 'SIGCONT')
    } catch {
      // Gone meanwhile: its keeper reports how it ended.
    }
  }
  // Its owner keeps the uid it runs on: no other owner is given it while it runs.
  const { identity } = capabilities
  if (identity.as === 'task' && task.ranAs?.identity === 'task') identity.owners.adopt(task.owner, task.ranAs.uid)
  const resources = await resumedResources(task, capabilities, context.networks, config)
  // The file its keeper writes, whatever the task did to the name while no daemon ran.
  await outputs
    .holdFromKeeper(task.id, task.keeper.pid, outputPath(config.layout.spool, task.id))
    .catch((error: unknown) => log.warn({ taskId: task.id, err: error }, 'output.log cannot be held open: it is read by its path'))
  run.track(task, task.pid, attached.exited, resources, task.keeper)
  void run.watch()
  void makeRoomForResumedExit({
    exited: attached.exited,
    leader: run.leader,
    spoolIsShort: () => spoolIsShort(config.layout.spool),
    releaseReserve: () => store.releaseReserve(),
    onReleased: () =>
      log.warn({ taskId: task.id }, 'the spool reserve was given up: a task ended while no daemon ran, and its keeper could not write its exit file'),
  })
  // A deadline or an output cap passed while no daemon ran is enforced now.
  run.armTimeout(task.timeoutMs, Date.parse(task.startedAt))
  // Still waiting for its readiness condition: watched again, its deadline counted from its start.
  run.watchReadiness(task)
  await run.checkOutput()
  log.info({ taskId: task.id, pid: task.pid, keeper: task.keeper.pid }, 'task supervised again')
  return true
}

/** What a launch would have planned for a task that an earlier daemon started: its cgroups, to watch and release. */
async function resumedResources(
  task: RunningTask,
  capabilities: SandboxCapabilities,
  networks: OwnerNetworks | null,
  config: Readonly<DaemonConfig>,
): Promise<TaskResources> {
  const cgroups = TaskCgroups.existing(capabilities.cgroups, task.id, { memoryBytes: task.memoryBytes, pidsMax: task.pidsMax })
  // Its owner's next tasks join the namespace it is in.
  const lease =
    task.sandbox !== 'off' && task.network !== 'host'
      ? (networks?.adopt({
          id: task.id,
          owner: task.owner,
          network: task.network,
          pid: task.pid,
          allow: task.network === 'allow' ? taskAllowList(config.networkAllow, task.allowNet) : [],
        }) ?? null)
      : null
  const release = async () => {
    await cgroups?.remove()
    lease?.release()
  }
  return { cgroups, release }
}
