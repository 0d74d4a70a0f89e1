import type { TaskDependencies } from './dependencies.js'
import type { NetworkMode, NetworkUse } from './network.js'
import type { TaskPort } from './ports.js'
import type { Readiness, ReadyCondition } from './readiness.js'
import type { LiveUsage, TaskUsage } from './usage.js'
import { signalNumber } from './signals.js'

/** Every state a task can be listed in; `corrupt` is a spool entry that could not be read, never a record's state. */
export const TASK_STATES = ['queued', 'running', 'exited', 'killed', 'timed_out', 'failed', 'lost', 'corrupt'] as const
export type TaskState = (typeof TASK_STATES)[number]
/** The states a task.json can hold. */
export const RECORDED_STATES = ['queued', 'running', 'exited', 'killed', 'timed_out', 'failed', 'lost'] as const satisfies readonly TaskState[]
export type RecordedState = (typeof RECORDED_STATES)[number]
/** States in which nothing will change a task any more, so it can be removed (`corrupt` included). */
export const FINISHED_STATES: readonly TaskState[] = ['exited', 'killed', 'timed_out', 'failed', 'lost', 'corrupt']
export const SCHEMA_VERSION = 1

/** How a task is confined: `off` (process group and limits), `workspace` (bubblewrap), `strict` (+ cgroups, seccomp). */
export const SANDBOX_PROFILES = ['off', 'workspace', 'strict'] as const
export type SandboxProfile = (typeof SANDBOX_PROFILES)[number]

/**
 * How long a task may live: `owner` tasks stop when their agent session is disposed,
 * `persistent` ones outlive it (the operator, and the agent when it returns with the same owner id,
 * still see them).
 */
export const LIFETIMES = ['owner', 'persistent'] as const
export type Lifetime = (typeof LIFETIMES)[number]
export const DEFAULT_LIFETIME: Lifetime = 'owner'

/**
 * Who or what stopped a task, next to its reason: `owner` (a kill by the agent that owns it),
 * `operator` (a kill from an unscoped client: the CLI), `timeout`, `output-cap`, `memory-limit`,
 * `session-end` (its agent session was disposed), `daemon-stop`, `outside-signal` (a signal tend
 * did not send), `lease-expired` (a task held to a fence, stopped because whoever started it could no
 * longer confirm its lease: it may run again elsewhere). Null for a task that ended by itself,
 * failed to start, or was lost. Records that say `cluster-lease` read as `lease-expired`.
 */
export const STOPPED_BY = [
  'owner',
  'operator',
  'timeout',
  'output-cap',
  'memory-limit',
  'session-end',
  'daemon-stop',
  'outside-signal',
  'lease-expired',
] as const
export type StoppedBy = (typeof STOPPED_BY)[number]

/** What a task's stdin can be asked to be: `null` (/dev/null, the default) or `pipe` (`tend send` writes to it). */
export const STDIN_MODES = ['null', 'pipe'] as const
export type StdinMode = (typeof STDIN_MODES)[number]
/** What a task's stdin is: as asked, or `closed`, a pipe whose end of input was sent (`tend send --eof`). */
export const TASK_STDIN = ['null', 'pipe', 'closed'] as const
export type TaskStdin = (typeof TASK_STDIN)[number]

/** A terminal's size in character cells (what `stty size` prints as rows and cols). */
export interface TerminalSize {
  cols: number
  rows: number
}
/** The size a terminal gets when none is asked for: the classic 80 by 24. */
export const DEFAULT_TERMINAL_SIZE: Readonly<TerminalSize> = { cols: 80, rows: 24 }
/** The largest cols or rows a terminal takes (the kernel allows 65535; no program needs that many). */
export const TERMINAL_SIZE_MAX = 10_000

