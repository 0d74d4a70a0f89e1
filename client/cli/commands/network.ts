import type { Command } from 'commander'
import { destinationLabel, formatBytes, type NetworkDecision, type NetworkLogPage } from '../../../protocol/index.js'
import type { TendClient } from '../../client.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { countOption } from '../option-parsers.js'
import { formatTable, printJson, type CliIo } from '../output.js'
import { TASK_REF_HELP } from '../task-target.js'

interface NetworkFlags {
  from?: number
  limit?: number
}

/** Decisions asked per page while the whole log is read. */
const PAGE = 2000

export function registerNetworkCommand(program: Command): void {
  const command = program
    .command('network')
    .summary("print a task's network decisions (its network.log)")
    .argument('<id>', TASK_REF_HELP)
    .option('--from <byte>', 'start at this byte offset of network.log (a --json answer gives the next one)', countOption)
    .option('--limit <n>', 'at most this many decisions (default: all there are now)', countOption)
  command.action(
    action(command, async ({ client, io }, ref: string, flags: NetworkFlags) => {
      const page = await readPages(client, await client.resolve(ref), flags)
      if (io.json) printJson(io, page)
      else printDecisions(io, page)
      return EXIT.ok
    }),
  )
}

/** Every decision there is now from `from` (or `limit` of them), as one page. */
async function readPages(client: TendClient, id: string, flags: NetworkFlags): Promise<NetworkLogPage> {
  let page = await client.networkLog(id, { from: flags.from ?? 0, limit: Math.min(flags.limit ?? PAGE, PAGE) })
  const entries = [...page.entries]
  while (page.entries.length > 0 && (flags.limit === undefined || entries.length < flags.limit)) {
    const wanted = flags.limit === undefined ? PAGE : Math.min(PAGE, flags.limit - entries.length)
    page = await client.networkLog(id, { from: page.next, limit: wanted })
    entries.push(...page.entries)
  }
  return { ...page, entries }
}

function printDecisions(io: CliIo, page: NetworkLogPage): void {
  if (page.entries.length === 0) io.err('tend: no network decisions (a task reaches the network through the egress proxy only with --network allow)')
  else io.out(formatTable(['TIME', 'DESTINATION', 'VIA', 'DECISION', 'SENT', 'RECEIVED'], page.entries.map(row)))
  if (page.omitted > 0) io.err(`tend: ${page.omitted} later decisions are counted (tend show) but not listed: network.log reached its cap`)
  if (page.lost > 0) io.err(`tend: ${page.lost} decisions could not be written to network.log (the disk refused them); tend show counts them`)
}

function row(entry: NetworkDecision): string[] {
  const outcome = entry.decision === 'blocked' ? `blocked: ${entry.reason ?? 'refused'}` : entry.error ? `allowed, failed: ${entry.error}` : 'allowed'
  return [entry.time, destinationLabel(entry), entry.via, outcome, formatBytes(entry.sentBytes), formatBytes(entry.receivedBytes)]
}
