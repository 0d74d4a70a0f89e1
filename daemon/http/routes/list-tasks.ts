import type { FastifyReply } from 'fastify'
import { Type } from 'typebox'
import { type Task } from '../../../protocol/index.js'
import { ListTasksQuery } from '../../../protocol/schemas.js'
import type { CorruptEntries } from '../../store/corrupt-entries.js'
import { listOrder, type TaskStore } from '../../store/task-store.js'
import { withLiveOutput } from '../../tasks/output/live-output.js'
import type { PortWatch } from '../../tasks/ports/port-watch.js'
import type { Supervisor } from '../../tasks/supervisor.js'
import { OwnerHeaders, requestOwner } from '../owner-scope.js'
import { typedRoutes, type TendApp } from '../tend-app.js'

export interface ListTasksDeps {
  config: { layout: { spool: string } }
  store: Pick<TaskStore, 'list'>
  corrupt: Pick<CorruptEntries, 'list'>
  supervisor: Pick<Supervisor, 'outputs'> & Partial<Pick<Supervisor, 'liveUsageOf'>> & { ports: Pick<PortWatch, 'refreshSome'> }
}

const TASK_REF = Type.Ref('Task') as unknown as Record<string, unknown>

/**
 * GET /v1/tasks — running and queued tasks; `all` adds finished ones and corrupt spool entries;
 * `live`, running tasks' live figures (sampled at most once a second each).
 *
 * Each task is serialized once per version: the store replaces a task's object on every change,
 * so its JSON is kept against the object and a list joins what it has (a running task's live
 * output size makes a new object, serialized afresh). The document is the one the response schema
 * would make: each task goes through the route's own serializer for the Task schema.
 */
export function registerListTasksRoute(app: TendApp, { config, store, corrupt, supervisor }: ListTasksDeps): void {
  const serialized = new WeakMap<Task, Buffer>()
  typedRoutes(app).get(
    '/v1/tasks',
    {
      schema: {
        summary: 'List tasks',
        headers: OwnerHeaders,
        querystring: ListTasksQuery,
        response: { 200: Type.Object({ tasks: Type.Array(Type.Ref('Task')) }) },
      },
    },
    async (request, reply) => {
      const { query } = request
      const owner = requestOwner(request)
      // An owner lists only its own tasks, whatever it asks for.
      if (owner !== null && query.owner !== undefined && query.owner !== owner) return { tasks: [] }
      const filter = { all: query.all ?? false, owner: owner ?? query.owner }
      // Running tasks' ports as they are now (each looked at most once a second); listed again after.
      await supervisor.ports.refreshSome(store.list({ owner: filter.owner }).flatMap((task) => (task.state === 'running' ? [task.id] : [])))
      const tasks: Task[] = store.list(filter)
      // Only a running task's answer reads anything (its output size on disk now).
      const live = await Promise.all(
        tasks.map((task) =>
          task.state === 'running'
            ? withLiveOutput(supervisor.outputs, config.layout.spool, task, query.live ? supervisor.liveUsageOf?.(task) : undefined)
            : task,
        ),
      )
      const corruptEntries = query.all ? corrupt.list(owner ?? query.owner ?? null) : []
      const listed = corruptEntries.length > 0 ? [...live, ...corruptEntries].sort(listOrder) : live
      const serialize = reply.compileSerializationSchema(TASK_REF, '200')
      const parts = listed.map((task) => {
        let json = serialized.get(task)
        if (json === undefined) {
          // Bytes, not the serializer's string: that is a rope of many pieces, which every join would walk again.
          json = Buffer.from(serialize(task as unknown as Record<string, unknown>))
          serialized.set(task, json)
        }
        return json
      })
      // Bytes already serialized, task by task: fastify sends a Buffer as it is (the schema's type is of the document).
      return (reply as FastifyReply).type('application/json; charset=utf-8').send(joinJson(parts))
    },
  )
}

const OPEN = Buffer.from('{"tasks":[')
const COMMA = Buffer.from(',')
const CLOSE = Buffer.from(']}')

/** `{"tasks":[a,b,…]}` from each task's JSON: one copy of each. */
function joinJson(parts: Buffer[]): Buffer {
  const pieces: Buffer[] = [OPEN]
  parts.forEach((part, index) => pieces.push(...(index === 0 ? [part] : [COMMA, part])))
  pieces.push(CLOSE)
  return Buffer.concat(pieces)
}
