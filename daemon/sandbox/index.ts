export { detectSandbox, findOnPath, type SandboxCapabilities } from './capabilities.js'
export { planLaunch, bubblewrapArgs, type LaunchPlan } from './plan.js'
export { seccompSupported } from './seccomp.js'
export { ENVIRONMENT_ALLOWLIST } from './environment.js'
