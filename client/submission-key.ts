import { closeSync, openSync, readSync } from 'node:fs'
import { createRequire } from 'node:module'

/**
 * A fresh idempotency key: 128 bits from the kernel's random source, as 32 hex digits. Read from
 * /dev/urandom, not through node:crypto: loading that module (and, from the CLI's CommonJS bundle,
 * the ES module loader a dynamic import needs) cost every `tend run` ~8 ms, a quarter of a
 * command's whole budget over Node's own start. Where /dev/urandom cannot be read, node:crypto.
 */
export function newSubmissionKey(): string {
  const bytes = Buffer.alloc(16)
  let fd: number | undefined
  try {
    fd = openSync('/dev/urandom', 'r')
    if (readSync(fd, bytes, 0, bytes.length, null) === bytes.length) return bytes.toString('hex')
  } catch {
    // No /dev/urandom (an unusual chroot or container): node:crypto below.
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
  const { randomBytes } = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto')
  return randomBytes(16).toString('hex')
}
