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
