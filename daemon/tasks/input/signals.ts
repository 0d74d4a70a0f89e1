import { isNamedSignal, signalNumber, TendError } from '../../../protocol/index.js'

/** `TERM`, `SIGTERM` and `15` all name SIGTERM; anything else is a 400. */
export function normalizeSignal(signal: string | number | undefined): NodeJS.Signals | number | undefined {
  if (signal === undefined) return undefined
  if (typeof signal === 'number') {
    if (isNamedSignal(signal)) return signal
    throw new TendError('TEND_ERR_INVALID_SIGNAL', { signal })
  }
  const name = signal.startsWith('SIG') ? signal : `SIG${signal}`
  if (signalNumber(name) !== undefined) return name as NodeJS.Signals
  throw new TendError('TEND_ERR_INVALID_SIGNAL', { signal })
}
