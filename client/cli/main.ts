import { Command, CommanderError } from 'commander'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { packageRoot } from '../package-root.js'
import { registerDaemonCommand } from './commands/daemon.js'
import { registerMcpCommand } from './commands/mcp.js'
import { registerGcCommand } from './commands/gc.js'
import { registerKillCommand } from './commands/kill.js'
import { registerLogsCommand } from './commands/logs.js'
import { registerNetworkCommand } from './commands/network.js'
import { registerPsCommand } from './commands/ps.js'
import { registerRmCommand } from './commands/rm.js'
import { registerRunCommand } from './commands/run.js'
import { registerSendCommand } from './commands/send.js'
import { registerSetupCommand } from './commands/setup.js'
import { registerShowCommand } from './commands/show.js'
import { registerStatusCommand } from './commands/status.js'
import { registerResizeCommand } from './commands/resize.js'
import { registerRestartCommand } from './commands/restart.js'
import { registerStopCommand } from './commands/stop.js'
import { registerConsoleCommand } from './commands/console.js'
import { registerServiceCommand } from './commands/service.js'
import { registerWorkerCommand } from '../cluster/cli-worker.js'
import { registerWorkersCommand } from '../cluster/cli-workers.js'
import { registerWaitCommand } from './commands/wait.js'
import { TendError } from '../../protocol/index.js'
import { EXIT } from './exit-codes.js'
import { endQuietlyWhenOutputCloses } from './closed-output.js'

/** Every command, in the order `tend --help` lists them. */
const COMMANDS: Record<string, (program: Command) => void> = {
  daemon: registerDaemonCommand,
  worker: registerWorkerCommand,
  workers: registerWorkersCommand,
  status: registerStatusCommand,
  stop: registerStopCommand,
  restart: registerRestartCommand,
  service: registerServiceCommand,
  run: registerRunCommand,
  ps: registerPsCommand,
  show: registerShowCommand,
  logs: registerLogsCommand,
  network: registerNetworkCommand,
  wait: registerWaitCommand,
  kill: registerKillCommand,
  send: registerSendCommand,
  resize: registerResizeCommand,
  rm: registerRmCommand,
  gc: registerGcCommand,
  console: registerConsoleCommand,
  mcp: registerMcpCommand,
  setup: registerSetupCommand,
}

/**
 * The program, with every command; given the arguments, with only the command they name when
 * they name one (its own help, flags and errors are the same): building all of them is a few
 * milliseconds of each call. Anything else (no command, an unknown one, a top-level flag) gets
 * them all, for the listing and the suggestions.
 */
export function createProgram(argv?: readonly string[]): Command {
  const version = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version
  const program = new Command('tend')
    .description('A sandboxed background-task daemon for AI agents.\nState lives in TEND_HOME (default $XDG_STATE_HOME/tend, else ~/.local/state/tend).')
    .version(version, '-V, --version')
    .option('--json', 'print one JSON document on stdout, nothing else')
    .showHelpAfterError('(tend --help lists commands; tend COMMAND --help its flags)')
    .enablePositionalOptions(false)
    .exitOverride()
  const named = argv?.slice(2).find((arg) => !arg.startsWith('-'))
  const only = named !== undefined && Object.hasOwn(COMMANDS, named) ? named : undefined
  for (const [name, register] of Object.entries(COMMANDS)) if (only === undefined || name === only) register(program)
  for (const command of program.commands) {
    command.exitOverride()
    command.showHelpAfterError(`(tend ${command.name()} --help lists its flags)`)
    // --json is accepted after the command name too: `tend ps --json`; a verb may say what it means for it.
    if (!command.options.some((option) => option.long === '--json')) command.option('--json', 'print one JSON document on stdout, nothing else')
  }
  return program
}

/** Runs the CLI; usage errors (unknown flag, bad value, missing argument) exit 2. */
export async function main(argv: string[]): Promise<void> {
  endQuietlyWhenOutputCloses()
  const program = createProgram(argv)
  try {
    await program.parseAsync(argv)
  } catch (error) {
    if (error instanceof CommanderError) {
      const benign = error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help'
      process.exitCode = benign ? EXIT.ok : EXIT.usage
      return
    }
    process.stderr.write(`tend: ${(error as Error).message}\n`)
    // A bad TEND_REQUEST_TIMEOUT is refused as the client is built, before any command runs.
    process.exitCode = error instanceof TendError && (error.code === 'TEND_ERR_USAGE' || error.code === 'TEND_ERR_CONFIG_INVALID') ? EXIT.usage : EXIT.failed
  }
}
