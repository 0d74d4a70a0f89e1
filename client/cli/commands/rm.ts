import type { Command } from 'commander'
import { formatBytes, TendError } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson, type CliIo } from '../output.js'
import { addClusterOptions, withCluster, type ClusterFlags } from '../cluster-options.js'

export function registerRmCommand(program: Command): void {
  const command = program.command('rm').summary('forget finished tasks (or corrupt spool entries) and delete their spool').argument('<id...>', 'task ids')
  addClusterOptions(command)
  command.action(
    action(command, async ({ client, io }, ids: string[], flags: ClusterFlags) => {
      const onCluster = await withCluster(flags, client.options.env, (cluster) => removeAll(io, ids, (id) => cluster.remove(id)))
      return onCluster ?? (await removeAll(io, ids, (id) => client.remove(id)))
    }),
  )
}

async function removeAll(io: CliIo, ids: string[], remove: (id: string) => Promise<{ removed: string; freedBytes: number }>): Promise<number> {
  const removed: Array<{ removed: string; freedBytes: number }> = []
  const errors: Array<{ id: string; error: ReturnType<TendError['toWire']> }> = []
  for (const id of ids) {
    try {
      const result = await remove(id)
      removed.push(result)
      if (!io.json) io.out(`removed ${id} (${formatBytes(result.freedBytes)})`)
    } catch (error) {
      if (!(error instanceof TendError) || error.code === 'TEND_ERR_DAEMON_UNAVAILABLE') throw error
      errors.push({ id, error: error.toWire() })
      io.err(`tend: ${error.message}`)
    }
  }
  if (io.json) printJson(io, { removed, errors })
  return errors.length > 0 ? EXIT.failed : EXIT.ok
}
