import { spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { REPO_ROOT } from './test-daemon.js'

/*
 * A machine for bin/system-setup.sh, as a PATH built for one case: the few real tools the script
 * uses, a stand-in (an empty program) for each command the case says is there, and fake apt-get,
 * dnf, sudo, id and useradd that record their arguments and succeed or fail as the case needs. A
 * fake package manager "installs" a package by making the commands that package brings; the fake
 * useradd makes the test user known to the fake id. The cgroup folders the tests' set prepares are
 * under a temporary folder of the machine's (TEND_SETUP_CGROUP_BASE), empty unless the case asks.
 */

export const SYSTEM_SETUP_SCRIPT = join(REPO_ROOT, 'bin', 'system-setup.sh')
/** What the script itself runs, taken from this machine. */
const REAL_TOOLS = ['bash', 'env', 'mktemp', 'cat', 'rm', 'true', 'sh', 'stat', 'mkdir', 'chown', 'chmod']
/** Every command the script checks, for the cases where all is there. */
export const EVERY_COMMAND = [
  'bwrap',
  'cc',
  'setpriv',
  'useradd',
  'chromium',
  'openssl',
  'redis-server',
  'make',
  'git',
  'strace',
  'curl',
  'ip',
  'python3',
  'systemd-analyze',
]
/** The commands each package brings, under its Debian and its Fedora name. */
const PACKAGE_COMMANDS: Record<string, string[]> = {
  bubblewrap: ['bwrap'],
  gcc: ['cc'],
  'redis-server': ['redis-server'],
  redis: ['redis-server'],
  chromium: ['chromium'],
}

export interface FakeMachineSpec {
  /** Commands present (stand-ins). */
  present: string[]
  /** The user's uid as the fake `id -u` answers it. Default 0. */
  uid?: number
  /** Default `apt-get`. */
  manager?: 'apt-get' | 'dnf' | 'none'
  /** `working`: `sudo -n` runs the command; `password`: it asks for one (and so fails); absent: no sudo. */
  sudo?: 'working' | 'password'
  /** The package manager fails every install, printing why. */
  installFails?: boolean
  /** Whether the user tend-test exists (default true; the fake useradd makes it). */
  testUser?: boolean
  /** Whether the fake cgroup tree has v1 memory and pids controllers for the tests' set to prepare (default false: none). */
  cgroupControllers?: boolean
  /** Where the script is: the repository's (its C built), or a copy in a bare package folder. */
  scriptAt?: 'repository' | 'bare-package'
}

export interface FakeMachine {
  /** The temporary folder that holds it all; the caller removes it. */
  root: string
  /** The PATH to run with (one folder). */
  bin: string
  script: string
  /** The environment to run the script with: PATH, TMPDIR and the fake cgroup tree. */
  env: Record<string, string>
  /** The fake cgroup tree (TEND_SETUP_CGROUP_BASE). */
  cgroupBase: string
  /** The package-manager, sudo and useradd calls made so far, one line each: `apt-get install -y …`. */
  calls: () => string[]
}

/** The commands of `EVERY_COMMAND` but these. */
export const everyCommandBut = (...absent: string[]): string[] => EVERY_COMMAND.filter((command) => !absent.includes(command))

export function createFakeMachine(spec: FakeMachineSpec): FakeMachine {
  const root = mkdtempSync(join(tmpdir(), 'tend-system-setup-'))
  const bin = join(root, 'bin')
  mkdirSync(bin)
  const callsFile = join(root, 'calls.log')
  for (const tool of REAL_TOOLS) symlinkSync(realPath(tool), join(bin, tool))
  for (const command of spec.present) writeProgram(join(bin, command), 'exit 0')
  // The test user's uid as the fake id gives it: the real tend-test's, so that chown by name and the folder named by uid agree.
  const testUid = spawnSync('id', ['-u', 'tend-test'], { encoding: 'utf8' }).stdout.trim() || '999'
  const userMade = join(root, 'user-made')
  if (spec.testUser ?? true) writeFileSync(userMade, '')
  writeProgram(
    join(bin, 'id'),
    `[ "$1" = -u ] || exit 1\nif [ -n "$2" ]; then [ -e "${userMade}" ] && echo ${testUid} && exit 0; exit 1; fi\necho ${spec.uid ?? 0}`,
  )
  writeProgram(join(bin, 'useradd'), `echo "useradd $*" >>"${callsFile}"\n: >"${userMade}"`)
  writeProgram(join(bin, 'getent'), 'exit 2')
  const cgroupBase = join(root, 'cgroup')
  mkdirSync(cgroupBase)
  if (spec.cgroupControllers) {
    for (const controller of ['memory', 'pids']) {
      mkdirSync(join(cgroupBase, controller))
      writeFileSync(join(cgroupBase, controller, 'cgroup.procs'), '')
    }
  }
  const manager = spec.manager ?? 'apt-get'
  if (manager !== 'none') {
    const installs = Object.entries(PACKAGE_COMMANDS)
      .map(
        ([name, commands]) =>
          `${name}) ${commands.map((command) => `printf '#!/bin/sh\\n' >"${bin}/${command}"; chmod 755 "${bin}/${command}"`).join('; ')} ;;`,
      )
      .join('\n    ')
    const outcome = spec.installFails
      ? `echo "E: Unable to locate package $last (fake ${manager})"; exit 100`
      : `for package in "$@"; do case $package in\n    ${installs}\n  esac; done`
    writeProgram(
      join(bin, manager),
      `echo "${manager} $*" >>"${callsFile}"\nfor last in "$@"; do :; done\ncase " $* " in *" install "*) ${outcome} ;; esac\nexit 0`,
    )
  }
  if (spec.sudo === 'working') writeProgram(join(bin, 'sudo'), `echo "sudo $*" >>"${callsFile}"\n[ "$1" = -n ] && shift\nexec "$@"`)
  if (spec.sudo === 'password') writeProgram(join(bin, 'sudo'), `echo "sudo $*" >>"${callsFile}"\necho "sudo: a password is required" >&2\nexit 1`)
  let script = SYSTEM_SETUP_SCRIPT
  if (spec.scriptAt === 'bare-package') {
    mkdirSync(join(root, 'package', 'bin'), { recursive: true })
    script = join(root, 'package', 'bin', 'system-setup.sh')
    copyFileSync(SYSTEM_SETUP_SCRIPT, script)
  }
  const calls = () => (existsSync(callsFile) ? readFileSync(callsFile, 'utf8').trim().split('\n') : [])
  return { root, bin, script, calls, cgroupBase, env: { PATH: bin, TMPDIR: root, TEND_SETUP_CGROUP_BASE: cgroupBase } }
}

function writeProgram(path: string, body: string): void {
  writeFileSync(path, `#!/bin/sh\n${body}\n`)
  chmodSync(path, 0o755)
}

function realPath(tool: string): string {
  const found = spawnSync('/bin/bash', ['-c', `type -P ${tool}`], { encoding: 'utf8' }).stdout.trim()
  if (!found) throw new Error(`the test needs ${tool} on this machine`)
  return found
}
