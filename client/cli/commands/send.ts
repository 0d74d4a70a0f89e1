import type { Command } from 'commander'
import { INPUT_MAX_BYTES, TendError, type TaskInputResult } from '../../../protocol/index.js'
import type { TendClient } from '../../client.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson } from '../output.js'
import { TASK_REF_HELP } from '../task-target.js'

interface SendFlags {
  file?: string
  eof?: boolean
  newline: boolean
}

export function registerSendCommand(program: Command): void {
  const command = program
    .command('send')
    .summary("write to a task's stdin (a task started with tend run --stdin), or type into its terminal (--tty)")
    .usage('[options] ID TEXT | ID - | ID --file F | ID --eof')
    .argument('<id>', TASK_REF_HELP)
    .argument('[text]', 'text to write, followed by a newline; - writes what this command reads on its own stdin, as it is')
    .option('--file <file>', "write this file's bytes, as they are")
    .option('-n, --no-newline', 'do not add a newline after TEXT')
    .option(
      '--eof',
      'then close the stdin: the task reads end-of-file once it has read everything; ' +
        'on a terminal (tend run --tty) it types Ctrl-D instead, and the terminal stays open',
    )
  command.action(
    action(command, async ({ client, io }, ref: string, text: string | undefined, flags: SendFlags) => {
      const data = await inputData(text, flags)
      const id = await client.resolve(ref)
      const result = await sendInChunks(client, id, data, flags.eof ?? false)
      if (io.json) printJson(io, result)
      else io.out(`${result.acceptedBytes} bytes sent to ${id}${result.eof ? eofText(result) : ''}`)
      return EXIT.ok
    }),
  )
}

async function inputData(text: string | undefined, flags: SendFlags): Promise<Buffer> {
  if (text !== undefined && flags.file !== undefined) throw new TendError('TEND_ERR_USAGE', { detail: 'give TEXT, - or --file F, not two of them' })
  if (flags.file !== undefined) {
    // Loaded here: every other command would pay for it at start.
    const { readFile } = await import('node:fs/promises')
    return readFile(flags.file).catch((error: NodeJS.ErrnoException) => {
      throw new TendError('TEND_ERR_USAGE', { detail: `--file: cannot read ${flags.file} (${error.code ?? error.message})` })
    })
  }
  if (text === '-') return readOwnStdin()
  if (text !== undefined) return Buffer.from(flags.newline ? `${text}\n` : text, 'utf8')
  if (!flags.eof) throw new TendError('TEND_ERR_USAGE', { detail: "nothing to send: give TEXT, - (this command's stdin), --file F or --eof" })
  return Buffer.alloc(0)
}

async function readOwnStdin(): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/**
 * One request per MiB (the daemon's limit per input), in order; the end of input goes with the
 * last. A full pipe stops it: the error says what this command had sent before that request.
 */
async function sendInChunks(client: TendClient, id: string, data: Buffer, eof: boolean): Promise<TaskInputResult> {
  let sent = 0
  for (;;) {
    const chunk = data.subarray(sent, sent + INPUT_MAX_BYTES)
    const last = sent + chunk.length >= data.length
    let result: TaskInputResult
    try {
      result = await client.input(id, chunk, { eof: last && eof })
    } catch (error) {
      if (sent > 0 && error instanceof TendError && error.code === 'TEND_ERR_STDIN_FULL') {
        throw new TendError('TEND_ERR_STDIN_FULL', error.params, { message: `${error.message} (${sent} bytes had been sent before, in earlier requests)` })
      }
      throw error
    }
    sent += result.acceptedBytes
    if (last) return { ...result, acceptedBytes: sent }
  }
}

/** What an end of input did: a pipe is closed; a terminal got its EOF character and stays open. */
function eofText(result: TaskInputResult): string {
  return result.task.tty ? '; Ctrl-D typed (end of input)' : '; its stdin is closed'
}
