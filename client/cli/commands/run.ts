import { Command, Option } from 'commander'
import {
  type Labels,
  NETWORK_MODES,
  type NetworkMode,
  OWNER_PATTERN,
  SANDBOX_PROFILES,
  TendError,
  TERMINAL_SIZE_MAX,
  type SandboxProfile,
  type TerminalSize,
} from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT, exitCodeForError } from '../exit-codes.js'
import { countOption, durationOption, envOption, portOption, sizeOption, tcpPortOption, terminalCellsOption } from '../option-parsers.js'
import { readyOf, type ReadyFlags } from '../readiness.js'
import { addTargetOptions } from '../resolve-target.js'

interface RunFlags extends ReadyFlags {
  c?: string
  name?: string
  cwd?: string
  env?: Record<string, string>
  timeout?: number
  maxOutput?: number
  owner?: string
  wait?: boolean
  sandbox?: SandboxProfile
  net?: boolean
  network?: NetworkMode
  allowNet?: string[]
  writable?: string[]
  memory?: number
  pids?: number
  persistent?: boolean
  stdin?: boolean
  tty?: boolean
  cols?: number
  rows?: number
  port?: number | 'auto'
  require?: Labels
  retries?: number
  after?: string[]
  afterAny?: boolean
}

export function registerRunCommand(program: Command): void {
  const command = program
    .command('run')
    .summary('start a task from an argv (after --) or a shell line (-c)')
    .usage("[options] -- CMD [ARG...] | [options] -c 'SHELL LINE'")
    .argument('[command...]', 'program and arguments, after --')
    .option('-c <line>', 'run a shell line with sh -c')
    .option('--name <name>', 'a label for the task')
    .option('--cwd <dir>', 'working directory (default: the current one)')
    .option('--env <KEY=VALUE>', 'add an environment variable (repeatable)', envOption)
    .option('--timeout <duration>', 'stop the task after this long (500ms, 30s, 5m, 2h)', durationOption)
    .option('--max-output <size>', 'output cap (64k, 10M, 1G; default from the daemon: 1G)', sizeOption)
    .option('--owner <owner>', 'who the task is for (default: operator)')
    .addOption(new Option('--wait', 'stream its output, then exit with its status'))
    .addOption(new Option('--sandbox <profile>', 'confinement (default from the daemon: workspace)').choices([...SANDBOX_PROFILES]))
    .addOption(
      new Option(
        '--network <mode>',
        "what a sandboxed task's network reaches: loopback (default: its owner's private loopback), " +
          "allow (that, plus networkAllow through the egress proxy), host (the host's network)",
      ).choices([...NETWORK_MODES]),
    )
    .option('--net', 'the same as --network host')
    .option(
      '--allow-net <pattern>',
      'with network allow (implied): another destination this task may reach, e.g. registry.example, *.example.org, git.example:22 (repeatable)',
      (pattern: string, previous: string[] = []) => [...previous, pattern],
    )
    .option('--writable <path>', 'another path the task may write (repeatable)', (path: string, previous: string[] = []) => [...previous, path])
    .option('--memory <size>', 'memory limit (workspace or strict; strict has a default)', sizeOption)
    .option('--pids <count>', 'process-count limit (workspace or strict; each has a default)', countOption)
    .option('--persistent', "lifetime persistent: the task outlives its owner's agent session (default: owner)")
    .option('--stdin', 'stdin is a pipe that tend send writes to (default: /dev/null)')
    .option('--tty', 'run on a pseudo-terminal (80x24 unless --cols/--rows): tend send types into it, tend resize resizes it')
    .option('--cols <n>', `terminal columns, 1 to ${TERMINAL_SIZE_MAX} (needs --tty; default 80)`, terminalCellsOption)
    .option('--rows <n>', `terminal rows, 1 to ${TERMINAL_SIZE_MAX} (needs --tty; default 24)`, terminalCellsOption)
    .option(
      '--port <port>',
      'give the task a port as $PORT, recorded as its port: auto picks a free one no other task holds, until it ends; ' +
        'a number is given as it is (a warning says when another task of its owner listens on it)',
      portOption,
    )
    .option(
      '--after <tasks>',
      'stay queued until these tasks (ids, names or id prefixes, comma-separated; repeatable) have ended, ' +
        'then start if all exited 0, else end failed (not on a cluster)',
      (refs: string, previous: string[] = []) => [...previous, ...refs.split(',').filter((ref) => ref !== '')],
    )
    .option('--after-any', 'with --after: start once they have ended, whatever they ended as')
    .option('--ready-pattern <regex>', 'ready once a line of its output matches (RE2 syntax); the line is kept')
    .option('--ready-port <port>', 'ready once something in its network listens on this TCP port', tcpPortOption)
    .option('--ready-http <url>', 'ready once this URL answers 2xx or 3xx, fetched from inside its network')
    .option('--ready-timeout <duration>', 'how long it may take to be ready, from its start (default 60s)', durationOption)
    .addOption(
      new Option('--wait-ready', 'print its id, then return once it is ready (exit 0); not ready in time: exit 76; ended first: exit 77').conflicts('wait'),
    )
  addTargetOptions(command, { run: true })
  command.action(
    action(
      command,
      async ({ io, tasks }, argv: string[], flags: RunFlags) => {
        if (flags.c !== undefined && argv.length > 0) throw new TendError('TEND_ERR_USAGE', { detail: 'give either -c LINE or -- CMD [ARG...], not both' })
        if (flags.c === undefined && argv.length === 0) throw new TendError('TEND_ERR_USAGE', { detail: 'nothing to run: give -- CMD [ARG...] or -c LINE' })
        if (flags.c !== undefined && flags.c.trim() === '') throw new TendError('TEND_ERR_USAGE', { detail: '-c: the shell line is empty' })
        if (flags.owner !== undefined && !new RegExp(OWNER_PATTERN).test(flags.owner)) {
          throw new TendError('TEND_ERR_USAGE', { detail: `--owner: expected letters, digits and ._:@- (up to 128), got ${JSON.stringify(flags.owner)}` })
        }
        const tty = terminalOf(flags)
        if (flags.afterAny && !flags.after?.length)
          throw new TendError('TEND_ERR_USAGE', { detail: '--after-any: says how to wait for the tasks of --after, and none was given' })
        const ready = readyOf(flags)
        const options = {
          command: flags.c ?? argv,
          shell: flags.c !== undefined,
          name: flags.name,
          cwd: flags.cwd,
          env: flags.env,
          timeoutMs: flags.timeout,
          maxOutputBytes: flags.maxOutput,
          owner: flags.owner,
          sandbox: flags.sandbox,
          network: networkFlag(flags),
          allowNet: flags.allowNet,
          writablePaths: flags.writable,
          memoryBytes: flags.memory,
          pidsMax: flags.pids,
          lifetime: flags.persistent ? 'persistent' : undefined,
          stdin: flags.stdin ? 'pipe' : undefined,
          tty,
          after: flags.after,
          afterAny: flags.afterAny,
          ready,
          port: flags.port,
        } as const
        const wait = flags.waitReady ? 'ready' : flags.wait === true
        return (await tasks()).run(io, { ...options, require: flags.require, retries: flags.retries }, wait)
      },
      (error, _argv, flags) => {
        const code = exitCodeForError(error)
        return (flags.wait || flags.waitReady) && code !== EXIT.usage ? EXIT.waitFailed : code
      },
    ),
  )
}

