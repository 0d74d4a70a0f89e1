import { closeSync, constants as fsConstants, openSync } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import { execa, type ResultPromise } from 'execa'
import type { Task } from '../protocol/index.js'
import type { DaemonConfig } from './config.js'
import { findOnPath, planLaunch, type LaunchPlan, type SandboxCapabilities } from './sandbox/index.js'

export interface LaunchRequest {
  task: Task
  outputFile: string
  /** Values for the task's envKeys (kept in memory only, never written to the spool). */
  envAdditions: Record<string, string>
  config: Readonly<DaemonConfig>
  capabilities: SandboxCapabilities
}

export type LaunchOutcome =
  | { started: true; pid: number; subprocess: ResultPromise; plan: LaunchPlan }
  | { started: false; reason: string }

/**
 * Starts a task's process: its own process group, stdin from /dev/null, and stdout and stderr
 * both on one append-mode descriptor of output.log, so the bytes go straight to disk in the order
 * they were written and the daemon never copies them. A start failure is an outcome, not a throw.
 */
export async function launchTask(request: LaunchRequest): Promise<LaunchOutcome> {
  const { task } = request
  const problem = (await checkCwd(task.cwd)) ?? (await checkProgram(task, { ...request.config.baseEnv, ...request.envAdditions }))
  if (problem) return { started: false, reason: problem }
  const plan = await planLaunch({ task, envAdditions: request.envAdditions, config: request.config, capabilities: request.capabilities })
  const outputFd = openSync(request.outputFile, 'a', 0o600)
  // execa passes any numeric descriptor through to the child; its types only list 3..9.
  const outputDescriptor = outputFd as 3
  let subprocess: ResultPromise
  try {
    subprocess = execa(plan.file, plan.args, {
      cwd: task.cwd,
      env: plan.env,
      extendEnv: false,
      stdio: ['ignore', outputDescriptor, outputDescriptor, ...(plan.extraFds as 3[])],
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
    await plan.release()
    return { started: false, reason: `could not start ${plan.file}: ${result.originalMessage ?? result.shortMessage ?? result.code ?? 'unknown error'}` }
  }
  return { started: true, pid, subprocess, plan }
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

/** The program must exist and be executable: it runs behind a shell prelude, which would only say 127. */
async function checkProgram(task: Task, env: Record<string, string>): Promise<string | null> {
  const program = task.command[0]!
  if (program.includes('/')) {
    const path = program.startsWith('/') ? program : `${task.cwd}/${program}`
    try {
      await access(path, fsConstants.X_OK)
      return (await stat(path)).isDirectory() ? `program is a directory: ${program}` : null
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ENOENT' ? `no such program: ${program}` : `program is not executable: ${program}`
    }
  }
  return findOnPath(program, env.PATH) ? null : `no such program: ${program}`
}
