// CLI start rate: TASKS x `tend run -- true` from a shell loop, then wait until every task has
// ended; against the same loop of `node -e 0` (the most any Node CLI could reach). Target: 6/s.
import { rmSync } from 'node:fs'
import { elapsedMs, median, row, run, runIfMain, startDaemon, TEND_BIN, tempDir } from './lib.js'

const TASKS = Number(process.env.BENCH_CLI_TASKS ?? 200)
const TARGET_PER_S = 6

/** One shell loop of `command` TASKS times; answers its milliseconds. */
async function shellLoopMs(command, options) {
  const start = process.hrtime.bigint()
  const code = await run('sh', ['-c', `i=0; while [ $i -lt ${TASKS} ]; do ${command} >/dev/null || exit 1; i=$((i+1)); done`], options)
  if (code !== 0) throw new Error(`shell loop of ${command} exited ${code}`)
  return elapsedMs(start)
}

/** The tend side: the loop, then until every task it started has ended (finished tasks are then removed, untimed). */
async function tendOnce(daemon, bin, cwd) {
  const start = process.hrtime.bigint()
  await shellLoopMs(`'${process.execPath}' '${bin}' run -- true`, { env: { ...process.env, TEND_HOME: daemon.home }, cwd })
  const started = await daemon.client.list({ all: true })
  const tasks = await Promise.all(started.map((task) => daemon.client.wait(task.id)))
  const ms = elapsedMs(start)
  const bad = tasks.filter((task) => task.state !== 'exited' || task.exitCode !== 0)
  if (tasks.length !== TASKS || bad.length > 0) throw new Error(`${tasks.length} tasks, ${bad.length} did not exit 0`)
  for (const task of tasks) await daemon.client.remove(task.id)
  return ms
}

export async function cliStartRate({ runs = Number(process.env.BENCH_RUNS ?? 3), log = console.log, bin = TEND_BIN } = {}) {
  const daemon = await startDaemon('cli-rate', {}, { bin })
  const workspace = tempDir('cli-rate-ws')
  const tend = []
  const node = []
  try {
    for (let i = 0; i < runs; i++) {
      node.push(await shellLoopMs(`'${process.execPath}' -e 0`, {}))
      tend.push(await tendOnce(daemon, bin, workspace))
      log(`  cli start rate run ${i + 1}/${runs}: node -e 0 loop ${node.at(-1).toFixed(0)} ms, tend ${tend.at(-1).toFixed(0)} ms for ${TASKS}`)
    }
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  const rate = (ms) => TASKS / (ms / 1000)
  const value = rate(median(tend))
  const baseline = rate(median(node))
  return [
    row({
      bench: `cli start rate (${TASKS} x tend run)`,
      value,
      baseline,
      unit: 'tasks/s',
      ratio: value / baseline,
      target: `>= ${TARGET_PER_S}/s`,
      pass: value >= TARGET_PER_S,
    }),
  ]
}

await runIfMain(import.meta.url, cliStartRate)
