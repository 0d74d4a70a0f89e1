import type { Logger } from 'pino'
import { ADDON_PATH, loadAddon } from '../native/load-addon.js'

interface ServiceNotifyAddon {
  notify(address: string, message: string): void
}

/** The addon's sd_notify (throws with the address and the reason), or why there is none. */
export function loadServiceNotify(path: string = ADDON_PATH): { send: (address: string, message: string) => void } | { reason: string } {
  const { addon, reason } = loadAddon<ServiceNotifyAddon>('serviceNotify', 'service-notify', ['notify'], path)
  return addon ? { send: (address, message) => addon.notify(address, message) } : { reason }
}

/** What the daemon tells the service manager that started it (systemd's Type=notify, docs/service.md). */
export interface ServiceNotifier {
  /** The daemon's socket answers: systemd takes the service as started, and shows `status`. */
  ready: (status: string) => void
  /** The daemon has begun to stop (its tasks are being stopped and recorded). */
  stopping: () => void
}

/** What a daemon without a service manager to tell tells. */
const SILENT: ServiceNotifier = { ready: () => {}, stopping: () => {} }

/**
 * A notifier for `address` (NOTIFY_SOCKET, config.notifySocket), or one that does nothing without
 * one. A notification that cannot be sent is a warning, never a failure: the daemon serves all the
 * same, and a systemd that waits for READY=1 says so itself when its start times out.
 */
export function createServiceNotifier(address: string | null, log: Logger, addonPath: string = ADDON_PATH): ServiceNotifier {
  if (address === null) return SILENT
  const loaded = loadServiceNotify(addonPath)
  if ('reason' in loaded) {
    log.warn(
      { reason: loaded.reason, notifySocket: address },
      'NOTIFY_SOCKET is set but the service-notify addon is missing: the service manager is not notified',
    )
    return SILENT
  }
  const send = (message: string) => {
    try {
      loaded.send(address, message)
    } catch (error) {
      log.warn({ err: error, notifySocket: address }, 'service manager not notified')
    }
  }
  return {
    ready: (status) => send(`READY=1\nSTATUS=${status.replace(/\n/g, ' ')}`),
    stopping: () => send('STOPPING=1'),
  }
}
