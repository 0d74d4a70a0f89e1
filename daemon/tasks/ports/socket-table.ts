import { open, type FileHandle } from 'node:fs/promises'
import { endianness } from 'node:os'
import type { TaskPort } from '../../../protocol/index.js'

/** The tables of a network namespace that list its sockets, as /proc/<pid>/net/ names them. */
export const SOCKET_TABLES = [
  { file: 'tcp', proto: 'tcp', v6: false },
  { file: 'tcp6', proto: 'tcp', v6: true },
  { file: 'udp', proto: 'udp', v6: false },
  { file: 'udp6', proto: 'udp', v6: true },
] as const

/** The `st` column: a TCP socket that listens (TCP_LISTEN). */
const TCP_LISTEN = '0A'
/**
 * A UDP socket bound but not connected (TCP_CLOSE, the kernel's name for it): a server's. A
 * connected one (01) is a client's, its port the kernel's pick for it.
 */
const UDP_UNCONNECTED = '07'

/** A listening (TCP) or bound (UDP) socket of a table, with the inode its descriptors link to. */
export interface TableSocket extends TaskPort {
  inode: string
}

/**
 * The listening TCP sockets, or the bound unconnected UDP ones, of one /proc/net table's text
 * (`sl local_address rem_address st … uid timeout inode`). Addresses are written as the kernel's
 * 32-bit words in host byte order; a line that does not parse is skipped.
 */
export function parseSocketTable(text: string, proto: 'tcp' | 'udp', v6: boolean): TableSocket[] {
  const wanted = proto === 'tcp' ? TCP_LISTEN : UDP_UNCONNECTED
  const found: TableSocket[] = []
  for (const line of text.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/)
    if (fields.length < 10 || fields[3] !== wanted) continue
    const [addressHex, portHex] = fields[1]!.split(':')
    const address = addressHex === undefined ? null : formatAddress(addressHex, v6)
    const port = Number.parseInt(portHex ?? '', 16)
    const inode = fields[9]!
    if (address === null || !Number.isInteger(port) || port <= 0 || !/^[1-9]\d*$/.test(inode)) continue
    found.push({ proto, address, port, inode })
  }
  return found
}

/**
 * The most bytes read of one table (about 8,000 sockets): the kernel writes a table with tens of
 * thousands of sockets slowly, and the sockets past it are not looked at. TCP's listening sockets
 * come first in its tables.
 */
export const MAX_TABLE_BYTES = 1024 * 1024
/** One read of a table: the lines in it are parsed before the next, so no long parse holds the event loop. */
const CHUNK_BYTES = 64 * 1024

/**
 * Every listening or bound socket of the network namespace `/proc/<pid>/net` shows (`self`: the
 * daemon's), read asynchronously, each table up to MAX_TABLE_BYTES; a table that cannot be read adds none.
 */
export async function readSocketTables(pid: number | 'self'): Promise<TableSocket[]> {
  const found: TableSocket[] = []
  for (const table of SOCKET_TABLES) found.push(...(await readSocketTable(`/proc/${pid}/net/${table.file}`, table.proto, table.v6)))
  return found
}

async function readSocketTable(path: string, proto: 'tcp' | 'udp', v6: boolean): Promise<TableSocket[]> {
  const found: TableSocket[] = []
  let file: FileHandle
  try {
    file = await open(path, 'r')
  } catch {
    return found
  }
  try {
    const buffer = Buffer.alloc(CHUNK_BYTES)
    // The header line is text too: parseSocketTable skips the first line it is given.
    let pending = ''
    for (let total = 0; total < MAX_TABLE_BYTES; ) {
      const { bytesRead } = await file.read(buffer, 0, Math.min(CHUNK_BYTES, MAX_TABLE_BYTES - total))
      if (bytesRead === 0) break
      total += bytesRead
      const text = pending + buffer.toString('latin1', 0, bytesRead)
      const end = text.lastIndexOf('\n')
      if (end === -1) {
        pending = text
        continue
      }
      // A line cut by the chunk's end is kept for the next; the first line given is a header or such a rest, hence the '\n' before.
      found.push(...parseSocketTable(`\n${text.slice(0, end)}`, proto, v6))
      pending = text.slice(end + 1)
    }
  } catch {
    // Read as far as it could be.
  } finally {
    await file.close().catch(() => undefined)
  }
  return found
}

const LITTLE_ENDIAN = endianness() === 'LE'

/** An address of a table (8 or 32 hex digits: 32-bit words in host order) as text; null when malformed. */
function formatAddress(hex: string, v6: boolean): string | null {
  if (!/^[0-9A-Fa-f]+$/.test(hex) || hex.length !== (v6 ? 32 : 8)) return null
  const bytes = Buffer.alloc(hex.length / 2)
  for (let word = 0; word < bytes.length / 4; word++) {
    const value = Number.parseInt(hex.slice(word * 8, word * 8 + 8), 16)
    if (LITTLE_ENDIAN) bytes.writeUInt32LE(value, word * 4)
    else bytes.writeUInt32BE(value, word * 4)
  }
  if (!v6) return [...bytes].join('.')
  const groups: string[] = []
  for (let index = 0; index < 16; index += 2) groups.push(bytes.readUInt16BE(index).toString(16))
  // The URL parser writes an IPv6 address in its shortest form (RFC 5952).
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1)
}
