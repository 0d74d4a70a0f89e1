import { closeSync, openSync } from 'node:fs'
import { execa } from 'execa'
import { checkCwd } from './cwd-check.js'
import type { SpawnExit, SpawnOutcome, SpawnRequest, Spawner } from './spawner.js'

/**
 * The fallback spawner, where the native helper could not be built: child_process (through execa)
 * from the daemon's own thread, with a small shell prelude that sets the limits and joins the
 * cgroups before it execs the program. Slower (the daemon forks itself for every task) but the
 * child ends up set up the same way.
 */
export class NodeSpawner implements Spawner {
  readonly kind = 'node'

  async spawn(request: SpawnRequest): Promise<SpawnOutcome> {
    const cwdProblem = await checkCwd(request.cwd)
    if (cwdProblem) return { started: false, stage: 'chdir', code: 'ENOENT', message: cwdProblem }
    const fileSizeBlocks = Math.ceil(request.limits.fileSizeBytes / 512)
    const joins = request.cgroupProcs.map((file) => `echo $$ > ${shellQuote(file)}`).join(' && ')
    const prelude = `ulimit -c 0; ulimit -n ${request.limits.openFiles}; ulimit -f ${fileSizeBlocks}; ${joins ? `${joins} || exit 125; ` : ''}exec "$@"`
    const descriptors: number[] = []
    try {
      const output = openSync(request.outputFile, 'a', 0o600)
      descriptors.push(output)
      for (const file of request.extraFiles) descriptors.push(openSync(file, 'r'))
      // execa passes any numeric descriptor through to the child; its types only list 3..9.
      const [outputFd, ...extraFds] = descriptors as 3[]
      const subprocess = execa('/bin/sh', ['-c', prelude, 'tend-task', request.file, ...request.argv.slice(1)], {
        cwd: request.cwd,
        env: request.env,
        extendEnv: false,
        stdio: ['ignore', outputFd!, outputFd!, ...extraFds],
        detached: true,
        reject: false,
        cleanup: false,
        stripFinalNewline: false,
      })
      const pid = subprocess.pid
      if (pid === undefined) {
        const result = await subprocess
        return { started: false, stage: 'exec', code: String(result.code ?? 'UNKNOWN'), message: `could not start ${request.file}: ${result.originalMessage ?? result.shortMessage}` }
      }
      const exited: Promise<SpawnExit> = subprocess.then((result) => ({ exitCode: result.exitCode ?? null, signal: (result.signal as NodeJS.Signals | undefined) ?? null }))
      return { started: true, pid, exited }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'UNKNOWN'
      return { started: false, stage: 'output', code, message: `could not open the task's files: ${(error as Error).message}` }
    } finally {
      for (const fd of descriptors) closeSync(fd)
    }
  }

  async close(): Promise<void> {}
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}
