import { SETUP_DONE } from '../spawn/spawner.js'

/**
 * Where the spawner waits for bubblewrap's setup (SpawnRequest.reportsSetup), a shell in the
 * sandbox, run by bubblewrap in place of the command once every mount is made, says SETUP_DONE
 * and execs the command with its error output back on the output file. A mask that failed by path
 * (its place went, or changed kind, after the plan) ends bubblewrap before: the task is planned
 * again on what is there then (launch.ts).
 *
 * Nothing the task chose may run before that line, or the task's own failure would pass for
 * bubblewrap's, be planned again and recorded as never run, and a task could hold its own start
 * (and every kill of it) for as long as it liked. So the shell gets none of the task's variables
 * as its own: LD_PRELOAD, LD_AUDIT or GLIBC_TUNABLES act in its loader before it runs a line.
 * Each value rides in a holder, `<base><n>`, and each name is an argument (names are no secret;
 * values never reach a command line, which every user can read); after the line the shell exports
 * each name with its holder's value, unsets the holders and execs the command. The base is chosen
 * so that no name of the task's is one of the shell's own (its holders and counters), in one pass
 * over the names. A variable the shell refuses (dash: an OPTIND that is not a number) is left out,
 * as a shell that ran the task would refuse it too.
 */
export function setupReporting(environment: Readonly<Record<string, string>>): { holders: Record<string, string>; argv: string[] } {
  // A variable no shell could export (only the daemon's own LC_ names could be one) is not passed.
  const entries = Object.entries(environment).filter(([key]) => SHELL_NAME.test(key))
  const taken = new Set<string>()
  for (const [key] of entries) {
    const own = OWN_NAME.exec(key)
    if (own) taken.add(own[1]!)
  }
  let base = BASE
  while (taken.has(base)) base += '_'
  const holders = Object.fromEntries(entries.map(([, value], index) => [`${base}${index}`, value]))
  const [count, at] = [`${base}n`, `${base}i`]
  // Each name is $1 in turn; its value is the holder numbered by the counter. A name the shell
  // refuses is left out (`command` keeps the refusal from ending the shell), and the loop goes on.
  const exportEach = [
    `while [ "$${at}" -lt "$${count}" ]; do eval "command export \\"\\$1=\\\${${base}$${at}}\\"" 2>/dev/null`,
    `unset "${base}$${at}"`,
    'shift',
    `${at}=$((${at} + 1))`,
    'done',
  ].join('; ')
  const script = [`printf '%s\\n' '${SETUP_DONE}' >&2`, 'exec 2>&1', `${count}=$1`, 'shift', `${at}=0`, exportEach, `unset ${count} ${at}`, 'exec "$@"'].join(
    ' && ',
  )
  return { holders, argv: ['/bin/sh', '-c', script, 'tend-task', String(entries.length), ...entries.map(([key]) => key)] }
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const BASE = '_tend'
/** A name the shell's own could be for some base: the base, then a holder's number or a counter. */
const OWN_NAME = /^(_tend_*)(?:\d+|n|i)$/
