import { destinationLabel, evidencedSandboxSummary, failedRun, type BlockedDestination, type NetworkMode, type Task } from '../../client/index.js'
import { NETWORK_REACHES } from './agent-network.js'

/**
 * What a failed task's result tells the agent about its sandbox and network, in the terms of the
 * tools it has: bash's parameters, never a CLI flag it cannot pass.
 */

/** What a wider network adds, in the hint's words. */
const HINT_REACHES: Record<NetworkMode, string> = { loopback: NETWORK_REACHES.loopback, allow: "the operator's allowlist", host: NETWORK_REACHES.host }

/** Networks wider than the one the task had, in the order they widen. */
const WIDER: Record<NetworkMode, readonly NetworkMode[]> = { loopback: ['allow', 'host'], allow: ['host'], host: [] }

/**
 * The sandbox line of a sandboxed task whose failure plausibly came from its sandbox (a refusal
 * the record or the end of its output, `outputTail`, shows: sandboxEvidence), for an agent: what
 * it could do, a wider network among those bash offers, and that the rest (more writable places,
 * no sandbox) is the operator's to give. Null for any other ending.
 */
export function agentSandboxHint(task: Task, offered: readonly NetworkMode[], outputTail = ''): string | null {
  const summary = evidencedSandboxSummary(task, outputTail)
  if (summary === null) return null
  const wider = WIDER[task.network].filter((mode) => offered.includes(mode))
  const network =
    wider.length === 0 ? '' : ` To reach more, bash's network parameter: ${wider.map((mode) => `"${mode}" (${HINT_REACHES[mode]})`).join(' or ')}.`
  return `${summary}.${network} More writable places, or no sandbox, only the operator can give.`
}

/** Most blocked destinations one result names; the record keeps more (tend show lists them). */
export const BLOCKED_SHOWN = 5

/**
 * What tend's egress proxy refused a task that then failed (a non-zero exit, killed, timed out),
 * so the agent learns why its `curl` failed instead of retrying. Null when nothing was refused or
 * the command succeeded. The most recent refusals are named (the record lists them last).
 */
export function blockedText(task: Task): string | null {
  const blocked = task.networkUse?.blockedDestinations ?? []
  if (!failedRun(task) || blocked.length === 0) return null
  const shown = blocked.slice(-BLOCKED_SHOWN).map(blockedLabel).join('; ')
  const more = blocked.length > BLOCKED_SHOWN ? `; and ${blocked.length - BLOCKED_SHOWN} more` : ''
  return `blocked: ${shown}${more}`
}

function blockedLabel(destination: BlockedDestination): string {
  const attempts = destination.count > 1 ? `, ${destination.count} attempts` : ''
  return `${destinationLabel(destination)} (${destination.reason}${attempts})`
}
