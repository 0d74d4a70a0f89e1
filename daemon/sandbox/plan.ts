import { statSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { Task } from '../../protocol/index.js'
import type { DaemonConfig } from '../config.js'
import type { SpawnRequest } from '../spawner.js'
import { TASK_MARKER_VARIABLE } from '../process-scan.js'
import type { SandboxCapabilities } from './capabilities.js'
import { TaskCgroups } from './cgroups.js'
import { sandboxEnvironment } from './environment.js'
import { secretPaths } from './secret-paths.js'
import { strictSeccompProgram } from './seccomp.js'

/** How to start one task (what the spawner gets), and what to release after it. */
export interface LaunchPlan {
  request: SpawnRequest
  cgroups: TaskCgroups | null
  release: () => Promise<void>
}

export interface PlanRequest {
  task: Task
  /** The program as the spawner gets it: resolved on the task's PATH, or the bare name (see SpawnRequest.file). */
  programPath: string
  outputFile: string
  envAdditions: Record<string, string>
  config: Readonly<DaemonConfig>
  capabilities: SandboxCapabilities
}

/**
 * Every task starts with its limits set (no core dumps, open files, file size) and, where it has
 * them, its cgroups joined, then execs either the command itself (`off`) or bubblewrap around it
 * (`workspace`, `strict`).
 */
export async function planLaunch(request: PlanRequest): Promise<LaunchPlan> {
  const { task, config, capabilities } = request
  const marker = { [TASK_MARKER_VARIABLE]: task.id }
  let cgroups: TaskCgroups | null = null
  const release = async () => {
    // Removal waits (briefly) for the last processes to leave: no group outlives its task's record.
    await cgroups?.remove()
  }
  // Joining a cgroup costs milliseconds of start latency (the kernel synchronizes on every move), so
  // only where it buys something: strict's limits, and `off`, which has no pid namespace to find
  // every process of the task by.
  if (capabilities.cgroups.pids && task.sandbox !== 'workspace') {
    const limits = task.sandbox === 'strict' ? { memoryBytes: task.memoryBytes ?? config.strictMemoryBytes, pidsMax: task.pidsMax ?? config.strictPidsMax } : null
    cgroups = await TaskCgroups.create({ memory: capabilities.cgroups.memory, pids: capabilities.cgroups.pids }, task.id, limits)
  }
  const extraFiles: string[] = []
  if (task.sandbox === 'strict') {
    const programFile = join(task.spool, 'seccomp.bpf')
    await writeFile(programFile, strictSeccompProgram(), { mode: 0o600 })
    extraFiles.push(programFile)
  }
  const common = {
    cwd: task.cwd,
    outputFile: request.outputFile,
    extraFiles,
    cgroupProcs: cgroups?.procsFiles() ?? [],
    limits: { openFiles: config.openFilesLimit, fileSizeBytes: Math.max(config.fileSizeLimitBytes, task.maxOutputBytes + 1) },
  }
  if (task.sandbox === 'off') {
    const env = { ...config.baseEnv, ...request.envAdditions, ...marker }
    return { request: { ...common, file: request.programPath, argv: task.command, env }, cgroups, release }
  }
  const env = sandboxEnvironment(config.baseEnv, request.envAdditions, marker)
  const bwrap = capabilities.bwrap!.path
  const argv = [bwrap, ...bubblewrapArgs(task, config, extraFiles.length > 0 ? 3 : null), '--', ...task.command]
  return { request: { ...common, file: bwrap, argv, env }, cgroups, release }
}

/** The bubblewrap command line of the workspace profile (strict adds a seccomp program). */
export function bubblewrapArgs(task: Task, config: Readonly<DaemonConfig>, seccompFd: number | null): string[] {
  const args = [
    // A user namespace lets --disable-userns forbid new ones; as root it maps root to root.
    '--unshare-user', '--disable-userns',
    '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try',
    ...(task.network ? [] : ['--unshare-net']),
    '--die-with-parent', '--new-session', '--cap-drop', 'ALL',
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc',
    '--perms', '1777', '--size', String(config.tmpSizeBytes), '--tmpfs', '/tmp',
  ]
  for (const path of [task.cwd, ...config.writablePaths, ...task.writablePaths]) args.push('--bind-try', path, path)
  // Masks come after the binds, so a writable path that contains them cannot uncover them. They are
  // read-only: a writable tmpfs would be neither capped (like /tmp) nor seen by the operator.
  args.push('--tmpfs', config.layout.home, '--remount-ro', config.layout.home)
  for (const path of secretPaths(config.baseEnv.HOME)) {
    const kind = pathKind(path)
    if (kind === 'directory') args.push('--tmpfs', path, '--remount-ro', path)
    else if (kind === 'file') args.push('--ro-bind', '/dev/null', path)
  }
  // Service sockets live under /run (docker, D-Bus, containerd): a read-only mount does not stop
  // connect(), an empty /run does. With network access, DNS keeps its resolver folder.
  args.push('--tmpfs', '/run', '--remount-ro', '/run')
  if (task.network) args.push('--ro-bind-try', '/run/systemd/resolve', '/run/systemd/resolve')
  // The environment reaches the task through bubblewrap's own (the plan's env, nothing else):
  // --setenv arguments would show every value in `ps`.
  args.push('--chdir', task.cwd)
  if (seccompFd !== null) args.push('--seccomp', String(seccompFd))
  return args
}

function pathKind(path: string): 'directory' | 'file' | null {
  try {
    return statSync(path).isDirectory() ? 'directory' : 'file'
  } catch {
    return null
  }
}
