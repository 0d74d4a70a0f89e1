import { createInterface } from 'node:readline/promises'
import { TendError } from '../../protocol/index.js'
import { EXIT } from './exit-codes.js'
import { formatTable, printJson, type CliIo } from './output.js'

/** A task `kill --all` would stop: what the question lists of it. */
export interface KillCandidate {
  id: string
  state: string
  /** Its name, else its command. */
  label: string
}

export interface KillAllOptions {
  /** Only this owner's tasks. */
  owner?: string
  /** Kill without asking. */
  yes?: boolean
}

/**
 * Whether `kill --all` may go on: at once with --yes; else it asks on the terminal, listing how
 * many and which. Without a terminal to ask on (a script, a pipe) it refuses, naming --yes: a
 * kill of every task is never the default of a command that was meant for one.
 */
async function confirmKillAll(io: CliIo, candidates: KillCandidate[], options: KillAllOptions): Promise<boolean> {
  if (options.yes) return true
  const whose = options.owner === undefined ? 'of every owner' : `of owner ${options.owner}`
  const what = `${candidates.length} task${candidates.length === 1 ? '' : 's'} ${whose}`
  if (!process.stdin.isTTY)
    throw new TendError('TEND_ERR_USAGE', {
      detail: `kill --all would kill ${what} (${candidates.map((each) => each.id).join(' ')}), and there is no terminal to ask on: give --yes to kill them`,
    })
  io.err(
    formatTable(
      ['ID', 'STATE', 'COMMAND'],
      candidates.map((each) => [each.id, each.state, each.label]),
    ),
  )
  const prompt = createInterface({ input: process.stdin, output: process.stderr })
  try {
    const answer = await prompt.question(`kill ${what}? [y/N] `)
    return /^y(es)?$/i.test(answer.trim())
  } finally {
    prompt.close()
  }
}

/**
 * `kill --all`: asks (confirmKillAll), then kills each candidate with `kill`, at once; prints
 * their records (one line each, or one JSON array). Exit 1 when the question was answered no.
 */
export async function killAll<Killed>(
  io: CliIo,
  candidates: KillCandidate[],
  options: KillAllOptions,
  kill: (id: string) => Promise<Killed>,
  line: (killed: Killed) => string,
): Promise<number> {
  if (candidates.length === 0) {
    if (io.json) printJson(io, [])
    else io.err(`tend: no running or queued tasks${options.owner === undefined ? '' : ` of owner ${options.owner}`}: nothing to kill`)
    return EXIT.ok
  }
  if (!(await confirmKillAll(io, candidates, options))) {
    io.err('tend: nothing killed')
    return EXIT.failed
  }
  const killed = await Promise.all(candidates.map((each) => kill(each.id)))
  if (io.json) printJson(io, killed)
  else for (const each of killed) io.out(line(each))
  return EXIT.ok
}
