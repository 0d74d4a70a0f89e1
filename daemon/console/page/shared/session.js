// What this page's session may do: a session opened with a read-scope token (a cluster worker's)
// changes nothing, and the daemon refuses its changes. The page asks once, so that its changes
// show disabled with the reason instead of failing when tried.

export const READ_ONLY_REASON = 'This is a read-only session (its token only reads): open the URL that `tend console` prints to act.'

let readOnly = false

/** Resolves once the scope is known; a page that cannot ask acts as the operator's (the daemon still refuses what it may not do). */
export const sessionKnown = fetch('/console/session.json', { headers: { accept: 'application/json' } })
  .then((response) => (response.ok ? response.json() : null))
  .then((answer) => {
    readOnly = answer?.scope === 'read'
  })
  .catch(() => undefined)

export function isReadOnly() {
  return readOnly
}
