import { readFileSync } from 'node:fs'
import { readdir, unlink } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * The temporary files tend's own writers make beside a task's files before renaming them into
 * place: a record version (record-writer.ts: `task.json.<pid>-<n>.tmp`) and a lease
 * (spawn/keeper-lease.ts: `lease.<pid>.tmp`). One that is still there at recovery belongs to a daemon that
 * died mid-write (the instance lock keeps any other daemon away): it is never renamed, so it goes.
 * A keeper's exit file (keeper.c: `exit.json.<keeper pid>.tmp`) goes unless that keeper still
 * lives (it may be writing it right now).
 */
const DAEMON_TEMPORARY = /^(task\.json|lease)\.[0-9]+(-[0-9]+)?\.tmp$/
const KEEPER_TEMPORARY = /^exit\.json\.([0-9]+)\.tmp$/

/** Whether a name in a task's folder is one of those temporaries, left by a writer that is gone. */
export function isStrayTemporary(name: string): boolean {
  if (DAEMON_TEMPORARY.test(name)) return true
  const keeper = KEEPER_TEMPORARY.exec(name)?.[1]
  return keeper !== undefined && !isLiveKeeper(Number(keeper))
}

/** Whether `pid` is a live keeper (the name it gives itself, daemon/spawner/keeper.c). */
function isLiveKeeper(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'tend-keeper'
  } catch {
    return false
  }
}

/** Removes those temporaries from a task's folder; answers how many went. Never follows a link (unlink removes the link itself). */
export async function removeStrayTemporaries(dir: string): Promise<number> {
  const names = await readdir(dir).catch(() => [] as string[])
  let removed = 0
  for (const name of names.filter(isStrayTemporary)) {
    // A folder by that name (a task's doing) is left: unlink refuses it.
    await unlink(join(dir, name)).then(
      () => (removed += 1),
      () => undefined,
    )
  }
  return removed
}
