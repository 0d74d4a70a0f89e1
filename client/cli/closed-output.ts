import { EXIT } from './exit-codes.js'

/**
 * A reader that goes away (`tend ps | head -1`) has taken all it wanted: the command ends at once,
 * quietly, with the status SIGPIPE would have given it (Node ignores SIGPIPE, so a write to the
 * closed pipe fails with EPIPE instead, an error no one would otherwise handle). Every command,
 * including the ones still following output or waiting, ends here the same way. Any other error
 * of stdout or stderr is one the process cannot report either: it ends as a failure.
 */
export function endQuietlyWhenOutputCloses(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      process.exit(error.code === 'EPIPE' ? EXIT.outputClosed : EXIT.failed)
    })
  }
}
