// CLI latency: one `tend` command against a running daemon vs `node -e 0`, the floor of any Node
// command. Target: at most 30 ms more than node -e 0. The two run in pairs, one right after the
// other, and the overhead is the median of the pairs' differences: this machine's speed drifts by
// a quarter within a minute, which moved the difference of two separate medians by ±15 ms.
import { rmSync } from 'node:fs'
import { median, nodeStartMs, row, RUNS, runCli, runIfMain, startDaemon, TEND_BIN, tempDir } from './lib.js'

const MARGIN_MS = 30
const CLI_RUNS = Number(process.env.BENCH_CLI_RUNS ?? 21)

const COMMANDS = [
  ['tend -V', ['-V']],
  ['tend ps', ['ps']],
  ['tend run --json -- true', ['run', '--json', '--', 'true']],
]

export async function cliLatency({ runs = Math.max(RUNS, CLI_RUNS), log = console.log, bin = TEND_BIN } = {}) {
  const daemon = await startDaemon('cli-latency', {}, { bin })
  // The tasks' cwd: a folder of their own (a sandboxed task may not run in a tend home).
  const workspace = tempDir('cli-latency-ws')
  const options = { env: { ...process.env, TEND_HOME: daemon.home }, cwd: workspace, bin }
  const rows = []
  try {
    // Untimed: the first call of each command (and of node) pays for cold caches of the disk.
    for (const [, args] of COMMANDS) await runCli(args, options)
    await nodeStartMs()
    for (const [label, args] of COMMANDS) {
      const tend = []
      const node = []
      for (let i = 0; i < runs; i++) {
        node.push(await nodeStartMs())
        tend.push((await runCli(args, options)).ms)
      }
      const overhead = median(tend.map((ms, i) => ms - node[i]))
      log(
        `  ${label}: node -e 0 ${median(node).toFixed(0)} ms, tend ${median(tend).toFixed(0)} ms, tend - node per pair ${overhead.toFixed(1)} ms (medians of ${runs})`,
      )
      const baseline = median(node)
      const value = baseline + overhead
      rows.push(
        row({
          bench: `cli ${label}`,
          value,
          baseline,
          unit: 'ms',
          ratio: value / baseline,
          target: `<= node -e 0 + ${MARGIN_MS} ms`,
          pass: overhead <= MARGIN_MS,
        }),
      )
    }
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  return rows
}

await runIfMain(import.meta.url, cliLatency)
