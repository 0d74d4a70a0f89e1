// The table's rows, kept in <tbody> groups of GROUP_SIZE rows, each with content-visibility:
// auto (style.css). The browser then skips layout and paint of every group off screen, and its
// visibility bookkeeping is per group, not per row: with thousands of tasks a change costs a
// frame's fraction instead of whole frames. Groups are filled newest first; an emptied group goes.

const GROUP_SIZE = 64
/** The fixed height of a row in style.css: a group off screen is sized from its shown rows. */
const ROW_HEIGHT = 31

export function createRowGroups(table, createdOf) {
  const touched = new Set()

  function newGroup() {
    const group = document.createElement('tbody')
    group.setAttribute('role', 'rowgroup')
    return group
  }

  /** A task newer than every row: on top. */
  function prependNewest(tr) {
    let group = table.tBodies[0]
    if (group.rows.length >= GROUP_SIZE) {
      group = newGroup()
      table.insertBefore(group, table.tBodies[0])
    }
    group.prepend(tr)
    touched.add(group)
  }

  /** Rows sorted newest first, into an empty table. */
  function fill(rows) {
    let group = table.tBodies[0]
    for (let i = 0; i < rows.length; i += GROUP_SIZE) {
      if (i > 0) {
        group = newGroup()
        table.append(group)
      }
      const fragment = document.createDocumentFragment()
      fragment.append(...rows.slice(i, i + GROUP_SIZE))
      group.append(fragment)
      touched.add(group)
    }
  }

  /** An older task (a reload after a gap): its place is found by a scan, and its group may grow past the size. */
  function insertSorted(tr, created) {
    for (const group of table.tBodies) {
      for (const row of group.rows) {
        if (createdOf(row) < created) {
          group.insertBefore(tr, row)
          touched.add(group)
          return
        }
      }
    }
    const last = table.tBodies[table.tBodies.length - 1]
    last.append(tr)
    touched.add(last)
  }

  function insert(tr, created) {
    const top = table.tBodies[0].rows[0]
    if (!top || createdOf(top) <= created) prependNewest(tr)
    else insertSorted(tr, created)
  }

  function remove(tr) {
    const group = tr.parentNode
    tr.remove()
    if (group.rows.length === 0 && table.tBodies.length > 1) {
      group.remove()
      touched.delete(group)
    } else {
      touched.add(group)
    }
  }

  function touch(tr) {
    if (tr.parentNode) touched.add(tr.parentNode)
  }

  /** Sizes the groups that changed (all of them after a filter change). */
  function resize(all = false) {
    for (const group of all ? table.tBodies : touched) {
      let shown = 0
      for (const row of group.rows) if (!row.hidden) shown++
      const size = `${shown * ROW_HEIGHT}px`
      if (group.style.containIntrinsicBlockSize !== size) group.style.containIntrinsicBlockSize = size
    }
    touched.clear()
  }

  const isEmpty = () => table.tBodies[0].rows.length === 0 && table.tBodies.length === 1

  return { insert, fill, remove, touch, resize, isEmpty }
}
