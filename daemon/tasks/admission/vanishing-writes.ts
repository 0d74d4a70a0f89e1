import { cutText, TASK_WARNINGS_MAX, TASK_WARNING_CHARS_MAX, visibleText, type SandboxProfile } from '../../../protocol/index.js'
import { isWithin } from '../../sandbox/index.js'

/** What a start's warnings are decided on: the request as the submitter gave it, and what admission made of it. */
export interface SubmittedWrites {
  sandbox: SandboxProfile
  /** The command's text: its argv, or its shell line. The submitter's words, not the task's output. */
  command: readonly string[]
  /** The writable paths the request asked for that do not exist, as given (TaskPaths.skipped). */
  skipped: readonly string[]
  /** Every folder the task may write, real paths (TaskPaths.writable). */
  writable: readonly string[]
}

/** A path under /tmp/ as a word of a command: at its start, or after a space, a quote, `=`, `>`, `<`, `:` or `(`. */
const TMP_PATH = /(?:^|[\s'"=<>:(`])(\/tmp\/[^\s'"`;|&)<>]*)/g

/**
 * Warnings for writes a sandboxed task would lose without a word, kept in its record (`warnings`)
 * and answered with its start: a writable path it asked for that does not exist (it is skipped:
 * the task cannot write there), and a path under /tmp named by its command while the task has a
 * private /tmp (what it writes there is gone when it ends) unless that path is inside a folder
 * it may write (a cwd under /tmp is the host's). At most TASK_WARNINGS_MAX, each cut to
 * TASK_WARNING_CHARS_MAX characters. Empty without a sandbox: `off` writes the host's /tmp, and
 * refuses writable paths.
 */
export function vanishingWriteWarnings(submitted: SubmittedWrites): string[] {
  if (submitted.sandbox === 'off') return []
  const warnings = submitted.skipped.map((path) => `writable path ${path} does not exist: it was skipped, so the task cannot write there (make it first)`)
  const named = new Set(submitted.command.flatMap((word) => [...word.matchAll(TMP_PATH)].map((match) => match[1]!)))
  const lost = [...named].filter((path) => !submitted.writable.some((folder) => isWithin(path, folder)))
  if (lost.length > 0) {
    warnings.push(
      `the command names ${lost.join(', ')}: writes under /tmp stay in the task's private /tmp and are gone when it ends: ` +
        'write under its cwd instead, or have that folder made writable for it',
    )
  }
  // visibleText: the paths are the submitter's, and every reader of the record (a terminal, an agent) gets them as text.
  return warnings.slice(0, TASK_WARNINGS_MAX).map((warning) => cutText(visibleText(warning), TASK_WARNING_CHARS_MAX, '…'))
}
