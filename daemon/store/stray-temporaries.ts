import { readdir, unlink } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * The temporary files tend's own writers make beside a task's files before renaming them into
 * place: a record version (record-writer.ts: `task.json.<pid>-<n>.tmp`) and a lease
 * (lease-file.ts: `lease.<pid>.tmp`). One that is still there at recovery belongs to a daemon that
 * died mid-write (the instance lock keeps any other daemon away): it is never renamed, so it goes.
 */
const TEMPORARY_NAME = /^(task\.json|lease)\.[0-9]+(-[0-9]+)?\.tmp$/

/** Whether a name in a task's folder is one of those temporaries. */
export function isStrayTemporary(name: string): boolean {
  return TEMPORARY_NAME.test(name)
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
