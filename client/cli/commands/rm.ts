import type { Command } from 'commander'
import { formatBytes, TendError } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { inFlagTerms } from '../flag-names.js'
import { EXIT, exitCodeForError } from '../exit-codes.js'
import { printJson, type CliIo } from '../output.js'
import { addTargetOptions } from '../resolve-target.js'
import { TASK_REF_HELP } from '../task-target.js'

export function registerRmCommand(program: Command): void {
  const command = program
    .command('rm')
    .summary('forget finished tasks (or corrupt spool entries) and delete their spool')
    .argument('<id...>', `tasks: each a ${TASK_REF_HELP}`)
  addTargetOptions(command)
  command.action(
    action(command, async ({ io, tasks }, ids: string[]) => {
      const target = await tasks()
      return removeAll(io, ids, (id) => target.remove(id))
    }),
  )
}

async function removeAll(io: CliIo, ids: string[], remove: (id: string) => Promise<{ removed: string; freedBytes: number }>): Promise<number> {
  const removed: Array<{ removed: string; freedBytes: number }> = []
  const errors: Array<{ id: string; error: ReturnType<TendError['toWire']> }> = []
  // The gravest refusal decides the exit code: a malformed reference is a usage error (2), an unreachable target 3.
  let exitCode: number = EXIT.ok
  for (const id of ids) {
    try {
      const result = await remove(id)
      removed.push(result)
      if (!io.json) io.out(`removed ${result.removed} (${formatBytes(result.freedBytes)})`)
    } catch (error) {
      if (!(error instanceof TendError) || error.code === 'TEND_ERR_DAEMON_UNAVAILABLE') throw error
      errors.push({ id, error: error.toWire() })
      io.err(`tend: ${inFlagTerms(error).message}`)
      exitCode = Math.max(exitCode, exitCodeForError(error))
    }
  }
  if (io.json) printJson(io, { removed, errors })
  return exitCode
}
