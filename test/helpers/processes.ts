import { readdirSync, readFileSync } from 'node:fs'

/** Pids of live processes whose environment contains `needle` (e.g. `TEND_HOME=/tmp/x`). */
export function processesWithEnv(needle: string): number[] {
  const wanted = Buffer.from(needle)
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid) || pid === process.pid) continue
    try {
      const environ = readFileSync(`/proc/${pid}/environ`)
      if (environ.length > 0 && containsEntry(environ, wanted)) pids.push(pid)
    } catch {
      // gone, or a kernel thread
    }
  }
  return pids
}

function containsEntry(environ: Buffer, entry: Buffer): boolean {
  let index = environ.indexOf(entry)
  while (index !== -1) {
    const startsEntry = index === 0 || environ[index - 1] === 0
    const endsEntry = index + entry.length === environ.length || environ[index + entry.length] === 0
    if (startsEntry && endsEntry) return true
    index = environ.indexOf(entry, index + 1)
  }
  return false
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  // A zombie still answers kill(0); it is dead for our purposes.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

/** A daemon's spawner helper: its child named tend-spawner (keepers are not its children); null when it has none. */
export function spawnerHelperOf(daemonPid: number): number | null {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8')
      if (/^Name:\ttend-spawner$/m.test(status) && new RegExp(`^PPid:\\t${daemonPid}$`, 'm').test(status)) return Number(entry)
    } catch {
      // gone
    }
  }
  return null
}

/** Whether `holder` holds a pidfd of `target` (the kernel's fdinfo says `Pid: <target>`): how an attached helper watches a keeper. */
export function holdsPidfdOf(holder: number | null, target: number): boolean {
  if (holder === null) return false
  try {
    return readdirSync(`/proc/${holder}/fdinfo`).some((fd) => {
      try {
        return new RegExp(`^Pid:\\s+${target}$`, 'm').test(readFileSync(`/proc/${holder}/fdinfo/${fd}`, 'utf8'))
      } catch {
        return false
      }
    })
  } catch {
    return false
  }
}
