import { TendClient } from './client.js'
import { clusterTasksFor, withoutClusterOptions, type ClusterTaskOptions } from './cluster/index.js'
import type { TendClientOptions } from './options.js'
import type { TaskService } from './task-service.js'

export type TaskServiceOptions = TendClientOptions & ClusterTaskOptions

/** The owner's tasks on the shared queue the options (or the environment) name, else on the local daemon. */
export function connectTasks(options: TaskServiceOptions, owner: string): TaskService {
  return clusterTasksFor(options, owner) ?? new TendClient({ ...withoutClusterOptions(options), owner })
}
