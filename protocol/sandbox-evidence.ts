import type { Task } from './task.js'

/** How much of a failed task's output is searched for a refusal its sandbox made: the last 64 KiB. */
export const SANDBOX_EVIDENCE_TAIL_BYTES = 64 * 1024

/** Messages that say the sandbox refused, whatever path they name. */
const REFUSED = /Read-only file system|\bEROFS\b|Operation not permitted|\bEPERM\b/
/** Messages of a name or a network a sandboxed network could not reach (its loopback, or the allowlist). */
const UNREACHABLE = new RegExp(
  [
    'Could not resolve host',
    'Temporary failure in name resolution',
    'Name or service not known',
    'getaddrinfo (?:ENOTFOUND|EAI_AGAIN)',
    'Network is unreachable',
    '\\bENETUNREACH\\b',
  ].join('|'),
)
/** Refusals that are the sandbox's when they name a path it kept from the task. */
const DENIED = /Permission denied|\bEACCES\b/
/** The host's /tmp is not the task's (a private one is): a file there is missing inside. */
const MISSING = /No such file or directory|\bENOENT\b/
/** An absolute path in a message: after a space, a quote, a bracket, `:` or `=`. */
const PATH_IN_LINE = /(?:^|[\s'"`‘(:=])(\/[^\s'"`’),:;]*)/g

/** A task that ran and failed: it exited non-zero, was killed or timed out (one that never started is not). */
export function failedRun(task: Task): boolean {
  return (task.state === 'exited' && task.exitCode !== 0) || task.state === 'killed' || task.state === 'timed_out'
}

/** A task whose ending a sandbox could have caused: it ran sandboxed and failed (failedRun). */
export function failedSandboxed(task: Task): boolean {
  return task.sandbox !== 'off' && failedRun(task)
}

/** The folders a sandboxed task could write: its record's, or for a record older than `sandboxWritable`, its cwd and writable paths. */
export function writableOf(task: Task): readonly string[] {
  return task.sandboxWritable ?? [task.cwd, ...task.writablePaths]
}

/**
 * Why a failed sandboxed task's failure plausibly came from its sandbox, or null when nothing says
 * so: a destination the egress proxy refused it (the record), else the last line of `outputTail`
 * (the end of its output) that reads as a refusal: a read-only file system, an operation not
 * permitted, a name or network its network could not reach, a permission denied on a path outside
 * the places it could write, or a missing file under the host's /tmp. A task that never started
 * (state failed) is not the sandbox's: its reason says why.
 */
export function sandboxEvidence(task: Task, outputTail: string): string | null {
  if (!failedSandboxed(task)) return null
  const blocked = task.networkUse?.blockedDestinations?.length ?? 0
  if (blocked > 0) return `the egress proxy refused ${blocked === 1 ? 'a destination' : `${blocked} destinations`}`
  const writable = writableOf(task)
  const lines = outputTail.split(/\r?\n/)
  for (let index = lines.length - 1; index >= 0; index--) {
    const line = lines[index]!
    if (REFUSED.test(line) || (task.network !== 'host' && UNREACHABLE.test(line))) return line.trim()
    const paths = [...line.matchAll(PATH_IN_LINE)].map((match) => match[1]!)
    if (DENIED.test(line) && paths.some((path) => !within(path, [...writable, '/tmp', '/dev/shm']))) return line.trim()
    if (MISSING.test(line) && paths.some((path) => within(path, ['/tmp']) && !within(path, writable))) return line.trim()
  }
  return null
}

function within(path: string, folders: readonly string[]): boolean {
  return folders.some((folder) => path === folder || path.startsWith(folder.endsWith('/') ? folder : `${folder}/`))
}
