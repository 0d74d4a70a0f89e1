import { NETWORK_MODES, type NetworkMode } from '../../client/index.js'
import { ToolFailure } from './tool-failure.js'

/** The one tool setting the networks depend on (ToolSettings has it). */
export interface HostNetworkSetting {
  allowHostNetwork: boolean
}

/** How an operator lets bash offer the host's network, on each host of the tools. */
export const HOST_NETWORK_ENABLED_BY = 'the plugin option allowHostNetwork: true, or tend mcp --allow-host-network'

/** The networks bash offers: host only where the operator's configuration allows it. */
export function offeredNetworks(settings: HostNetworkSetting): readonly NetworkMode[] {
  return settings.allowHostNetwork ? NETWORK_MODES : NETWORK_MODES.filter((mode) => mode !== 'host')
}

/** Without the host's network: what an agent gets unless its operator allowed host. */
export const DEFAULT_OFFERED_NETWORKS: readonly NetworkMode[] = offeredNetworks({ allowHostNetwork: false })

/** What each network reaches, in the words of bash's parameter and of the hint. */
export const NETWORK_REACHES: Readonly<Record<NetworkMode, string>> = {
  loopback: "your own tasks' servers on 127.0.0.1, nothing else",
  allow: "that plus the operator's allowlist, through tend's proxy",
  host: "the host's whole network",
}

/** bash's network parameter: one sentence on what each offered network reaches. */
export function networkParameterDescription(offered: readonly NetworkMode[]): string {
  const each = offered.map((mode) => `"${mode}": ${NETWORK_REACHES[mode]}`).join('; ')
  return `What a sandboxed command's network reaches (default "loopback"): ${each}`
}

/**
 * Refuses network "host" where the operator did not allow it: the schema then does not offer it,
 * and a call that passes it anyway learns which parameter, and who can change that. Runs before
 * the schema's own check so the agent gets this reason rather than a bare enum list.
 */
export function refuseUnofferedNetwork(network: unknown, settings: HostNetworkSetting): void {
  if (network === 'host' && !settings.allowHostNetwork) {
    throw new ToolFailure(
      `network: "host" is not offered here: the host's whole network is the operator's to allow, with ${HOST_NETWORK_ENABLED_BY}; use "loopback" or "allow"`,
    )
  }
}