/** Fields every task has, whatever its state. */
export interface TaskBase {
  id: string
  name: string | null
  owner: string
  /** The argv that runs; a shell line is `['sh', '-c', line]` with `shell: true`. */
  command: string[]
  shell: boolean
  cwd: string
  /** Names of the environment variables the task added (values are never stored). */
  envKeys: string[]
  /** Time limit in milliseconds, or null for none. */
  timeoutMs: number | null
  /** Output cap in bytes: past it the task is stopped and its output.log cut to this size. */
  maxOutputBytes: number
  /** Bytes in output.log (live while running). */
  outputBytes: number
  /** `owner` (stops with its agent session) or `persistent`; records of older tends read `owner`. */
  lifetime: Lifetime
  /**
   * `null`: stdin is /dev/null; `pipe`: a FIFO in the spool folder that `POST /v1/tasks/:id/input`
   * writes to; `closed`: that pipe after its end of input was sent. Absent in records of older
   * tends (read as `null`).
   */
  stdin?: TaskStdin
  /**
   * Set when the task runs on a pseudo-terminal: its size now (as last resized). Its stdin is then
   * the terminal's input (`stdin` is `pipe`), and output.log holds what the terminal showed, raw
   * (control sequences, `\r\n`). Null or absent: no terminal.
   */
  tty?: TerminalSize | null
  /** The sandbox profile the task runs under (never less than asked for). */
  sandbox: SandboxProfile
  /**
   * What its network reaches (protocol/network.ts): `loopback`, `allow` or `host` (always `host`
   * with sandbox `off`). Older records' `true`/`false` are read as `host`/`loopback`.
   */
  network: NetworkMode
  /** Destinations the operator allowed this task besides the daemon's list (`--allow-net`); `allow` only. */
  allowNet?: string[]
  /** What it did through tend's egress proxy (network.log in its spool has each decision); absent before its first connection. */
  networkUse?: NetworkUse
  /** Paths writable inside the sandbox besides cwd (and those the daemon's config declares). */
  writablePaths: string[]
  /**
   * Every folder the task could write, as real paths: its cwd (or its git work tree's root), the
   * daemon's and its own writable paths. Empty with sandbox `off`; absent in records of older tends.
   */
  sandboxWritable?: string[]
  /**
   * What its start deserved a word about and the task would otherwise lose silently (a writable
   * path that does not exist, a path under /tmp its command names while it has a private /tmp):
   * at most TASK_WARNINGS_MAX. Absent when none, and in records of older tends.
   */
  warnings?: string[]
  /** Memory limit in bytes (strict), else null. */
  memoryBytes: number | null
  /** Process-count limit (strict), else null. */
  pidsMax: number | null
  createdAt: string
  /** The task's spool folder: task.json and output.log live here. */
  spool: string
  /** The key its submission was made with (`Idempotency-Key`), if any: a retry answers this task. */
  idempotencyKey?: string
  /**
   * Which run of the task this record is, unique to its daemon and admission (`<id>.<random>`): its
   * processes carry it (`TEND_TASK_RUN`) and its cgroups are named after it. Absent in older records.
   */
  run?: string
  /** A hash of that submission's request, to tell a retry from another request with the same key. */
  requestHash?: string
  /** Bytes sent to the task's stdin (and read by it) that input.log could not keep (a full or read-only disk); absent when none were lost. */
  inputLogLostBytes?: number
  /** Bytes a terminal task wrote that output.log could not keep (a full or read-only disk); absent when none were lost. */
  outputLostBytes?: number
  /** When it counts as ready (`--ready-*`); absent: no condition. */
  readyWhen?: ReadyCondition
  /** Its readiness (protocol/readiness.ts); absent when it has no condition. */
  ready?: Readiness
  /** The port it was given as PORT (`--port N` or `auto`), held for it until it ends; absent: none. */
  port?: number | null
  /** True when tend picked `port` (`--port auto`): only such a port is held for the task, and counts towards its owner's cap. */
  portAuto?: boolean
  /** The sockets its processes listen on while it runs; empty once it has ended, absent in older records. */
  ports?: TaskPort[]
  /** How many sockets past MAX_RECORDED_PORTS `ports` leaves out (the highest ports); absent: none. */
  portsOmitted?: number
  /** What it used, once it has ended; absent while it runs and in older records. */
  usage?: TaskUsage
  /** What it uses now: only in answers that ask for it (`?live=true`) while it runs; never in task.json. */
  live?: LiveUsage
  /** The tasks it waits for before it starts; absent: none. */
  after?: TaskDependencies
}

/**
 * Who a task ran as, recorded when it started. `identity`: `task` (a root daemon's own unprivileged
 * identity for its owner's sandboxed tasks: writable folders idmapped, so what it makes there
 * belongs to each folder's owner), `taskUser` (the configured taskUser) or `daemon` (the daemon's uid: `off`,
 * an unprivileged daemon, or a fallback). `fallback`: why a root daemon's sandboxed task ran as uid 0
 * (without capabilities) instead of its own identity. `keyring`: `own` (a new, empty session
 * keyring) or `daemon` (the daemon's: the node spawner cannot give it one).
 */
export interface RanAs {
  uid: number
  gid: number
  identity: 'task' | 'taskUser' | 'daemon'
  fallback?: string
  keyring: 'own' | 'daemon'
}
export const RAN_AS_IDENTITIES = ['task', 'taskUser', 'daemon'] as const
export const RAN_AS_KEYRINGS = ['own', 'daemon'] as const

