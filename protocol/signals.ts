import { constants } from 'node:os'

/** This system's signals by name (SIGTERM → 15), as node knows them. */
const NUMBERS = constants.signals as Readonly<Record<string, number>>

/** Each signal number's first name in that table (SIGIOT and SIGABRT share 6: SIGABRT comes first). */
const NAMES = new Map<number, NodeJS.Signals>()
for (const [name, value] of Object.entries(NUMBERS)) if (!NAMES.has(value)) NAMES.set(value, name as NodeJS.Signals)

/** A signal's number by its name (SIGTERM → 15); undefined for a name this system does not have. */
export function signalNumber(name: string): number | undefined {
  return Object.hasOwn(NUMBERS, name) ? NUMBERS[name] : undefined
}

/** Whether this system has a signal of that number with a name (real-time signals have none). */
export function isNamedSignal(value: number): boolean {
  return NAMES.has(value)
}

/** A signal's name (SIGTERM); real-time signals, which have none in os.constants, read SIG<n>. */
export function signalName(value: number): NodeJS.Signals {
  return NAMES.get(value) ?? (`SIG${value}` as NodeJS.Signals)
}

/** A signal as a task's record shows it: its name when it has one, else its number as text. */
export function signalLabel(signal: NodeJS.Signals | number): string {
  if (typeof signal === 'string') return signal
  return NAMES.get(signal) ?? String(signal)
}
