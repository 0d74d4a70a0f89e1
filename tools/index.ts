export { apply, createTendTools, inject, name, type TendAgent, type TendPluginConfig, type ToolsHost } from './plugin.js'
export * from './harness/index.js'
export * from './core/index.js'
export type { ToolDeps } from './tool-context.js'
