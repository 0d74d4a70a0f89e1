import { constants as fsConstants } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import type { Task } from '../../../protocol/index.js'
import { checkCwd } from '../../spawn/cwd-check.js'
import { findOnPath, planLaunch, type LaunchPlan, type PlanRequest } from '../../sandbox/index.js'
import { ownerIdsOf } from '../../sandbox/task-identity.js'
import type { SpawnExit, SpawnOutcome, Spawner } from '../../spawn/spawner.js'
import type { NetworkLease, OwnerNetworks } from '../../network/owner-networks.js'
import { taskAllowList } from '../../network/allowlist.js'
import { killRemains } from './finish.js'

/**
 * What a plan needs, but the program (resolved here), and the spawner to start it with;
 * endsWithDaemon: the task ends with the daemon (see SpawnRequest), default false.
 */
export type LaunchRequest = Omit<PlanRequest, 'programPath' | 'ownIds' | 'hideByDescriptor' | 'reportsSetup' | 'netns'> & {
  spawner: Spawner
  endsWithDaemon?: boolean
  networks: OwnerNetworks | null
}

export type LaunchOutcome =
  | { started: true; pid: number; exited: Promise<SpawnExit>; plan: LaunchPlan; keeper: { pid: number; startTicks: number } | null }
  | { started: false; reason: string }

/**
 * Starts a task's process: its own session, stdin from /dev/null, and stdout and stderr both on
 * one append-mode descriptor of output.log, so the bytes go straight to disk in the order they
 * were written and the daemon never copies them. A start failure is an outcome, not a throw.
 */
export async function launchTask(request: LaunchRequest): Promise<LaunchOutcome> {
  const { task } = request
  if (request.paths.cwdProblem) return { started: false, reason: request.paths.cwdProblem }
  // A missing cwd is the spawner's to report (its chdir fails, with the reason).
  // The native spawner execs the command itself and reports a program it cannot run (searching the
  // task's PATH); behind a shell prelude or bubblewrap that would be a bare 127, so it is checked first.
  const checkFirst = task.sandbox !== 'off' || request.spawner.kind !== 'native'
  const program = checkFirst ? await resolveProgram(task, request.envAdditions.PATH ?? request.config.baseEnv.PATH) : { path: task.command[0]! }
  if ('problem' in program) return { started: false, reason: program.problem }
  const { spawner, endsWithDaemon, ...planned } = request
  // On its own identity a task runs on its owner's uid. Nothing about one task (an owner whose ids
  // cannot be had now, a folder that cannot be idmapped) makes it run as uid 0 instead: whoever
  // could bring that about (a mount inside a folder, the user database made to fail) would choose
  // the task's identity. Only the machine as a whole falls back, decided at start (task-identity.ts).
  const owned = task.sandbox === 'off' ? null : await ownerIdsOf(request.capabilities.identity, task.owner)
  if (owned && 'problem' in owned) return { started: false, reason: `${owned.problem}; ${NOT_UID_0}` }
  const { networks, ...rest } = planned
  // loopback and allow: the owner's private namespace, held for the task until it has ended.
  let lease: NetworkLease | null = null
  if (task.sandbox !== 'off' && task.network !== 'host') {
    if (!networks) return { started: false, reason: `network ${task.network} is not available here` }
    try {
      lease = networks.acquire({
        id: task.id,
        owner: task.owner,
        network: task.network,
        pid: null,
        allow: task.network === 'allow' ? taskAllowList(request.config.networkAllow, task.allowNet) : [],
      })
    } catch (error) {
      return { started: false, reason: (error as Error).message }
    }
  }
  let launched: { planned: LaunchPlan; outcome: SpawnOutcome }
  try {
    launched = await planAndSpawn(spawner, endsWithDaemon, {
      ...rest,
      programPath: program.path,
      ownIds: owned,
      hideByDescriptor: spawner.hidesPaths,
      reportsSetup: spawner.reportsSetup,
      netns: lease?.network.namespace ?? null,
    })
  } catch (error) {
    lease?.release()
    throw error
  }
  const { outcome } = launched
  const plan: LaunchPlan = lease ? { ...launched.planned, release: () => launched.planned.release().finally(() => lease.release()) } : launched.planned
  if (!outcome.started && outcome.stage === 'idmap') {
    await plan.release()
    const advice =
      outcome.code === 'EINVAL' ? ': unmount what is mounted inside that folder, or give the task a folder on a file system that supports idmapped mounts' : ''
    return { started: false, reason: `${outcome.message}; ${NOT_UID_0}${advice}` }
  }
  if (!outcome.started) {
    // A helper that died mid-spawn may have exec'd the child without saying so: find it by its
    // cgroup or marker, so nothing of a task recorded `failed` is left running.
    // So may a setup stopped for taking too long leave a process of it that its kill did not reach.
    if (outcome.stage === 'spawner' || outcome.code === 'ETIMEDOUT') await killRemains(task, plan.cgroups)
    await plan.release()
    return { started: false, reason: outcome.message }
  }
  networks?.started(task.owner, task.id, outcome.pid)
  return { started: true, pid: outcome.pid, exited: outcome.exited, plan, keeper: outcome.keeper ?? null }
}

const NOT_UID_0 = 'the task was not run on uid 0 instead'

/**
 * Plans the task and has the spawner start it. A sandbox that bubblewrap could not set up (stage
 * `setup`) ran nothing of the task: most likely a place it was to mask by path went, or changed
 * kind, after the plan was made. Planned again, each mask follows what is there now (none for a
 * place that is gone, the right one for a place replaced).
 */
async function planAndSpawn(
  spawner: Spawner,
  endsWithDaemon: boolean | undefined,
  request: PlanRequest,
): Promise<{ planned: LaunchPlan; outcome: SpawnOutcome }> {
  for (let attempt = 1; ; attempt++) {
    const planned = await planLaunch(request)
    const outcome = await spawner.spawn(endsWithDaemon ? { ...planned.request, endsWithDaemon } : planned.request)
    // A setup that took too long (ETIMEDOUT) would take as long again: it is not retried.
    if (outcome.started || outcome.stage !== 'setup' || outcome.code === 'ETIMEDOUT' || attempt === SETUP_ATTEMPTS) return { planned, outcome }
    await planned.release()
  }
}

/**
 * How many plans a task's sandbox setup gets. Each failed one costs one bubblewrap start (a few
 * ms). More than one place can go while they are made: a recursive removal of a folder holding
 * several registered homes takes them one by one, and each plan can meet the next one gone.
 */
const SETUP_ATTEMPTS = 10

/** The program must exist and be executable: otherwise the task fails with a reason, not a bare 127. */
async function resolveProgram(task: Task, searchPath: string | undefined): Promise<{ path: string } | { problem: string }> {
  const program = task.command[0]!
  if (program.includes('/')) {
    const path = program.startsWith('/') ? program : `${task.cwd}/${program}`
    try {
      await access(path, fsConstants.X_OK)
      return (await stat(path)).isDirectory() ? { problem: `program is a directory: ${program}` } : { path }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return { problem: `program is not executable: ${program}` }
      return { problem: (!program.startsWith('/') && (await checkCwd(task.cwd))) || `no such program: ${program}` }
    }
  }
  const path = findOnPath(program, searchPath)
  return path ? { path } : { problem: `no such program: ${program}` }
}
