import { readFile } from 'node:fs/promises'

/** A TCP socket's state in /proc/net/tcp: LISTEN. */
const TCP_LISTEN = '0A'

/**
 * Whether a TCP socket listens on `port` in the network namespace of process `pid` ('self': the
 * daemon's own): the kernel's socket tables of that namespace (/proc/<pid>/net/tcp and tcp6), any
 * address. Nothing a task wrote is read.
 */
export async function listensOn(pid: number | 'self', port: number): Promise<boolean> {
  for (const table of ['tcp', 'tcp6']) {
    let text: string
    try {
      text = await readFile(`/proc/${pid}/net/${table}`, 'utf8')
    } catch {
      // No IPv6 in the namespace, or the process is gone: nothing listens there.
      continue
    }
    if (tableListensOn(text, port)) return true
  }
  return false
}

/** Whether a /proc/net/tcp{,6} table shows a listening socket on `port`. */
export function tableListensOn(table: string, port: number): boolean {
  const wanted = port.toString(16).toUpperCase().padStart(4, '0')
  for (const line of table.split('\n').slice(1)) {
    // sl local_address rem_address st …; local_address is ADDRESS:PORT in hexadecimal.
    const fields = line.trim().split(/\s+/)
    if (fields.length < 4 || fields[3] !== TCP_LISTEN) continue
    if (fields[1]!.slice(fields[1]!.lastIndexOf(':') + 1) === wanted) return true
  }
  return false
}
