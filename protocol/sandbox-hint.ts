import type { Task } from './task.js'

/**
 * One line, outside the task's own output, for a sandboxed task that failed: which profile it ran
 * under, what it could see and write, and the flag that would allow more. A command that fails on
 * "Read-only file system" or "No such file or directory" under /tmp then explains itself. Null
 * when the task did not fail or ran unsandboxed.
 */
export function sandboxHint(task: Task): string | null {
  if (task.sandbox === 'off') return null
  if (!(task.state === 'failed' || (task.state === 'exited' && task.exitCode !== 0))) return null
  const writable = task.sandboxWritable ?? [task.cwd, ...task.writablePaths]
  const network = task.network === 'host' ? "with the host's network" : task.network === 'allow' ? 'network: loopback and the allowlist' : 'network: its loopback only'
  const more = ['--writable PATH', ...(task.network === 'host' ? [] : ['--network allow', '--net']), '--sandbox off'].join(', ')
  return (
    `tend: ran in sandbox ${task.sandbox}: it could write only ${writable.length ? writable.join(', ') : 'nothing of the host'} and a private /tmp, /dev/shm and ~/.cache; ` +
    `the rest of the file system was read-only, the host's /tmp not visible, secrets and tend's state hidden; ${network}. To allow more: ${more}`
  )
}
