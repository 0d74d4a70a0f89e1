import type { Command } from 'commander'
import { TERMINAL_SIZE_MAX } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { terminalCellsOption } from '../option-parsers.js'
import { printJson } from '../output.js'
import { TASK_REF_HELP } from '../task-target.js'

export function registerResizeCommand(program: Command): void {
  const command = program
    .command('resize')
    .summary('resize the terminal of a task started with tend run --tty (its programs get SIGWINCH)')
    .usage('[options] ID COLS ROWS')
    .argument('<id>', TASK_REF_HELP)
    .argument('<cols>', `columns, 1 to ${TERMINAL_SIZE_MAX}`, terminalCellsOption)
    .argument('<rows>', `rows, 1 to ${TERMINAL_SIZE_MAX}`, terminalCellsOption)
  command.action(
    action(command, async ({ client, io }, ref: string, cols: number, rows: number) => {
      const task = await client.resize(await client.resolve(ref), { cols, rows })
      if (io.json) printJson(io, task)
      else io.out(`${task.id}: terminal ${task.tty ? `${task.tty.cols}x${task.tty.rows}` : `${cols}x${rows}`}`)
      return EXIT.ok
    }),
  )
}
