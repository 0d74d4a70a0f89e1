import { readFile } from 'node:fs/promises'
import { parseSocketTable } from '../ports/socket-table.js'

/**
 * Whether a TCP socket listens on `port` in the network namespace of process `pid` ('self': the
 * daemon's own): the kernel's socket tables of that namespace (/proc/<pid>/net/tcp and tcp6), any
 * address. Nothing a task wrote is read.
 */
export async function listensOn(pid: number | 'self', port: number): Promise<boolean> {
  for (const v6 of [false, true]) {
    let text: string
    try {
      text = await readFile(`/proc/${pid}/net/tcp${v6 ? '6' : ''}`, 'latin1')
    } catch {
      // No IPv6 in the namespace, or the process is gone: nothing listens there.
      continue
    }
    if (parseSocketTable(text, 'tcp', v6).some((socket) => socket.port === port)) return true
  }
  return false
}
