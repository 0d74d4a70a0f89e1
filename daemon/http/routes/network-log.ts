import { isFinished, NETWORK_LOG_PAGE_DEFAULT, TendError, type NetworkLogPage } from '../../../protocol/index.js'
import { ErrorSchema, NetworkLogPageSchema, NetworkLogQuery, TaskIdParams } from '../../../protocol/schemas.js'
import { readNetworkLog } from '../../../spool/index.js'
import type { NetworkLedger } from '../../network/network-ledger.js'
import type { TaskStore } from '../../store/task-store.js'
import { OwnerHeaders, visibleTask } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface NetworkLogDeps {
  config: { layout: { spool: string } }
  store: Pick<TaskStore, 'get'>
  /** Every decision of the egress proxy, per task: busy while a task's last ones are written. */
  network: Pick<NetworkLedger, 'busy'>
}

/**
 * GET /v1/tasks/:id/network — a page of the task's network.log from a byte offset: the egress
 * proxy's decisions, oldest first. A task on the host's network has none (no proxy sees its
 * traffic), so its folder is not read: under sandbox `off` the task can write it itself.
 */
export function registerNetworkLogRoute(app: TendApp, { config, store, network }: NetworkLogDeps): void {
  typedRoutes(app).get(
    '/v1/tasks/:id/network',
    {
      schema: {
        summary: "Read a task's network decisions",
        params: TaskIdParams,
        headers: OwnerHeaders,
        querystring: NetworkLogQuery,
        response: { 200: NetworkLogPageSchema, 400: ErrorSchema, 404: ErrorSchema, 410: ErrorSchema },
      },
    },
    async (request): Promise<NetworkLogPage> => {
      const { id } = request.params
      const { query } = request
      const from = query.from ?? 0
      // State first, file second: once a finished state is seen (its counts flushed), the file read after it is whole.
      const task = visibleTask(store, request, id)
      const finished = isFinished(task) && !network.busy(id)
      const counts = { omitted: task.networkUse?.logOmitted ?? 0, lost: task.networkUse?.logLost ?? 0 }
      if (task.network === 'host') return { entries: [], next: from, done: finished, ...counts }
      let read
      try {
        read = await readNetworkLog(config.layout.spool, id, from, query.limit ?? NETWORK_LOG_PAGE_DEFAULT)
      } catch (error) {
        const { code, message } = error as NodeJS.ErrnoException
        throw new TendError(
          'TEND_ERR_NETWORK_LOG_UNREADABLE',
          { id, detail: `${code ?? message} (replaced outside tend, or by the task itself)` },
          { cause: error },
        )
      }
      return { entries: read.entries, next: read.next, done: finished && read.next >= read.size, ...counts }
    },
  )
}
