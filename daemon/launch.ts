import { closeSync, openSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { execa, type ResultPromise } from 'execa'
import type { Task } from '../protocol/index.js'
import { TASK_MARKER_VARIABLE } from './process-scan.js'

export interface LaunchRequest {
  task: Task
  outputFile: string
  /** Values for the task's envKeys (kept in memory only, never written to the spool). */
  envAdditions: Record<string, string>
  baseEnv: Readonly<Record<string, string>>
}

export type LaunchOutcome =
  | { started: true; pid: number; subprocess: ResultPromise }
  | { started: false; reason: string }

/**
 * Starts a task's process: its own process group, stdin from /dev/null, and stdout and stderr
 * both on one append-mode descriptor of output.log, so the bytes go straight to disk in the order
 * they were written and the daemon never copies them. A start failure is an outcome, not a throw.
 */
export async function launchTask(request: LaunchRequest): Promise<LaunchOutcome> {
  const { task } = request
  const cwdProblem = await checkCwd(task.cwd)
  if (cwdProblem) return { started: false, reason: cwdProblem }
  const [file, ...args] = task.command
  const outputFd = openSync(request.outputFile, 'a', 0o600)
  // execa passes any numeric descriptor through to the child; its types only list 3..9.
  const outputDescriptor = outputFd as 3
  let subprocess: ResultPromise
  try {
    subprocess = execa(file!, args, {
      cwd: task.cwd,
      env: { ...request.baseEnv, ...request.envAdditions, [TASK_MARKER_VARIABLE]: task.id },
      extendEnv: false,
      stdin: 'ignore',
      stdout: outputDescriptor,
      stderr: outputDescriptor,
      detached: true,
      reject: false,
      cleanup: false,
      stripFinalNewline: false,
    })
  } finally {
    closeSync(outputFd)
  }
  const pid = subprocess.pid
  if (pid === undefined) {
    const result = await subprocess
    return { started: false, reason: describeStartFailure(file!, result) }
  }
  return { started: true, pid, subprocess }
}

async function checkCwd(cwd: string): Promise<string | null> {
  try {
    const info = await stat(cwd)
    return info.isDirectory() ? null : `cwd is not a directory: ${cwd}`
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === 'ENOENT' ? `cwd does not exist: ${cwd}` : `cwd is not usable: ${cwd} (${code})`
  }
}

function describeStartFailure(file: string, result: { code?: string; originalMessage?: string; shortMessage?: string }): string {
  switch (result.code) {
    case 'ENOENT':
      return `no such program: ${file}`
    case 'EACCES':
      return `program is not executable: ${file}`
    default:
      return `could not start ${file}: ${result.originalMessage ?? result.shortMessage ?? result.code ?? 'unknown error'}`
  }
}
