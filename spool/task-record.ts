import { readFile, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { isTaskId, type TaskRecord } from '../protocol/index.js'
import { recordPath, taskDir } from './layout.js'

export async function readTaskRecord(spoolRoot: string, id: string): Promise<TaskRecord> {
  const record = JSON.parse(await readFile(recordPath(spoolRoot, id), 'utf8')) as TaskRecord
  if (record.id !== id) throw new Error(`task record ${id} names another id: ${record.id}`)
  return record
}

/** Ids of the folders in the spool that look like tasks. */
export async function listTaskIds(spoolRoot: string): Promise<string[]> {
  const entries = await readdir(spoolRoot, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return []
    throw error
  })
  return entries.filter((entry) => entry.isDirectory() && isTaskId(entry.name)).map((entry) => entry.name)
}

/** Deletes a task's spool folder; answers how many bytes it held. */
export async function removeTaskDir(spoolRoot: string, id: string): Promise<number> {
  const dir = taskDir(spoolRoot, id)
  const bytes = await directoryBytes(dir)
  await rm(dir, { recursive: true, force: true })
  return bytes
}

async function directoryBytes(dir: string): Promise<number> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
  let total = 0
  for (const entry of entries) {
    if (!entry.isFile()) continue
    const info = await stat(join(dir, entry.name)).catch(() => undefined)
    total += info?.size ?? 0
  }
  return total
}
