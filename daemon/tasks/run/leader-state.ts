import { readFileSync } from 'node:fs'
import { signalNumber } from '../../../protocol/index.js'
import { processState } from '../../spawn/process-scan.js'

/** Whether a process catches or ignores a signal (/proc/<pid>/status SigCgt, SigIgn); true when unknown. */
export function handlesSignal(pid: number, signal: NodeJS.Signals | number): boolean {
  const number = typeof signal === 'number' ? signal : signalNumber(signal)
  if (!number) return true
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const mask = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(status)?.[1] ?? 'ffffffffffffffff'}`)
    const bit = 1n << BigInt(number - 1)
    return ((mask('SigCgt') | mask('SigIgn')) & bit) !== 0n
  } catch {
    return true
  }
}

/** A live process, not a zombie waiting to be reaped. */
export function isProcessRunning(pid: number): boolean {
  const state = processState(pid)
  return state !== null && state !== 'Z' && state !== 'X'
}
