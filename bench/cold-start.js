// Cold start: no daemon running; `tend status` starts one and answers. Timed from spawning the CLI
// to its exit, on a fresh TEND_HOME each run; `node -e 0` alongside for scale. Target: 0.4 s.
import { rmSync } from 'node:fs'
import { median, nodeStartMs, row, RUNS, runCli, runIfMain, TEND_BIN, tempDir, tendEnv } from './lib.js'

const TARGET_MS = 400

async function coldOnce(bin) {
  const home = tempDir('cold')
  const env = tendEnv(home)
  try {
    const { ms, stdout } = await runCli(['status', '--json'], { env, bin })
    if (typeof JSON.parse(stdout).pid !== 'number') throw new Error(`tend status answered ${stdout}`)
    return ms
  } finally {
    await runCli(['stop'], { env, bin })
    rmSync(home, { recursive: true, force: true })
  }
}

export async function coldStart({ runs = RUNS, log = console.log, bin = TEND_BIN } = {}) {
  const tend = []
  const node = []
  // Untimed: the first run pays for the disk cache (the bundle, node_modules, the spawner).
  await coldOnce(bin)
  for (let i = 0; i < runs; i++) {
    node.push(await nodeStartMs())
    tend.push(await coldOnce(bin))
    log(`  cold start run ${i + 1}/${runs}: node -e 0 ${node.at(-1).toFixed(0)} ms, tend status ${tend.at(-1).toFixed(0)} ms`)
  }
  const value = median(tend)
  const baseline = median(node)
  return [
    row({ bench: 'cold start (tend status)', value, baseline, unit: 'ms', ratio: value / baseline, target: `<= ${TARGET_MS} ms`, pass: value <= TARGET_MS }),
  ]
}

await runIfMain(import.meta.url, coldStart)
