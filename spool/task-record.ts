import { lstatSync, readdirSync, type Stats } from 'node:fs'
import { chmod, lstat, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { currentStoppedBy, DEFAULT_LIFETIME, isTaskId, networkModeOf, type CorruptTask, type RecordedTask, type TaskRecord } from '../protocol/index.js'
import { OUTPUT_FILE, RECORD_FILE, taskDir } from './layout.js'
import { recordProblem, salvageRecordFields } from './record-schema.js'
import { FOLDER_REPLACED, spoolFolders, withTaskFolder } from './task-folders.js'
import { NOT_REGULAR_FILE, readRegularFile } from './untrusted-file.js'

/** A record is a few KiB; one past this is not a record (and is not read into memory). */
const MAX_RECORD_BYTES = 16 * 1024 * 1024

/** A spool entry as the daemon loads it: a valid task, or a corrupt entry that says why not. */
export type SpoolEntry = { task: RecordedTask; corrupt?: undefined } | { corrupt: CorruptTask; task?: undefined }

/**
 * Reads spool/<id>: its task.json, checked against the record's schema (every field of its state,
 * ISO dates, a known state and schemaVersion, the folder's own id). Whatever the folder holds, the
 * answer is an entry, never an exception; only an entry that vanished meanwhile throws (ENOENT).
 */
export async function readSpoolEntry(spoolRoot: string, id: string): Promise<SpoolEntry> {
  // Through the spool's descriptor, and the folder by its own (task-folders.ts): never a link.
  const dir = join(spoolFolders(spoolRoot).root(), id)
  let info: Stats
  try {
    info = await lstat(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw error
    return { corrupt: await corruptEntry(spoolRoot, id, `the spool entry cannot be read: ${summary(error)}`, undefined, undefined) }
  }
  if (!info.isDirectory()) return { corrupt: await corruptEntry(spoolRoot, id, `the spool entry is ${kindOf(info)}, not a folder`, info, undefined) }
  let text: string
  try {
    text = await withTaskFolder(spoolRoot, id, (folder) => readRecordText(folder.file(RECORD_FILE)))
  } catch (error) {
    return { corrupt: await corruptEntry(spoolRoot, id, unreadableReason(error), info, undefined) }
  }
  if (text.trim() === '') return { corrupt: await corruptEntry(spoolRoot, id, 'task.json is empty', info, undefined) }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return { corrupt: await corruptEntry(spoolRoot, id, `task.json is not valid JSON: ${withoutQuote((error as Error).message)}`, info, undefined) }
  }
  const problem = recordProblem(value, id)
  if (problem !== null) return { corrupt: await corruptEntry(spoolRoot, id, problem, info, value) }
  const { schemaVersion: _schemaVersion, ...task } = value as TaskRecord
  return { task: withCurrentFields(task as RecordedTask) }
}

/**
 * A record of an older tend (same schemaVersion) with the fields added since: lifetime `owner`,
 * stoppedBy null (an older name its current one), stdin `null`, tty null, network a mode.
 */
function withCurrentFields(task: RecordedTask): RecordedTask {
  const network = networkModeOf(task.network as RecordedTask['network'] | boolean)
  return {
    ...task,
    lifetime: task.lifetime ?? DEFAULT_LIFETIME,
    stoppedBy: currentStoppedBy(task.stoppedBy ?? null),
    stdin: task.stdin ?? 'null',
    tty: task.tty ?? null,
    network,
  } as RecordedTask
}

/**
 * task.json's text. Only a regular file is read: a symbolic link is not followed (the daemon may
 * run as root) and a FIFO does not block the start (untrusted-file.ts).
 */
async function readRecordText(path: string): Promise<string> {
  // A hard-link backup of the home gives every record a second name: it is still read.
  return (await readRegularFile(path, MAX_RECORD_BYTES, { secondNames: true })).toString('utf8')
}

function unreadableReason(error: unknown): string {
  const { code } = error as NodeJS.ErrnoException
  if (code === FOLDER_REPLACED) return (error as Error).message.replace(`${FOLDER_REPLACED}: `, '')
  if (code === 'ENOENT') return 'task.json is missing'
  if (code === 'ELOOP') return 'task.json is a symbolic link, not a regular file'
  if (code === NOT_REGULAR_FILE) return `task.json is ${(error as { kind?: string }).kind ?? 'not a regular file'}, not a regular file`
  if (code === 'EFBIG') return `task.json is too large: ${(error as { size?: number }).size} bytes, more than a record's ${MAX_RECORD_BYTES}`
  return `task.json cannot be read: ${summary(error)}`
}

/** JSON.parse's message without the quote of the text it names (the record's content stays out of reasons and logs). */
function withoutQuote(message: string): string {
  return message.replace(/, ".*" is not valid JSON$/s, '').replace(/, ".*"\.\.\. is not valid JSON$/s, '')
}

/**
 * A corrupt entry in the shape of a task: what the record still says where it has the right type,
 * else empty values; createdAt falls back to the folder's last change (now, when even that is unknown).
 */
async function corruptEntry(spoolRoot: string, id: string, reason: string, info: Stats | undefined, record: unknown): Promise<CorruptTask> {
  const salvaged = salvageRecordFields(record) as Partial<RecordedTask>
  const output = info?.isDirectory() ? await lstat(join(spoolFolders(spoolRoot).root(), id, OUTPUT_FILE)).catch(() => undefined) : undefined
  return {
    id,
    name: salvaged.name ?? null,
    owner: salvaged.owner ?? 'unknown',
    command: salvaged.command ?? [],
    shell: salvaged.shell ?? false,
    cwd: salvaged.cwd ?? '',
    envKeys: salvaged.envKeys ?? [],
    timeoutMs: salvaged.timeoutMs ?? null,
    maxOutputBytes: salvaged.maxOutputBytes ?? 0,
    outputBytes: output?.isFile() ? output.size : 0,
    lifetime: salvaged.lifetime ?? DEFAULT_LIFETIME,
    stdin: salvaged.stdin ?? 'null',
    tty: salvaged.tty ?? null,
    sandbox: salvaged.sandbox ?? 'off',
    network: networkModeOf((salvaged.network as RecordedTask['network'] | boolean | undefined) ?? 'loopback'),
    writablePaths: salvaged.writablePaths ?? [],
    memoryBytes: salvaged.memoryBytes ?? null,
    pidsMax: salvaged.pidsMax ?? null,
    createdAt: salvaged.createdAt ?? (info ?? { mtime: new Date() }).mtime.toISOString(),
    spool: taskDir(spoolRoot, id),
    state: 'corrupt',
    reason: printable(reason),
    startedAt: null,
    pid: null,
    endedAt: null,
    exitCode: null,
    signal: null,
    stoppedBy: null,
  }
}

/** Control characters escaped: a reason is printed on terminals (`tend ps`). */
function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

function kindOf(info: Stats): string {
  if (info.isFile()) return 'a file'
  if (info.isDirectory()) return 'a folder'
  if (info.isSymbolicLink()) return 'a symbolic link'
  if (info.isFIFO()) return 'a FIFO'
  if (info.isSocket()) return 'a socket'
  return 'a device'
}

/** `EACCES: permission denied` from `EACCES: permission denied, open '/…/task.json'`. */
function summary(error: unknown): string {
  const { code, message } = error as NodeJS.ErrnoException
  const text = message.split(', ')[0] ?? message
  return code && !text.startsWith(code) ? `${code}: ${text}` : text
}

/** Ids of the entries in the spool named like tasks: folders, and anything else in a task's place. */
export async function listTaskIds(spoolRoot: string): Promise<string[]> {
  const entries = await readdir(spoolRoot, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return []
    throw error
  })
  return entries.filter((entry) => isTaskId(entry.name)).map((entry) => entry.name)
}

