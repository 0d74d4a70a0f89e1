export { detectSandbox, findOnPath, type SandboxCapabilities } from './capabilities.js'
export { planLaunch, type LaunchPlan } from './plan.js'
export { seccompSupported } from './seccomp.js'
export { validateWritablePaths } from './writable-paths.js'
