// `npm run bench`: every benchmark in turn, then one table. Exits 1 when a target is missed.
import { cliCapture } from './cli-capture.js'
import { cliLatency } from './cli-latency.js'
import { cliStartRate } from './cli-start-rate.js'
import { clusterBench } from './cluster.js'
import { coldStart } from './cold-start.js'
import { consoleLoad } from './console-load.js'
import { egressProxy } from './egress-proxy.js'
import { daemonMemory } from './daemon-memory.js'
import { daemonRss } from './daemon-rss.js'
import { listLatency } from './list-latency.js'
import { liveUsage } from './live-usage.js'
import { outputCapture } from './output-capture.js'
import { printTable } from './lib.js'
import { requestMemory } from './request-memory.js'
import { roundTrip } from './round-trip.js'
import { sandboxStart } from './sandbox-start.js'
import { spawnRate } from './spawn-rate.js'
import { terminalCapture } from './terminal-capture.js'

const benches = [
  ['output capture', outputCapture],
  ['spawn rate', spawnRate],
  ['daemon memory', daemonMemory],
  ['daemon RSS', daemonRss],
  ['request memory', requestMemory],
  ['sandbox start', sandboxStart],
  ['terminal capture', terminalCapture],
  ['list latency', listLatency],
  ['live usage', liveUsage],
  ['round trip', roundTrip],
  ['cli latency', cliLatency],
  ['cli start rate', cliStartRate],
  ['cli capture', cliCapture],
  ['cold start', coldStart],
  ['cluster', clusterBench],
  ['egress proxy', egressProxy],
  ['console load', consoleLoad],
]

const rows = []
for (const [name, bench] of benches) {
  console.log(`${name}...`)
  rows.push(...(await bench()))
}
console.log('')
printTable(rows)
if (rows.some((r) => !r.pass)) process.exitCode = 1
