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
 * Each variable rides in a holder, `<prefix><n>=K=V`, a name no variable of the task starts with;
 * the shell exports them in one command (every word is expanded before any is assigned, so no
 * variable can change another's holder), unsets the holders and execs the command.
 */
export function setupReporting(environment: Readonly<Record<string, string>>): { holders: Record<string, string>; argv: string[] } {
  // A variable the shell could not export (only the daemon's own LC_ names could be one) is not passed.
  const entries = Object.entries(environment).filter(([key]) => SHELL_NAME.test(key))
  let prefix = HOLDER_PREFIX
  while (entries.some(([key]) => key.startsWith(prefix))) prefix += '_'
  const names = entries.map((_, index) => `${prefix}${index}`)
  const holders = Object.fromEntries(entries.map(([key, value], index) => [names[index]!, `${key}=${value}`]))
  const steps = [`printf '%s\\n' '${SETUP_DONE}' >&2`, 'exec 2>&1']
  if (names.length > 0) steps.push(`export ${names.map((name) => `"$${name}"`).join(' ')}`, `unset ${names.join(' ')}`)
  steps.push('exec "$@"')
  return { holders, argv: ['/bin/sh', '-c', steps.join(' && '), 'tend-task'] }
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const HOLDER_PREFIX = 'TEND_SETUP_VAR_'
