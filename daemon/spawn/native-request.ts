import { descriptorLayout, MAX_SETUP_WAIT_MS, setupWaitOf, spawnRequestProblem, type AttachRequest, type PinnedDir, type SpawnRequest } from './spawner.js'

/**
 * The native spawner's requests, framed for its helper's stdin. The wire protocol is written down
 * once, in daemon/spawner/PROTOCOL.md; the C side parses it in daemon/spawner/request.c.
 */

/**
 * The wire's version and limits, as daemon/spawner/spawner.h defines them (PROTOCOL_VERSION,
 * SPAWN_*, MAX_*). test/daemon/spawn/wire-limits.test.ts holds the two in step.
 */
export const WIRE = Object.freeze({
  version: 2,
  flags: Object.freeze({ stdin: 1, tty: 2, lifeline: 4, setup: 8 }),
  /** One request's payload (MAX_PAYLOAD). */
  maxRequestBytes: 64 * 1024 * 1024,
  /** A setup's longest wait (MAX_SETUP_WAIT_MS). */
  maxSetupWaitMs: MAX_SETUP_WAIT_MS,
  /** A reqid's length (MAX_REQID). */
  maxReqidBytes: 63,
  /** An exit file's (or FIFO's) path (MAX_EXIT_PATH); its last component is at most NAME_MAX. */
  maxExitPathBytes: 4000,
  maxExitNameBytes: 255,
  /** Extra files, in-memory files and pinned folders together (MAX_DESCRIPTORS). */
  maxDescriptors: 1024,
  /** Idmapped views (MAX_VIEWS). */
  maxViews: 1024,
  /** Covered files (MAX_COVERS). */
  maxCovers: 64,
})

/** One framed request of plain string fields: a 4-byte little-endian length, then NUL-terminated strings. */
export function frame(all: string[]): Buffer {
  const text = `${all.join('\0')}\0`
  const size = Buffer.byteLength(text)
  const framed = Buffer.allocUnsafe(4 + size)
  framed.writeUInt32LE(size, 0)
  framed.write(text, 4)
  return framed
}

/** `ping <id>`: answered `pong <id>` at once by a helper whose loop runs. */
export function encodePing(id: string): Buffer {
  return frame(['ping', id])
}

/** An attach to a task's keeper, or what is wrong with the request. */
export function encodeAttach(id: number, request: AttachRequest): Buffer | string {
  const problem = attachProblem(request)
  if (problem) return problem
  // The exit file stays the daemon's to read: the helper is not told of it.
  const { keeper, taskPid } = request
  return frame(['attach', String(id), String(keeper.pid), String(keeper.startTicks), String(taskPid)])
}

/** The header of a spawn: kind, version, flags, reqid, exitFile, stdinFifo, resizeFifo, cols, rows, setupWaitMs. */
function header(id: number, request: SpawnRequest): string[] {
  const { stdinFifo, terminal } = request
  const flags =
    (stdinFifo !== undefined ? WIRE.flags.stdin : 0) |
    (terminal ? WIRE.flags.tty : 0) |
    (request.endsWithDaemon ? WIRE.flags.lifeline : 0) |
    (request.reportsSetup ? WIRE.flags.setup : 0)
  return [
    'spawn',
    String(WIRE.version),
    String(flags),
    String(id),
    request.exitFile ?? '',
    stdinFifo ?? '',
    terminal?.resizeFifo ?? '',
    String(terminal?.cols ?? 0),
    String(terminal?.rows ?? 0),
    String(request.reportsSetup ? setupWaitOf(request) : 0),
  ]
}

/** The request's string fields in wire order (PROTOCOL.md): counts before each list; the blobs follow. */
function fields(id: number, request: SpawnRequest): string[] {
  const env = Object.entries(request.env).map(([key, value]) => `${key}=${value}`)
  const { argv, extraFiles, cgroups, cwdIdentity, user } = request
  const pinnedDirs = request.pinnedDirs ?? []
  const views = request.idmappedViews ?? []
  const hidden = request.hiddenPaths ?? []
  const folder = (pinned: PinnedDir) => [
    pinned.path,
    pinned.dev,
    pinned.ino,
    pinned.owner ? String(pinned.owner.uid) : '',
    pinned.owner ? String(pinned.owner.gid) : '',
  ]
  return [
    ...header(id, request),
    request.file,
    request.cwd,
    request.outputFile,
    String(request.limits.openFiles),
    String(request.limits.fileSizeBytes),
    cwdIdentity?.dev ?? '',
    cwdIdentity?.ino ?? '',
    user ? String(user.uid) : '',
    user ? String(user.gid) : '',
    String(argv.length),
    ...argv,
    String(env.length),
    ...env,
    String(extraFiles.length),
    ...extraFiles,
    String(cgroups.length),
    ...cgroups.flatMap((group) => [group.path, group.dev, group.ino, String(group.uid)]),
    String(pinnedDirs.length),
    ...pinnedDirs.flatMap(folder),
    String(views.length),
    ...views.flatMap(folder),
    String(hidden.length),
    ...hidden,
    String(request.dataFiles?.length ?? 0),
  ]
}