interface NotStarted {
  startedAt: null
  pid: null
}
interface Started {
  startedAt: string
  pid: number
  /**
   * The task's keeper: the small process that is its parent instead of the daemon, collects its
   * exit status and records it in exit.json, so that the task outlives the daemon (start time in
   * clock ticks since boot, to tell it from a reused pid). Absent where tasks have no keeper.
   */
  keeper?: { pid: number; startTicks: number } | null
  /** The boot the task started in (/proc/sys/kernel/random/boot_id): after a reboot it is lost. */
  bootId?: string
  /** Who it ran as (uid, gid, which identity, its keyring). Absent in records of older tends. */
  ranAs?: RanAs
}
interface NotEnded {
  endedAt: null
  exitCode: null
  signal: null
  reason: null
  stoppedBy: null
}

export type QueuedTask = TaskBase & NotStarted & NotEnded & { state: 'queued' }
export type RunningTask = TaskBase & Started & NotEnded & { state: 'running' }
export type ExitedTask = TaskBase & Started & { state: 'exited'; endedAt: string; exitCode: number; signal: null; reason: null; stoppedBy: null }
/**
 * Stopped on request (kill, output cap, daemon stop, memory limit) or by a signal from outside
 * tend; a queued task can be killed before it starts. stoppedBy is null only in older records.
 */
export type KilledTask = TaskBase &
  (Started | NotStarted) & { state: 'killed'; endedAt: string; exitCode: number | null; signal: string | null; reason: string; stoppedBy: StoppedBy | null }
export type TimedOutTask = TaskBase &
  Started & { state: 'timed_out'; endedAt: string; exitCode: number | null; signal: string | null; reason: string; stoppedBy: 'timeout' | null }
/** Never ran: bad cwd, no such program (stoppedBy null), daemon stopped while it was queued (`daemon-stop`). */
export type FailedTask = TaskBase &
  NotStarted & { state: 'failed'; endedAt: string; exitCode: null; signal: null; reason: string; stoppedBy: 'daemon-stop' | null }
/** The daemon died while it ran; its leftovers were killed by the next daemon. */
export type LostTask = TaskBase & Started & { state: 'lost'; endedAt: string; exitCode: null; signal: null; reason: string; stoppedBy: null }

/**
 * A spool entry whose task.json cannot be read or breaks the record's schema (docs/spool.md). It
 * never runs and never changes; `tend rm` and `tend gc` delete it. `reason` says what is wrong.
 * The other fields hold what could be salvaged from the record when it has the right type (owner,
 * name, command, createdAt, ...), else empty values: owner `unknown`, command `[]`, createdAt the
 * folder's last change. `outputBytes` is the size of the output.log found in the folder.
 */
export type CorruptTask = TaskBase & NotStarted & { state: 'corrupt'; endedAt: null; exitCode: null; signal: null; reason: string; stoppedBy: null }

export type Task = QueuedTask | RunningTask | ExitedTask | KilledTask | TimedOutTask | FailedTask | LostTask | CorruptTask
export type FinishedTask = ExitedTask | KilledTask | TimedOutTask | FailedTask | LostTask
/** A task a record can describe: every state but `corrupt`. */
export type RecordedTask = Exclude<Task, CorruptTask>

/** What task.json holds. */
export type TaskRecord = RecordedTask & { schemaVersion: number }

/** Neither queued nor running: nothing will change it, and it can be removed (a corrupt entry too). */
export function isFinished(task: Pick<Task, 'state'>): boolean {
  return FINISHED_STATES.includes(task.state)
}

export function taskLabel(task: Pick<Task, 'name' | 'command' | 'shell'>): string {
  if (task.name) return task.name
  return task.shell ? (task.command[2] ?? '') : task.command.join(' ')
}

/**
 * The exit status a shell would report for a finished task: its exit code, 128+N when signal N
 * ended it, 124 when its timeout did, 127 when it failed to start, 125 when it was lost; null
 * while it has not ended, and for a corrupt entry (nothing is known of how it ended).
 */
export function exitStatusOf(task: Task): number | null {
  switch (task.state) {
    case 'exited':
      return task.exitCode
    case 'timed_out':
      return 124
    case 'killed': {
      const number = task.signal ? signalNumber(task.signal) : undefined
      if (number) return 128 + number
      return task.exitCode ?? 137
    }
    case 'failed':
      return 127
    case 'lost':
      return 125
    case 'queued':
    case 'running':
    case 'corrupt':
      return null
    default:
      return unknownState(task)
  }
}

/** Every state is handled above (checked when compiling); a state of a newer daemon ends nothing known. */
function unknownState(_task: never): null {
  return null
}
