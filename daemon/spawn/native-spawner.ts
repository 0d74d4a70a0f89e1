import { accessSync, constants as fsConstants, mkdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { nativeArtifact } from '../native/artifacts.js'
import { Helper, spawnerFailure, UNKNOWN_EXIT, type RunningChild, type SpawnerLog } from './native-helper.js'
import { encodeAttach, encodeSpawn } from './native-request.js'
import type { AttachOutcome, AttachRequest, SpawnOutcome, SpawnRequest, Spawner } from './spawner.js'

export type { SpawnerLog } from './native-helper.js'

/** How long close() waits for the helper to exit on its own before it is killed. */
const CLOSE_GRACE_MS = 2000

/** How long the helper may take to answer a ping before it is taken for stopped or wedged, and replaced. */
const HELPER_ANSWER_MS = 2000

/** How often a spawn or attach without an answer has the helper pinged (a keeper may take long; the helper never should). */
const REQUEST_CHECK_MS = 3000

/** How many helpers in a row may die before one of them attached to a task's keeper again; a successful attach starts the count anew. */
const MAX_REATTACH = 3

/**
 * The native spawner: a small C helper (daemon/spawner/tend-spawner.c, built at install) that the
 * daemon starts once and sends spawn requests to over a pipe. For every task it forks a keeper from
 * its own tiny address space; the keeper sets the child up (session, limits, cgroups, descriptors,
 * idmapped folders, cwd, user, a session keyring of its own), execs it, becomes its parent, and outlives the helper and the daemon: when the task
 * ends it writes the exit file and tells the helper, which reports the exit. The daemon's thread
 * only writes one request and parses a few short lines per task. The wire protocol:
 * daemon/spawner/PROTOCOL.md (requests: native-request.ts; replies: native-reply.ts; the helper
 * process: native-helper.ts).
 *
 * If the helper dies (the daemon living on), pending spawns fail with stage `spawner`, and the next
 * request starts a new helper, which attaches to the keepers of the running children: their
 * `exited` promises still settle with the real exit (at most MAX_REATTACH times in a row; after that,
 * and when the spawner is closed, they reject: their exit is then unknown to this daemon).
 */
export class NativeSpawner implements Spawner {
  readonly kind = 'native'
  private helper: Helper | null = null
  private hiding = false
  private closed = false
  private nextId = 1

  private constructor(
    private readonly binary: string,
    private readonly log: SpawnerLog | undefined,
  ) {}

  /** The helper (its source build, else the package's prebuilt one: daemon/native/artifacts.ts), or null if it is missing. */
  static binaryPath(): string | null {
    const path = nativeArtifact('tend-spawner')
    try {
      accessSync(path, fsConstants.X_OK)
      return statSync(path).isFile() ? path : null
    } catch {
      return null
    }
  }

  /** Starts the helper; rejects if it cannot be started at all. */
  static async start(binary: string, log?: SpawnerLog): Promise<NativeSpawner> {
    const spawner = new NativeSpawner(binary, log)
    const helper = spawner.launch()
    await helper.ready
    return spawner
  }

  /** Whether spawn() takes hiddenPaths here: false until checkHiding() has proved it. */
  get hidesPaths(): boolean {
    return this.hiding
  }

  /**
   * Where masks go by path (hidesPaths false), the keeper waits for bubblewrap's setup before it
   * reports the start; where they go by descriptor, nothing of the setup can fail that way, and a
   * task starts without that wait.
   */
  get reportsSetup(): boolean {
    return !this.hiding
  }

  /**
   * Proves, with one spawn of `true` that hides a folder made in `scratch` (an empty folder of the
   * caller's), that this helper's children can hide places: they must be root, with the right to
   * make a mount namespace (CAP_SYS_ADMIN, which a container may withhold). Answers why not, or null
   * once hidesPaths is true.
   */
  async checkHiding(scratch: string): Promise<string | null> {
    if (process.getuid?.() !== 0) return "the daemon is not root: its spawner's children cannot mount"
    const place = join(scratch, 'hidden')
    mkdirSync(place)
    const outcome = await this.spawn({
      file: '/bin/true',
      argv: ['true'],
      env: {},
      cwd: '/',
      outputFile: join(scratch, 'output.log'),
      exitFile: '',
      extraFiles: [],
      cgroups: [],
      limits: { openFiles: 64, fileSizeBytes: 1024 * 1024 },
      hiddenPaths: [place],
    })
    if (!outcome.started) return outcome.message
    const exit = await outcome.exited
    if (exit.exitCode !== 0) return `true ended with ${exit.signal ?? `exit code ${exit.exitCode}`}`
    this.hiding = true
    return null
  }

  /** The helper's pid (undefined while none runs): for tests and diagnostics. */
  get helperPid(): number | undefined {
    return this.helper?.child.pid
  }

  spawn(request: SpawnRequest): Promise<SpawnOutcome> {
    if (this.closed) return Promise.resolve(spawnerFailure('the native spawner is closed'))
    const id = this.nextId++
    const encoded = encodeSpawn(id, request)
    if (typeof encoded === 'string') return Promise.resolve({ started: false, stage: 'request', code: 'EINVAL', message: encoded })
    const helper = this.helper ?? this.launch()
    const check = this.checkWhileWaiting()
    return new Promise<SpawnOutcome>((resolve) => {
      helper.pending.set(id, { resolve, request })
      helper.stdin.write(encoded)
    }).finally(check)
  }

  /**
   * Pings the helper; one that does not answer within HELPER_ANSWER_MS (stopped, wedged) is killed
   * and so replaced: what waited on it settles as for a helper that died, and the keepers of its
   * running tasks are attached to again through the next one.
   */
  prod(): void {
    if (!this.closed) this.helper?.ping(HELPER_ANSWER_MS)
  }

  /** While a request waits for its answer, the helper is pinged every REQUEST_CHECK_MS; answers the stop. */
  private checkWhileWaiting(): () => void {
    const timer = setInterval(() => this.prod(), REQUEST_CHECK_MS)
    timer.unref()
    return () => clearInterval(timer)
  }

  attach(request: AttachRequest): Promise<AttachOutcome> {
    return this.sendAttach(request, 0)
  }

  private sendAttach(request: AttachRequest, generation: number): Promise<AttachOutcome> {
    if (this.closed) return Promise.resolve({ attached: false, code: 'ESPAWNER', message: 'the native spawner is closed' })
    const id = this.nextId++
    const encoded = encodeAttach(id, request)
    if (typeof encoded === 'string') return Promise.resolve({ attached: false, code: 'EINVAL', message: encoded })
    const helper = this.helper ?? this.launch()
    const check = this.checkWhileWaiting()
    return new Promise<AttachOutcome>((resolve) => {
      helper.pendingAttaches.set(id, { resolve, request, generation })
      helper.stdin.write(encoded)
    }).finally(check)
  }

  /** A dead helper's running children: each keeper is attached to again, through a new helper. */
  private reattach(orphans: RunningChild[]): void {
    for (const orphan of orphans) {
      const { taskPid, keeper, exitFile, generation } = orphan
      if (!keeper || generation >= MAX_REATTACH) {
        orphan.reject(new Error(`the native spawner died ${generation + 1} times in a row: the exit of pid ${taskPid} is unknown`))
        continue
      }
      void this.sendAttach({ keeper, taskPid, exitFile }, generation + 1).then((outcome) => {
        if (outcome.attached) return outcome.exited.then(orphan.resolve, orphan.reject)
        // That helper died too before it answered: one more in a row, tried again through the next.
        if (outcome.code === 'ESPAWNER' && !this.closed) return this.reattach([{ ...orphan, generation: generation + 1 }])
        if (outcome.code !== 'ESRCH')
          return orphan.reject(new Error(`the native spawner died, and the keeper of pid ${taskPid} could not be watched again: ${outcome.message}`))
        // The keeper is gone already, and its exit file (which the attach read) says nothing.
        return orphan.resolve(UNKNOWN_EXIT)
      })
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const helper = this.helper
    this.helper = null
    if (!helper) return
    helper.closing = true
    helper.stdin.end()
    let timer: NodeJS.Timeout | undefined
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), CLOSE_GRACE_MS)
    })
    const late = await Promise.race([helper.gone.then(() => false), timedOut])
    clearTimeout(timer)
    if (late) {
      this.log?.warn({ pid: helper.child.pid }, `the native spawner did not exit within ${CLOSE_GRACE_MS}ms of its stdin closing; killing it`)
      helper.child.kill('SIGKILL')
      await helper.gone
    }
  }

  private launch(): Helper {
    const helper = new Helper(this.binary, this.log, (gone, orphans) => {
      if (this.helper === gone) this.helper = null
      this.reattach(orphans)
    })
    this.helper = helper
    return helper
  }
}
