import type { Command } from 'commander'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { packageRoot } from '../../package-root.js'
import { EXIT } from '../exit-codes.js'

const HELP = `
Installs the system packages tend needs to run, with the script the package ships
(bin/system-setup.sh): bubblewrap, for the default workspace sandbox, and a C compiler
only where tend's C (the native spawner) is not built. It installs through apt-get
(Debian, Ubuntu) or dnf (Fedora), with sudo -n when not root. Where it cannot (not root
and sudo asks for a password, another package manager, a failed install) it prints the
one command to run and exits 1. With everything there it only looks, and says nothing.
Messages go to stderr; with --json, stdout gets {set, manager, installed, missing, command}.
Starts no daemon.`

/**
 * `tend setup`: for a global install, where npm's scripts are out of reach. The script decides
 * everything (one copy of the package lists); this only finds it in the package and runs it.
 */
export function registerSetupCommand(program: Command): void {
  const command = program
    .command('setup')
    .summary('install the system packages tend needs (bubblewrap; a C compiler where its C is not built)')
    .addHelpText('after', HELP)
  command.action(async () => {
    const { json } = command.optsWithGlobals<{ json?: boolean }>()
    process.exitCode = await runSystemSetup(json ? ['--json'] : [])
  })
}

/**
 * The bash the script names on its first line, as it names it. Never `bash` looked up on PATH: the
 * script runs as root, and PATH may begin with a folder another user can write (npm's
 * node_modules/.bin of every folder above a project). `-p`: no BASH_ENV or ENV file read, no function
 * taken from the environment. Given to the script, not exec'd through it: a package may not keep its mode.
 */
const BASH = '/bin/bash'

/** Runs the shipped script with the terminal's stdio; its exit status (0, 1 or 2) is tend's. */
function runSystemSetup(args: string[]): Promise<number> {
  const script = join(packageRoot(), 'bin', 'system-setup.sh')
  return new Promise((resolve) => {
    const child = spawn(BASH, ['-p', script, ...args], { stdio: 'inherit' })
    child.once('error', (error) => {
      process.stderr.write(`tend setup: could not run ${script} with ${BASH} -p: ${error.message}\n`)
      resolve(EXIT.failed)
    })
    child.once('exit', (code, signal) => resolve(code ?? (signal ? EXIT.failed : EXIT.ok)))
  })
}
