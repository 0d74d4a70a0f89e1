import type { Logger } from 'pino'
import { TendError } from '../protocol/index.js'
import type { DaemonSettings } from './config.js'
import { NativeSpawner } from './native-spawner.js'
import { NodeSpawner } from './node-spawner.js'
import type { Spawner } from './spawner.js'

/** The spawner the setting asks for; `auto` takes the native helper when it was built at install. */
export async function createSpawner(setting: DaemonSettings['spawner'], log: Logger): Promise<Spawner> {
  if (setting === 'node') return new NodeSpawner()
  const binary = NativeSpawner.binaryPath()
  if (binary) return NativeSpawner.start(binary, log)
  if (setting === 'native') {
    throw new TendError('TEND_ERR_CONFIG_INVALID', { detail: 'spawner native: the helper dist/daemon/spawner/tend-spawner was not built (it needs a C compiler at install: run `npm run build` with cc installed)' })
  }
  log.warn('the native spawner helper was not built (no C compiler at install): tasks start through child_process, which is slower')
  return new NodeSpawner()
}
