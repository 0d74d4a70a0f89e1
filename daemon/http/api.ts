import { TaskSchema } from '../../protocol/schemas.js'
import { registerConsoleRoutes, type ConsoleRoutesDeps } from './routes/console.js'
import { registerEventsRoute, type EventsDeps } from './routes/events.js'
import { registerGcRoute, type GcDeps } from './routes/gc.js'
import { registerGetTaskRoute, type GetTaskDeps } from './routes/get-task.js'
import { registerKillTaskRoute, type KillTaskDeps } from './routes/kill-task.js'
import { registerListTasksRoute, type ListTasksDeps } from './routes/list-tasks.js'
import { registerNetworkLogRoute, type NetworkLogDeps } from './routes/network-log.js'
import { registerOpenApiRoute } from './routes/openapi.js'
import { registerOutputFileRoute, type OutputFileDeps } from './routes/output-file.js'
import { registerReadOutputRoute, type ReadOutputDeps } from './routes/read-output.js'
import { registerRemoveTaskRoute, type RemoveTaskDeps } from './routes/remove-task.js'
import { registerResizeTaskRoute, type ResizeTaskDeps } from './routes/resize-task.js'
import { registerResolveTaskRoute, type ResolveTaskDeps } from './routes/resolve-task.js'
import { registerStartTaskRoute, type StartTaskDeps } from './routes/start-task.js'
import { registerStatusRoute, type StatusDeps } from './routes/status.js'
import { registerStopRoute, type StopDeps } from './routes/stop.js'
import { registerTaskInputRoute, type TaskInputDeps } from './routes/task-input.js'
import { registerWaitTaskRoute, type WaitTaskDeps } from './routes/wait-task.js'
import type { TendApp } from './tend-app.js'

/**
 * What the API's routes use, all of them together: each route file names its own part (its
 * `…Deps`), and is given only that.
 */
export type ApiDeps = StartTaskDeps &
  ListTasksDeps &
  GetTaskDeps &
  ResolveTaskDeps &
  ReadOutputDeps &
  NetworkLogDeps &
  WaitTaskDeps &
  KillTaskDeps &
  TaskInputDeps &
  ResizeTaskDeps &
  RemoveTaskDeps &
  GcDeps &
  StatusDeps &
  StopDeps &
  EventsDeps &
  OutputFileDeps

/**
 * Every route of the API with its schemas, on the socket and on the console's listener alike. The
 * build registers them too, on an app of its own, to compile their validators and serializers
 * ahead of time (daemon/precompiled/build.mjs): no route may use its deps before a request.
 */
export function registerApi(app: TendApp, deps: ApiDeps): void {
  app.addSchema(TaskSchema)
  // First: it records every route declared after it, for the document it builds when asked.
  registerOpenApiRoute(app, deps.version)

  registerStartTaskRoute(app, deps)
  registerListTasksRoute(app, deps)
  registerResolveTaskRoute(app, deps)
  registerGetTaskRoute(app, deps)
  registerReadOutputRoute(app, deps)
  registerNetworkLogRoute(app, deps)
  registerWaitTaskRoute(app, deps)
  registerKillTaskRoute(app, deps)
  registerTaskInputRoute(app, deps)
  registerResizeTaskRoute(app, deps)
  registerRemoveTaskRoute(app, deps)
  registerGcRoute(app, deps)
  registerStatusRoute(app, deps)
  registerStopRoute(app, deps)
  registerEventsRoute(app, deps)
  registerOutputFileRoute(app, deps)
}

/** Routes of the Unix socket only: the console's TCP listener never serves its own control (a token could make tokens). */
export function registerSocketOnlyApi(app: TendApp, deps: ConsoleRoutesDeps): void {
  registerConsoleRoutes(app, deps)
}
