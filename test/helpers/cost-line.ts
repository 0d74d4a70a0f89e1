/**
 * What an ended task's notice and results say it cost (tools/core/cost-summary.ts): `exited 0
 * after 41 s · CPU 2 m 3 s · peak 1.2 GiB`. The words of the ending are fixed; the figures are the
 * run's, so they are matched by their shape.
 */

/** A span as formatSpan writes it: `350 ms`, `3.4 s`, `41 s`, `2 m 3 s`, `1 h 5 m`. */
const SPAN = String.raw`(?:\d+ ms|\d(?:\.\d)? s|\d+ s|\d+ m(?: \d+ s)?|\d+ h(?: \d+ m)?)`
/** A size as formatBinaryBytes writes it: `1023 B`, `1.5 KiB`, `200 MiB`. */
const SIZE = String.raw`(?:\d+ B|\d+(?:\.\d)? [KMGTP]iB)`
/** A peak read from rusage is the largest process's and says so; a cgroup's is the tree's. */
const SOURCE = String.raw`(?: \(largest process\))?`

const escaped = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** The cost line of a task whose ending reads `ending` (`exited 0`, `killed by SIGTERM`, `timed out`). */
export const costLinePattern = (ending: string): string => `${escaped(ending)} after ${SPAN} · CPU ${SPAN} · peak ${SIZE}${SOURCE}`

/** Exactly `before`, then the cost line of `ending` in brackets on a line of its own, then `after`. */
export const textWithCost = (before: string, ending: string, after = ''): RegExp =>
  new RegExp(`^${escaped(before)}\\n\\[${costLinePattern(ending)}\\]${escaped(after)}$`)
