// The table's filters: owner, state and a search over id, name and command. Owners are learnt
// from the tasks as they appear, so the owner list needs no request of its own.

import * as store from './task-store.js'
import { isActive, isFailure, visible } from '../shared/format.js'
import { setFilter } from './task-table.js'

const owners = new Set()

export function createFilters({ owner, state, search }) {
  const apply = () => {
    const wantedOwner = owner.value
    const wantedState = state.value
    const needle = search.value.trim().toLowerCase()
    setFilter((task, haystack) => {
      if (wantedOwner && task.owner !== wantedOwner) return false
      if (!stateMatches(wantedState, task)) return false
      return !needle || haystack.includes(needle)
    })
  }
  owner.addEventListener('change', apply)
  state.addEventListener('change', apply)
  search.addEventListener('input', apply)
  search.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && search.value) {
      search.value = ''
      apply()
    }
  })
  store.subscribe((kind, task) => {
    if (kind === 'upsert' && !owners.has(task.owner)) addOwner(owner, task.owner)
  })
  apply()
}

function stateMatches(wanted, task) {
  if (wanted === 'active') return isActive(task)
  if (wanted === 'finished') return !isActive(task)
  if (wanted === 'failures') return isFailure(task)
  return !wanted || task.state === wanted
}

/** Shows the failures only, as the header's count of them asks. */
export function showFailures(state) {
  state.value = 'failures'
  state.dispatchEvent(new Event('change'))
}

// Kept sorted so that a long list of agents stays findable; the first option (all owners) stays first.
function addOwner(select, name) {
  owners.add(name)
  const option = document.createElement('option')
  option.value = name
  option.textContent = visible(name)
  let before = null
  for (let i = 1; i < select.options.length; i++) {
    if (select.options[i].value.localeCompare(name) > 0) {
      before = select.options[i]
      break
    }
  }
  select.insertBefore(option, before)
}
