/**
 * How the daemon starts a task's process. Two implementations: the native spawner (a small C
 * helper process that forks from a tiny address space, see daemon/spawner/) and the Node spawner
 * (child_process behind a shell prelude), used where the helper could not be built.
 */

export interface SpawnRequest {
  /** The program: a path (absolute, or relative to cwd), or a bare name searched on env.PATH. */
  file: string
  /** The whole argv, argv[0] included. */
  argv: string[]
  /** The complete environment (nothing is inherited). */
  env: Record<string, string>
  cwd: string
  /** Opened append-only (created 0600 if missing) as the child's stdout and stderr; stdin is /dev/null. */
  outputFile: string
  /** Files opened read-only as the child's fd 3, 4, … (the seccomp program). */
  extraFiles: string[]
  /** cgroup.procs files the child writes its own pid to before it execs. */
  cgroupProcs: string[]
  /** Resource limits set (soft and hard) in the child; core dumps are always off. */
  limits: { openFiles: number; fileSizeBytes: number }
}

export interface SpawnExit {
  /** Exit code, or null when a signal ended it. */
  exitCode: number | null
  signal: NodeJS.Signals | null
}

export type SpawnOutcome =
  | { started: true; pid: number; exited: Promise<SpawnExit> }
  /** Nothing is left running. `stage` says which step failed (chdir, exec, output, cgroup, …). */
  | { started: false; stage: string; code: string; message: string }

export interface Spawner {
  readonly kind: 'native' | 'node'
  /** Starts the child in a new session (its own process group). Never throws for a child that fails to start. */
  spawn(request: SpawnRequest): Promise<SpawnOutcome>
  /** Stops the helper (if any); running children are not touched. */
  close(): Promise<void>
}
