// Bench 4: a sandboxed `true` task through tend vs a bare `bwrap … -- true` spawned from Node.
// Sequential, one at a time, alternating; the figure is tend's overhead per task on top of bubblewrap.
// With BENCH_REFERENCE_TREE (another checkout, built), the same task through that tree's daemon too,
// in turn with this one's, for a side-by-side ratio (a change's cost, on a noisy machine).
import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { elapsedMs, median, row, run, runIfMain, startDaemon, tempDir, warmUp } from './lib.js'

const TASKS = Number(process.env.BENCH_SANDBOX_TASKS ?? 100)
// What tend may add to a bare bubblewrap sandbox per task.
const TARGET_MS = 3

/** The bare baseline from the design notes: what any bubblewrap sandbox costs at least. */
const BARE_ARGS = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', '--unshare-net', '--die-with-parent', '--', 'true']

function bwrapPath() {
  return execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim()
}

/**
 * start() until wait() resolves with the ended task; the task is removed afterwards (untimed).
 * `phases` gets where the time went, from the record's timestamps (millisecond resolution).
 */
async function tendOnce(client, cwd, phases) {
  const start = process.hrtime.bigint()
  const task = await client.start({ command: ['true'], cwd, sandbox: 'workspace' })
  const admitted = elapsedMs(start)
  const ended = await client.wait(task.id)
  const ms = elapsedMs(start)
  const resolvedAt = Date.now()
  if (ended.state !== 'exited' || ended.exitCode !== 0 || ended.sandbox !== 'workspace')
    throw new Error(`sandboxed task ended ${ended.state} (exit ${ended.exitCode}, sandbox ${ended.sandbox}): ${ended.reason}`)
  const at = (iso) => Date.parse(iso)
  phases.admit.push(admitted)
  phases.launch.push(at(ended.startedAt) - at(ended.createdAt))
  phases.run.push(at(ended.endedAt) - at(ended.startedAt))
  phases.answer.push(resolvedAt - at(ended.endedAt))
  await client.remove(task.id)
  return ms
}

async function spawnOnce(file, args, label) {
  const start = process.hrtime.bigint()
  const code = await run(file, args)
  const ms = elapsedMs(start)
  if (code !== 0) throw new Error(`${label} exited ${code}`)
  return ms
}

/**
 * The exact command line tend launches for a `true` task (bubblewrap with every workspace option), read from /proc while a `sleep` task runs, so the bench can also time it
 * without tend around it: that splits tend's overhead into "the daemon" and "the profile's options".
 */
async function tendCommandLine(client, cwd) {
  const task = await client.start({ command: ['sleep', '30'], cwd, sandbox: 'workspace' })
  try {
    for (const deadline = Date.now() + 10_000; ; ) {
      const current = await client.get(task.id)
      if (current.pid !== null) {
        const argv = readFileSync(`/proc/${current.pid}/cmdline`, 'utf8').split('\0').slice(0, -1)
        if (argv[0].endsWith('bwrap')) {
          return replayable(
            argv
              .slice(0, argv.lastIndexOf('--') + 1)
              .concat('true')
              .map((arg) => (arg === task.id ? 'benchbenchbe' : arg)),
          )
        }
      }
      if (Date.now() > deadline) throw new Error('the sleep task did not reach bubblewrap within 10 s')
      await delay(10)
    }
  } finally {
    await client.kill(task.id, { graceMs: 0 })
    await client.remove(task.id)
  }
}

/**
 * The same command line without the descriptors only tend's spawner hands bubblewrap: a pinned
 * folder bound by path instead of by descriptor (the same mount), and the environment (`--args`,
 * a few `--setenv`), the seccomp program (`--seccomp`, loaded once per task) and the account files
 * of a task on its own uid (`--ro-bind-data`) left out.
 */