/** The framed spawn (its fields, then each blob as its length and raw bytes, ...), or what is wrong with it. */
export function encodeSpawn(id: number, request: SpawnRequest): Buffer | string {
  if (!request.file) return 'the program path is empty'
  if (request.argv.length === 0) return 'argv is empty (it must hold argv[0])'
  const { openFiles, fileSizeBytes } = request.limits
  if (!Number.isSafeInteger(openFiles) || openFiles < 0) return `invalid open files limit: ${openFiles}`
  if (!Number.isSafeInteger(fileSizeBytes) || fileSizeBytes < 0) return `invalid file size limit: ${fileSizeBytes}`
  for (const key of Object.keys(request.env)) {
    if (key === '' || key.includes('=')) return `environment variable name ${JSON.stringify(key)} is empty or contains "="`
  }
  const problem =
    spawnRequestProblem(request) ?? exitFileProblem(request.exitFile ?? '', true) ?? stdinFifoProblem(request.stdinFifo) ?? terminalProblem(request)
  if (problem) return problem
  // The helper takes a request it cannot parse for a broken daemon and exits: refuse it here.
  const layout = descriptorLayout(request)
  const descriptors = layout.extra.length + layout.data.length + layout.pinned.length
  if (descriptors > WIRE.maxDescriptors) return `too many extra files, in-memory files and pinned folders: ${descriptors} (at most ${WIRE.maxDescriptors})`
  if ((request.idmappedViews?.length ?? 0) > WIRE.maxViews) return `too many idmapped views: ${request.idmappedViews!.length} (at most ${WIRE.maxViews})`
  const all = fields(id, request)
  // NUL ends a field on the wire: a value holding one cannot be carried.
  const carrier = all.find((field) => field.includes('\0'))
  if (carrier !== undefined) return `a field contains a NUL byte: ${JSON.stringify(carrier.slice(0, 80))}`
  const parts: Array<string | Buffer> = [`${all.join('\0')}\0`]
  for (const data of request.dataFiles ?? []) parts.push(`${data.length}\0`, data)
  // After the blobs: the covered files' count, then each one's path and its contents as a blob.
  const covers = request.coveredFiles ?? []
  parts.push(`${covers.length}\0`)
  for (const cover of covers) parts.push(`${cover.path}\0`, `${cover.data.length}\0`, cover.data)
  // Last: the network namespace to join, by path and identity (three empty fields for none).
  const { netns } = request
  parts.push(netns ? `${netns.path}\0${netns.dev}\0${netns.ino}\0` : '\0\0\0')
  const size = parts.reduce((sum, part) => sum + (typeof part === 'string' ? Buffer.byteLength(part) : part.length), 0)
  if (size > WIRE.maxRequestBytes) return `the request is too large (${size} bytes)`
  const framed = Buffer.allocUnsafe(4 + size)
  framed.writeUInt32LE(size, 0)
  let at = 4
  for (const part of parts) at += typeof part === 'string' ? framed.write(part, at) : part.copy(framed, at)
  return framed
}

/** What the wire cannot carry in an exit file's path ('' allowed for none when optional), or null. */
function exitFileProblem(path: unknown, optional: boolean): string | null {
  if (typeof path !== 'string') return `exitFile must be a string, got ${typeof path}`
  if (path === '' && optional) return null
  if (!path.startsWith('/')) return `exitFile must be an absolute path, got ${JSON.stringify(path)}`
  if (path.includes('\0')) return 'exitFile contains a NUL byte'
  const name = path.slice(path.lastIndexOf('/') + 1)
  if (name === '' || name === '.' || name === '..') return `exitFile must name a file, got ${JSON.stringify(path)}`
  if (Buffer.byteLength(path) > WIRE.maxExitPathBytes || Buffer.byteLength(name) > WIRE.maxExitNameBytes)
    return `exitFile is too long: ${JSON.stringify(path.slice(0, 80))}...`
  return null
}

/** What the wire cannot carry in a stdin FIFO's path (undefined: none), or null. */
function stdinFifoProblem(path: string | undefined): string | null {
  if (path === undefined) return null
  const problem = exitFileProblem(path, false)
  return problem && problem.replace(/^exitFile/, 'stdinFifo')
}

/** What the wire cannot carry in a terminal (undefined: none), or null. */
function terminalProblem(request: SpawnRequest): string | null {
  const { terminal } = request
  if (terminal === undefined) return null
  if (request.stdinFifo === undefined) return 'a terminal needs a stdinFifo (its input)'
  for (const key of ['cols', 'rows'] as const) {
    const value = terminal[key]
    if (!Number.isInteger(value) || value < 1 || value > 65535) return `terminal.${key} must be an integer from 1 to 65535, got ${value}`
  }
  const problem = exitFileProblem(terminal.resizeFifo, false)
  return problem && problem.replace(/^exitFile/, 'terminal.resizeFifo')
}

function attachProblem(request: AttachRequest): string | null {
  const { keeper, taskPid } = request
  if (!keeper || !isPid(keeper.pid)) return `keeper.pid must be a positive integer, got ${keeper?.pid}`
  if (!Number.isSafeInteger(keeper.startTicks) || keeper.startTicks < 0) return `keeper.startTicks must be a non-negative integer, got ${keeper.startTicks}`
  if (!isPid(taskPid)) return `taskPid must be a positive integer, got ${taskPid}`
  // '' is allowed (a task spawned without an exit file): its keeper is watched, its exit unknown.
  return exitFileProblem(request.exitFile, true)
}

function isPid(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 && value <= 0x7fffffff
}
