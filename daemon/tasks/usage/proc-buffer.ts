import { readSync } from 'node:fs'

/**
 * One growing buffer that small files of /proc and cgroupfs are read into from their start, whole
 * (the daemon's thread reads one file at a time, so a module keeps one and reuses it). Those files
 * fill a read as far as they have data: a short read is the end, and needs no second one.
 */
export class ProcBuffer {
  bytes: Buffer

  constructor(size: number) {
    this.bytes = Buffer.allocUnsafe(size)
  }

  /** Reads the file at `fd` whole into `bytes` (grown for a long one); answers its length. */
  read(fd: number): number {
    let length = 0
    for (;;) {
      const space = this.bytes.length - length
      const read = readSync(fd, this.bytes, length, space, length)
      length += read
      if (read < space) return length
      const larger = Buffer.allocUnsafe(this.bytes.length * 2)
      this.bytes.copy(larger)
      this.bytes = larger
    }
  }

  /** The file at `fd`, whole, as text (latin1: /proc's numbers and names byte for byte). */
  text(fd: number): string {
    return this.bytes.toString('latin1', 0, this.read(fd))
  }
}
