export { loadDaemonConfig, DaemonSettingsSchema, type DaemonConfig, type DaemonSettings } from './config.js'
export { startDaemon, type RunningDaemon } from './run-daemon.js'
export { runDaemonForeground, runWorkerForeground } from './main.js'
export { createServer } from './http/server.js'
