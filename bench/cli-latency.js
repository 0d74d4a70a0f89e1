// CLI latency: one `tend` command against a running daemon vs `node -e 0`, the floor of any Node
// command. Target: at most 30 ms more than node -e 0.
import { rmSync } from 'node:fs'
import { median, nodeStartMs, row, RUNS, runCli, runIfMain, startDaemon, TEND_BIN, tempDir } from './lib.js'

const MARGIN_MS = 30

const COMMANDS = [
  ['tend -V', ['-V']],
  ['tend ps', ['ps']],
  ['tend run --json -- true', ['run', '--json', '--', 'true']],
]

export async function cliLatency({ runs = RUNS, log = console.log, bin = TEND_BIN } = {}) {
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
      log(`  ${label}: node -e 0 ${median(node).toFixed(0)} ms, tend ${median(tend).toFixed(0)} ms (medians of ${runs})`)
      const value = median(tend)
      const baseline = median(node)
      rows.push(row({ bench: `cli ${label}`, value, baseline, unit: 'ms', ratio: value / baseline, target: `<= node -e 0 + ${MARGIN_MS} ms`, pass: value <= baseline + MARGIN_MS }))
    }
  } finally {
    await daemon.stop()
    rmSync(workspace, { recursive: true, force: true })
  }
  return rows
}

await runIfMain(import.meta.url, cliLatency)
