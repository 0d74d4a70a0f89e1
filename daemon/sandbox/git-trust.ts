/**
 * git refuses a repository whose files another uid owns ("detected dubious ownership"): it guards a
 * user against hooks and settings planted by someone else. A task on an identity of its own owns
 * only what is idmapped to it, so git would refuse a read-only repository elsewhere, or a linked
 * worktree whose main repository was not declared. Inside the sandbox the task is the least
 * trusted party: nothing it could be tricked into running there can do more than the task itself.
 * So such tasks trust every repository, through git's command-line configuration in the
 * environment (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n; git reads safe.directory
 * from it since 2.39), appended after whatever configuration the task's own environment gives.
 */
export function trustingEveryRepository(env: Readonly<Record<string, string>>): Record<string, string> {
  const given = env.GIT_CONFIG_COUNT
  // A count that is not a number is the task's to fix: git refuses it anyway, so nothing is appended to it.
  if (given !== undefined && given !== '' && !/^\d{1,6}$/.test(given)) return { ...env }
  const count = given ? Number(given) : 0
  return { ...env, GIT_CONFIG_COUNT: String(count + 1), [`GIT_CONFIG_KEY_${count}`]: 'safe.directory', [`GIT_CONFIG_VALUE_${count}`]: '*' }
}
