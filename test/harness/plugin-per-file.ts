import { afterAll, beforeAll } from 'vitest'
import type { Context } from 'cordis'
import * as tendPlugin from '../../tools/index.js'
import { daemonPerFile, type DaemonPerFile } from '../helpers/daemon-per-file.js'
import type { TestDaemonOptions } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { createHost } from './host.js'

export interface PluginPerFile extends DaemonPerFile {
  /** The stand-in harness with the tend plugin loaded; set once the file's beforeAll has run. */
  host: Context
}

/**
 * A real daemon (daemonPerFile, started with `daemon`) and a host with the tend plugin loaded
 * against it, with these settings, for a whole test file; the plugin is disposed after the file,
 * before the daemon stops.
 */
export function pluginPerFile(label: string, settings: Record<string, unknown> = {}, daemon: TestDaemonOptions = {}): PluginPerFile {
  const shared = daemonPerFile(label, daemon) as PluginPerFile
  let fork: { dispose: () => unknown } | undefined
  beforeAll(async () => {
    shared.host = createHost()
    fork = shared.host.plugin(tendPlugin, { home: shared.daemon.home, ...settings })
    await waitFor('the tend tools to be registered', () => shared.host.tools.tools.size === 5)
  })
  afterAll(() => {
    fork?.dispose()
  })
  return shared
}
