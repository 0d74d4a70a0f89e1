import { LIFETIMES, STOPPED_BY, TASK_STATES, TASK_STDIN, type Task } from '../../protocol/index.js'
import { READY_BY, READY_FAILURES } from '../../protocol/readiness.js'
import type { BashOutcome, TaskInputOutcome, TaskListEntry, TaskOutputResult } from '../core/index.js'
import type { DshValueSchema } from './host-types.js'

/**
 * The canonical values the tools return on the published harness (what Code Mode programs get)
 * and their output schemas. The values are tools/core's own results; `notices` carries completion
 * notices that could not be delivered to the agent before, in the order they came.
 */
export type BashValue = BashOutcome & { notices: string[] }
export type TaskOutputValue = TaskOutputResult & { notices: string[] }
export type TaskInputValue = TaskInputOutcome & { notices: string[] }
export interface TaskKillValue {
  task: Task
  notices: string[]
}
export interface TaskListValue {
  tasks: TaskListEntry[]
  notices: string[]
}

const string = { type: 'string' } as const
const integer = { type: 'integer' } as const
const nullable = (schema: DshValueSchema): DshValueSchema => ({ oneOf: [schema, { type: 'null' }] })
const required = <S extends DshValueSchema>(schema: S) => ({ ...schema, required: true as const })

const NOTICES: DshValueSchema = { type: 'array', items: string, description: 'completion notices that could not be delivered before' }

/** A task record; open, so a newer daemon's extra fields do not fail the tool. */
const TASK: DshValueSchema = {
  type: 'object',
  additionalProperties: true,
  properties: {
    id: required(string),
    name: required(nullable(string)),
    owner: required(string),
    command: required({ type: 'array', items: string }),
    shell: required({ type: 'boolean' }),
    cwd: required(string),
    state: required({ type: 'string', enum: TASK_STATES }),
    exitCode: required(nullable(integer)),
    signal: required(nullable(string)),
    reason: required(nullable(string)),
    stoppedBy: nullable({ type: 'string', enum: STOPPED_BY, description: 'who or what stopped it (absent from daemons before lifetimes)' }),
    lifetime: { type: 'string', enum: LIFETIMES, description: 'owner: stops with the agent session; persistent: outlives it' },
    stdin: {
      type: 'string',
      enum: TASK_STDIN,
      description: 'null: /dev/null; pipe: task_input writes to it; closed: its end of input was sent (absent from daemons before stdin pipes)',
    },
    tty: nullable({
      type: 'object',
      additionalProperties: false,
      properties: { cols: required(integer), rows: required(integer) },
      description: 'it runs on a pseudo-terminal of this size; null or absent (daemons before terminals): no terminal',
    }),
    outputBytes: required(integer),
    createdAt: required(string),
    startedAt: required(nullable(string)),
    endedAt: required(nullable(string)),
    spool: required(string),
  },
}

const PORT: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { proto: required({ type: 'string', enum: ['tcp', 'udp'] }), address: required(string), port: required(integer) },
}

const READINESS: DshValueSchema = {
  oneOf: [
    { type: 'null' },
    {
      type: 'object',
      additionalProperties: false,
      properties: { at: required(string), by: required({ type: 'string', enum: READY_BY }), line: string },
    },
    { type: 'object', additionalProperties: false, properties: { failed: required({ type: 'string', enum: READY_FAILURES }), at: required(string) } },
  ],
}

const MODEL_OUTPUT: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  description: "output shaped for the model: bytes [from, next), with omittedBytes left out of the middle; a terminal task's as plain text",
  properties: {
    text: required(string),
    from: required(integer),
    next: required(integer),
    omittedBytes: required(integer),
    heldBackBytes: {
      ...integer,
      description: 'bytes from next on not in the text yet (a character, or on a terminal a control sequence, still being written)',
    },
  },
}

export const BASH_VALUE_SCHEMA: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    kind: required({
      type: 'string',
      enum: ['background', 'ready', 'foreground', 'yielded'],
      description: 'ready: a background start that waited for its readiness (task.ready says how it went)',
    }),
    task: required(TASK),
    output: MODEL_OUTPUT,
    outputPath: string,
    yieldMs: { ...integer, description: 'yielded: how long the call waited before it returned with the task still running' },
    warnings: { type: 'array', items: string, description: 'what the start deserves a word about (a port another of your tasks already serves)' },
    notices: required(NOTICES),
  },
}

export const TASK_OUTPUT_VALUE_SCHEMA: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    task: required(TASK),
    output: required(MODEL_OUTPUT),
    filter: required(nullable({ type: 'object', additionalProperties: false, properties: { pattern: required(string), matchedLines: required(integer) } })),
    waitFor: {
      type: 'object',
      additionalProperties: false,
      description: 'with wait_for: the first new line that matched (matchedLine null: none did before wait_ms ran out or the task ended)',
      properties: { pattern: required(string), matchedLine: required(nullable(string)), waitMs: required(integer) },
    },
    done: required({ type: 'boolean' }),
    outputPath: required(string),
    notices: required(NOTICES),
  },
}

export const TASK_INPUT_VALUE_SCHEMA: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...(TASK_OUTPUT_VALUE_SCHEMA as { properties: Record<string, DshValueSchema> }).properties,
    sentBytes: required({ ...integer, description: "bytes written to the task's stdin" }),
    eof: required({ type: 'boolean', description: 'the stdin was closed after the text' }),
  },
}

export const TASK_KILL_VALUE_SCHEMA: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { task: required(TASK), notices: required(NOTICES) },
}

const TASK_LIST_ENTRY: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    id: required(string),
    label: required(string),
    state: required({ type: 'string', enum: TASK_STATES }),
    ageMs: required(integer),
    exitCode: required(nullable(integer)),
    signal: required(nullable(string)),
    stoppedBy: required(nullable({ type: 'string', enum: STOPPED_BY })),
    lifetime: required({ type: 'string', enum: LIFETIMES }),
    outputBytes: required(integer),
    ports: required({ type: 'array', items: PORT, description: 'where it listens while it runs (empty: nowhere, or a daemon that does not look)' }),
    ready: { ...READINESS, description: 'null: not ready yet; {at, by, line?}: ready; {failed, at}: never ready. Absent: no readiness condition' },
  },
}

export const TASK_LIST_VALUE_SCHEMA: DshValueSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { tasks: required({ type: 'array', items: TASK_LIST_ENTRY }), notices: required(NOTICES) },
}
