import type { NetworkCapabilities, SandboxCapabilities } from '../sandbox/capabilities.js'

/** The network modes sandboxed tasks can have here: `host` wherever a sandbox runs; the others as far as they are built. */
export function networkCapabilities(detected: Pick<SandboxCapabilities, 'missing'>): NetworkCapabilities {
  const missing: NetworkCapabilities['missing'] = { allow: "tend's egress proxy is not available yet" }
  if (detected.missing.workspace) {
    for (const mode of ['loopback', 'host'] as const) missing[mode] = `no sandbox runs here (${detected.missing.workspace})`
  }
  return { modes: (['loopback', 'allow', 'host'] as const).filter((mode) => missing[mode] === undefined), missing }
}