/**
 * Deletes a task's spool entry (its folder, or whatever is in its place); answers how many bytes of
 * the disk it held. The entry is reached through the spool's descriptor (task-folders.ts) and
 * removed without following a link: a link at its name goes, never what it points to.
 */
export async function removeTaskDir(spoolRoot: string, id: string): Promise<number> {
  const folders = spoolFolders(spoolRoot)
  const removed = await removeSpoolEntry(spoolRoot, id)
  folders.forget(id)
  return removed
}

/** Deletes any entry of the spool by its name (a task's folder, or a stray one); answers the bytes it held. */
export async function removeSpoolEntry(spoolRoot: string, name: string): Promise<number> {
  const dir = join(spoolFolders(spoolRoot).root(), name)
  const bytes = await entryBytes(dir)
  try {
    await rm(dir, { recursive: true, force: true })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EACCES') throw error
    // A folder whose mode was taken away (chmod 000) is still the daemon's: give it back, then remove it.
    await chmod(dir, 0o700)
    await rm(dir, { recursive: true, force: true })
  }
  return bytes
}

/** Entries an entry's walk looks at, at most: a task can make many, and a count needs no more. */
const WALK_MAX_ENTRIES = 100_000
/** Folders deep, at most. */
const WALK_MAX_DEPTH = 64

/**
 * The disk an entry takes: allocated blocks, not logical sizes (a task can make its output sparse),
 * of every file under it, at any depth (a task can make subfolders in its folder). Links are not
 * followed (lstat); the walk is bounded.
 */
export async function entryBytes(path: string): Promise<number> {
  let budget = WALK_MAX_ENTRIES
  const walk = async (at: string, depth: number): Promise<number> => {
    const info = await lstat(at).catch(() => undefined)
    if (!info || budget-- <= 0) return 0
    if (!info.isDirectory()) return info.isFile() ? info.blocks * 512 : 0
    let total = 0
    if (depth >= WALK_MAX_DEPTH) return total
    for (const name of await readdir(at).catch(() => [] as string[])) total += await walk(join(at, name), depth + 1)
    return total
  }
  return walk(path, 0)
}

/** entryBytes without the thread pool (for the quota's pass), the same walk. */
export function entryBytesSync(path: string, skip: ReadonlySet<string> = new Set()): number {
  let budget = WALK_MAX_ENTRIES
  const walk = (at: string, depth: number): number => {
    let info: Stats
    try {
      info = lstatSync(at)
    } catch {
      return 0
    }
    if (budget-- <= 0) return 0
    if (!info.isDirectory()) return info.isFile() ? info.blocks * 512 : 0
    let total = 0
    if (depth >= WALK_MAX_DEPTH) return total
    let names: string[]
    try {
      names = readdirSync(at)
    } catch {
      return total
    }
    for (const name of names) if (depth > 0 || !skip.has(name)) total += walk(join(at, name), depth + 1)
    return total
  }
  return walk(path, 0)
}