/** `--tty` with its size: true for the default size, the size asked for, or none. */
/** --network, --net (host) and --allow-net (allow) as one mode; undefined leaves it to the daemon. */
function networkFlag(flags: RunFlags): NetworkMode | undefined {
  const implied = flags.net ? 'host' : flags.allowNet?.length ? 'allow' : undefined
  if (flags.net && flags.allowNet?.length)
    throw new TendError('TEND_ERR_USAGE', {
      detail: "--net (the host's whole network) and --allow-net (destinations through the egress proxy) contradict each other: give one",
    })
  if (flags.network !== undefined && implied !== undefined && flags.network !== implied) {
    throw new TendError('TEND_ERR_USAGE', {
      detail: `--network ${flags.network} contradicts ${flags.net ? '--net (network host)' : '--allow-net (network allow)'}`,
    })
  }
  return flags.network ?? implied
}

function terminalOf(flags: RunFlags): true | Partial<TerminalSize> | undefined {
  if (!flags.tty) {
    const sizeFlag = flags.cols !== undefined ? '--cols' : flags.rows !== undefined ? '--rows' : null
    if (sizeFlag) throw new TendError('TEND_ERR_USAGE', { detail: `${sizeFlag}: a terminal size needs --tty (the task runs on a terminal only with it)` })
    return undefined
  }
  if (flags.cols === undefined && flags.rows === undefined) return true
  return { ...(flags.cols === undefined ? {} : { cols: flags.cols }), ...(flags.rows === undefined ? {} : { rows: flags.rows }) }
}
