import { Argument, Option, type Command } from 'commander'
import { existsSync } from 'node:fs'
import { userInfo } from 'node:os'
import { join } from 'node:path'
import { TendError } from '../../../protocol/index.js'
import { TendClient } from '../../client.js'
import { removeUnitFile, unitForThisCopy, writeUnitFile } from '../../service/service-files.js'
import { requireSystemd, runSystemctl, SYSTEMD_RUNTIME_DIR, unitFolder } from '../../service/systemd.js'
import { UNIT_NAME, type ServiceScope } from '../../service/unit-file.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson, type CliIo } from '../output.js'

interface ServiceFlags {
  user?: boolean
  system?: boolean
  print?: boolean
  unitDir?: string
  systemdRuntimeDir?: string
}

export function registerServiceCommand(program: Command): void {
  const command = program
    .command('service')
    .summary('install or remove a systemd unit that runs the daemon (docs/service.md)')
    .addArgument(
      new Argument('<action>', 'install: write the unit, enable and start it; uninstall: stop, disable and remove it').choices(['install', 'uninstall']),
    )
    .option('--user', "the user's own service manager (default when not root): ~/.config/systemd/user/tend.service")
    .option('--system', "the system's (default as root): /etc/systemd/system/tend.service, the daemon as the installing user")
    .option('--print', 'install: only print the unit (no systemd needed)')
    // For tests: where the unit goes, and where a running systemd is seen.
    .addOption(new Option('--unit-dir <dir>').hideHelp())
    .addOption(new Option('--systemd-runtime-dir <dir>').hideHelp())
  command.action(
    action(command, async ({ client, io }, verb: 'install' | 'uninstall', flags: ServiceFlags) => {
      if (flags.user && flags.system) throw new TendError('TEND_ERR_USAGE', { detail: 'choose one of --user and --system' })
      if (flags.print && verb !== 'install') throw new TendError('TEND_ERR_USAGE', { detail: '--print goes with install only' })
      const scope: ServiceScope = flags.user ? 'user' : flags.system ? 'system' : process.getuid!() === 0 ? 'system' : 'user'
      const env = client.options.env
      const unitPath = join(flags.unitDir ?? unitFolder(scope, env), UNIT_NAME)
      const home = client.options.layout.home
      if (verb === 'install' && flags.print) {
        const unit = unitForThisCopy(scope, home, env, installingUser())
        if (io.json) printJson(io, { scope, unitPath, unit })
        else process.stdout.write(unit)
        return EXIT.ok
      }
      const systemctl = requireSystemd({ path: env.PATH ?? '', runtimeDir: flags.systemdRuntimeDir ?? SYSTEMD_RUNTIME_DIR })
      return verb === 'install' ? install({ io, scope, unitPath, home, env, systemctl }) : uninstall({ io, scope, unitPath, env, systemctl })
    }),
  )
}

/** Who runs `tend service`, for a system unit's User=: the name, or the uid where no name is on record (a container's). */
function installingUser(): string {
  try {
    return userInfo().username
  } catch {
    return String(process.getuid!())
  }
}

interface ServiceAction {
  io: CliIo
  scope: ServiceScope
  unitPath: string
  env: Record<string, string | undefined>
  systemctl: string
}

async function install({ io, scope, unitPath, home, env, systemctl }: ServiceAction & { home: string }): Promise<number> {
  writeUnitFile(unitPath, unitForThisCopy(scope, home, env, installingUser()))
  // A daemon already serving this home (started by a client) hands its running tasks on to the
  // unit's: the unit's daemon could not take the home while it runs.
  const running = new TendClient({ home, env, autoStart: false })
  let handedOver: number | null
  try {
    handedOver = (await running.stopDaemon({ keepTasks: true })).pid
  } finally {
    running.close()
  }
  runSystemctl(systemctl, scope, ['daemon-reload'], env, 'installed')
  runSystemctl(systemctl, scope, ['enable', '--now', UNIT_NAME], env, 'installed')
  const manage = `systemctl${scope === 'user' ? ' --user' : ''}`
  if (io.json) printJson(io, { scope, unitPath, enabled: true, replacedPid: handedOver })
  else {
    io.out(`wrote ${unitPath}; enabled and started it (${manage} status tend)`)
    if (handedOver !== null) io.out(`the daemon that ran (pid ${handedOver}) stopped; the service's supervises its running tasks`)
  }
  return EXIT.ok
}

async function uninstall({ io, scope, unitPath, env, systemctl }: ServiceAction): Promise<number> {
  if (!existsSync(unitPath)) {
    if (io.json) printJson(io, { scope, unitPath, removed: false })
    else io.out(`no ${unitPath}: nothing to remove`)
    return EXIT.ok
  }
  runSystemctl(systemctl, scope, ['disable', '--now', UNIT_NAME], env, 'removed')
  removeUnitFile(unitPath)
  runSystemctl(systemctl, scope, ['daemon-reload'], env, 'removed')
  if (io.json) printJson(io, { scope, unitPath, removed: true })
  else io.out(`stopped and disabled tend.service, removed ${unitPath}`)
  return EXIT.ok
}
