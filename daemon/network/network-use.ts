import { BLOCKED_DESTINATIONS_KEPT, type NetworkDecision, type NetworkUse } from '../../protocol/index.js'

/** A task's use before its first decision. */
export function emptyNetworkUse(): NetworkUse {
  return { allowed: 0, blocked: 0, sentBytes: 0, receivedBytes: 0, blockedDestinations: [] }
}

/** A copy of a record's use, to count on from (the record is never changed in place). */
export function copyNetworkUse(use: NetworkUse | undefined): NetworkUse {
  if (!use) return emptyNetworkUse()
  return { ...use, blockedDestinations: use.blockedDestinations.map((entry) => ({ ...entry })) }
}

/**
 * Counts one decision into `use` (in place): allowed or blocked, its bytes, and a refused
 * destination moved to the end of the list (most recent last), the oldest dropped past
 * BLOCKED_DESTINATIONS_KEPT. A destination is its name, port and reason: the same name refused
 * for another reason is another line an operator must see.
 */
export function countDecision(use: NetworkUse, decision: NetworkDecision): void {
  use.sentBytes += decision.sentBytes
  use.receivedBytes += decision.receivedBytes
  if (decision.decision === 'allowed') {
    use.allowed++
    return
  }
  use.blocked++
  const reason = decision.reason ?? 'refused'
  const list = use.blockedDestinations
  const index = list.findIndex((entry) => entry.name === decision.name && entry.port === decision.port && entry.reason === reason)
  const entry = index === -1 ? { name: decision.name, port: decision.port, reason, count: 0 } : list.splice(index, 1)[0]!
  entry.count++
  list.push(entry)
  if (list.length > BLOCKED_DESTINATIONS_KEPT) list.splice(0, list.length - BLOCKED_DESTINATIONS_KEPT)
}