function replayable(argv) {
  const out = []
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--bind-fd') {
      out.push('--bind', argv[i + 2], argv[i + 2])
      i += 2
    } else if (argv[i] === '--args' || argv[i] === '--seccomp') i += 1
    else if (argv[i] === '--ro-bind-data') i += 2
    else out.push(argv[i])
  }
  return out
}

export async function sandboxStart({ tasks = TASKS, log = console.log, referenceTree = process.env.BENCH_REFERENCE_TREE } = {}) {
  const bwrap = bwrapPath()
  const daemon = await startDaemon('sandbox', { TEND_SANDBOX: 'workspace' })
  const reference = referenceTree ? await startDaemon('sandbox-ref', { TEND_SANDBOX: 'workspace' }, { bin: join(referenceTree, 'bin', 'tend.js') }) : null
  const workspace = tempDir('sandbox-ws')
  const tend = []
  const bare = []
  const own = []
  const other = []
  const phases = { admit: [], launch: [], run: [], answer: [] }
  const otherPhases = { admit: [], launch: [], run: [], answer: [] }
  let ownArgv
  try {
    const status = await daemon.client.status()
    if (!status.sandbox.profiles.includes('workspace')) throw new Error(`workspace is not available here: ${status.sandbox.missing.workspace}`)
    await warmUp(daemon.client, workspace, 20)
    if (reference) await warmUp(reference.client, workspace, 20)
    // The native spawner sets the task's limits in the forked child itself, so the command line is bubblewrap's alone.
    ownArgv = await tendCommandLine(daemon.client, workspace)
    for (let i = 0; i < tasks; i++) {
      bare.push(await spawnOnce(bwrap, BARE_ARGS, 'bare bwrap'))
      own.push(await spawnOnce(ownArgv[0], ownArgv.slice(1), "tend's bwrap command line"))
      if (reference) other.push(await tendOnce(reference.client, workspace, otherPhases))
      tend.push(await tendOnce(daemon.client, workspace, phases))
      if ((i + 1) % 25 === 0) {
        log(
          `  sandbox start ${i + 1}/${tasks}: median bare bwrap ${median(bare).toFixed(2)} ms, tend's command line alone ${median(own).toFixed(2)} ms,${reference ? ` reference ${median(other).toFixed(2)} ms,` : ''} tend ${median(tend).toFixed(2)} ms`,
        )
      }
    }
  } finally {
    await daemon.stop()
    await reference?.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  const overhead = median(tend) - median(bare)
  const daemonPart = median(tend) - median(own)
  log(
    `  tend - bare bwrap = ${overhead.toFixed(2)} ms per task: the daemon ${daemonPart.toFixed(2)} ms, the workspace profile's extra options ${(median(own) - median(bare)).toFixed(2)} ms`,
  )
  log(
    `  tend phases (medians): start() answered ${median(phases.admit).toFixed(2)} ms, created->started ${median(phases.launch)} ms, started->ended ${median(phases.run)} ms, ended->wait() resolved ${median(phases.answer)} ms`,
  )
  return [
    row({
      bench: `workspace true task, x${tasks} seq`,
      value: median(tend),
      baseline: median(bare),
      unit: 'ms/task',
      ratio: median(tend) / median(bare),
      target: `< bare bwrap + ${TARGET_MS} ms`,
      pass: overhead < TARGET_MS,
    }),
    row({
      bench: "  vs tend's own bwrap argv",
      value: median(tend),
      baseline: median(own),
      unit: 'ms/task',
      ratio: median(tend) / median(own),
      target: '(info)',
      pass: true,
    }),
    ...(reference
      ? [
          row({
            bench: '  vs the reference tree',
            value: median(tend),
            baseline: median(other),
            unit: 'ms/task',
            ratio: median(tend) / median(other),
            target: '<= 1.05x',
            pass: median(tend) / median(other) <= 1.05,
          }),
        ]
      : []),
  ]
}

await runIfMain(import.meta.url, sandboxStart)
