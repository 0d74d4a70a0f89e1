import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { TendError, withTimeout } from '../../protocol/index.js'
import type { DaemonSettings } from '../config.js'
import { nativeArtifact, nativeBuildCommand } from '../native/artifacts.js'
import { NativeSpawner } from './native-spawner.js'
import type { Spawner } from './spawner.js'

/**
 * The spawner the setting asks for. `auto` takes the native helper when it was built at install
 * and proves it works (one `true` started and reaped: a helper built for another machine would
 * fail here, not on every task); otherwise, and for `node`, child_process.
 */
export async function createSpawner(setting: DaemonSettings['spawner'], log: Logger): Promise<Spawner> {
  if (setting === 'node') return nodeSpawner()
  const binary = NativeSpawner.binaryPath()
  if (!binary) {
    if (setting === 'native')
      throw unavailable(`the helper ${nativeArtifact('tend-spawner')} was not built: build it with \`${nativeBuildCommand()}\` (it needs a C compiler)`)
    log.warn({ build: nativeBuildCommand() }, 'the native spawner helper was not built: tasks start through child_process, which is slower')
    return nodeSpawner()
  }
  const problem = await probe(binary, log)
  if (typeof problem !== 'string') return problem
  if (setting === 'native') throw unavailable(`the helper ${binary} does not work here: ${problem}; build it here with \`${nativeBuildCommand()}\``)
  log.warn({ binary, problem, build: nativeBuildCommand() }, 'the native spawner helper does not work here: tasks start through child_process, which is slower')
  return nodeSpawner()
}

/** Loaded only when used: execa and its dependencies cost a daemon that never uses them ~7 MiB of RSS. */
async function nodeSpawner(): Promise<Spawner> {
  const { NodeSpawner } = await import('./node-spawner.js')
  return new NodeSpawner()
}

/** A started helper that ran `true`, or why it could not. */
async function probe(binary: string, log: Logger): Promise<NativeSpawner | string> {
  let spawner: NativeSpawner | undefined
  try {
    // The helper never holds the event loop open (its handles are unref'd), and nothing else does
    // yet at start: withTimeout's timer keeps the daemon alive through the probe, and bounds it.
    return await withTimeout(run(), PROBE_TIMEOUT_MS, () => new Error(`it did not start and reap true within ${PROBE_TIMEOUT_MS} ms`))
  } catch (error) {
    await spawner?.close()
    return (error as Error).message
  }

  async function run(): Promise<NativeSpawner> {
    spawner = await NativeSpawner.start(binary, log)
    // An output file like a task's (the spawner takes regular files only), in a folder of its own.
    const scratch = await mkdtemp(join(tmpdir(), 'tend-spawner-probe-'))
    try {
      // No exit file: the probe's end is heard by this spawner, nobody else needs it.
      const outcome = await spawner.spawn({
        file: '/bin/true',
        argv: ['true'],
        env: {},
        cwd: '/',
        outputFile: join(scratch, 'output.log'),
        exitFile: '',
        extraFiles: [],
        cgroups: [],
        limits: { openFiles: 64, fileSizeBytes: 1024 * 1024 },
      })
      if (!outcome.started) throw new Error(outcome.message)
      const exit = await outcome.exited
      if (exit.exitCode !== 0) throw new Error(`true ended with ${exit.signal ?? `exit code ${exit.exitCode}`}`)
      // A root daemon's masks include other users' places: hidden by descriptor where the children
      // can (daemon/spawner/hidden.c), else mounted by bubblewrap, by path, as an unprivileged daemon's.
      if (process.getuid?.() === 0) {
        const problem = await spawner.checkHiding(scratch)
        if (problem) log.warn({ problem }, "the native spawner's children cannot hide places by descriptor here: bubblewrap mounts the masks by path")
      }
      return spawner
    } finally {
      await rm(scratch, { recursive: true, force: true })
    }
  }
}

const PROBE_TIMEOUT_MS = 10_000

function unavailable(detail: string): TendError {
  return new TendError('TEND_ERR_CONFIG_INVALID', { detail: `spawner native: ${detail}` })
}
