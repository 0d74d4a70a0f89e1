import type { Command } from 'commander'
import type { TendClient } from '../client.js'
import { addClusterOptions, addClusterRunOptions, chooseCluster, type ClusterFlags, type ClusterRunFlags } from '../cluster/cli-options.js'
import { DaemonTarget } from './daemon-target.js'
import type { TaskTarget } from './task-target.js'

/** The flags that choose a target, on the verbs that have them. */
export type TargetFlags = ClusterFlags & ClusterRunFlags

/** Adds the flags that choose where a verb acts (--cluster, --cluster-url-file, --queue); for `run`, also what only such a target honours. */
export function addTargetOptions(command: Command, verb: { run?: boolean } = {}): Command {
  if (verb.run) addClusterRunOptions(command)
  return addClusterOptions(command)
}

/** The target the flags (or the environment) name, else the local daemon through `client`. The queue's code (BullMQ) loads only when one is named. */
export async function resolveTarget(flags: TargetFlags, client: TendClient): Promise<TaskTarget> {
  const chosen = chooseCluster(flags, client.options.env)
  if (chosen === undefined) return new DaemonTarget(client)
  const { ClusterTarget } = await import('../cluster/cli-target.js')
  return new ClusterTarget(chosen)
}
