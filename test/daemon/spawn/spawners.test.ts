import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import { NodeSpawner } from '../../../daemon/spawn/node-spawner.js'
import { descriptorLayout, SETUP_DONE } from '../../../daemon/spawn/spawner.js'
import { readExitFile } from '../../../daemon/spawn/exit-file.js'
import type { CgroupJoin, PinnedDir, SpawnExit, SpawnRequest, Spawner } from '../../../daemon/spawn/spawner.js'
import { FIXTURES, startTestDaemon, type TestDaemon } from '../../helpers/test-daemon.js'
import { isAlive, processesWithEnv } from '../../helpers/processes.js'
import { waitFor } from '../../helpers/wait-for.js'

// Both spawners must start a task the same way: the native helper (the default where it was built)
// and the child_process fallback (TEND_SPAWNER=node).
const cleanups: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

describe.each(['native', 'node'] as const)('the %s spawner', (spawner) => {
  async function daemonWith(): Promise<TestDaemon> {
    const daemon = await startTestDaemon({ env: { TEND_SPAWNER: spawner } })
    cleanups.push(() => daemon.stop())
    return daemon
  }

  test('status names it, and a task gets its argv, env, cwd, limits, a new session and /dev/null as stdin', async () => {
    const daemon = await daemonWith()
    expect((await daemon.client.status()).spawner).toBe(spawner)
    const cwd = mkdtempSync(join(tmpdir(), 'tend-spawner-'))
    cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
    const script = 'printf "%s|" "$@"; echo; echo "$GREETING"; pwd; ulimit -c; ulimit -n; cat; ps -o sid= -p $$ | tr -d " "; echo $$'
    const task = await daemon.client.start({ command: ['sh', '-c', script, 'sh', 'two words', '', 'ünï'], cwd, env: { GREETING: 'hi there' } })
    const ended = await daemon.client.wait(task.id)
    expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
    const lines = (await daemon.client.read(task.id)).data.split('\n')
    expect(lines.slice(0, 5)).toEqual(['two words||ünï|', 'hi there', cwd, '0', '4096'])
    // `cat` read /dev/null and printed nothing; the shell leads its own session.
    expect(lines[5]).toBe(lines[6])
  })

  test(
    spawner === 'native' ? 'a task with a stdin pipe reads what is sent' : 'a task with a stdin pipe is refused, saying that it needs the native spawner',
    async () => {
      const daemon = await daemonWith()
      const cwd = mkdtempSync(join(tmpdir(), 'tend-spawner-stdin-'))
      cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
      const starting = daemon.client.start({ command: ['cat'], cwd, stdin: 'pipe' })
      if (spawner === 'node') {
        await expect(starting).rejects.toMatchObject({ code: 'TEND_ERR_STDIN_UNAVAILABLE', message: expect.stringContaining('needs the native spawner') })
        const direct = await new NodeSpawner().spawn({
          file: 'cat',
          argv: ['cat'],
          env: {},
          cwd,
          outputFile: join(cwd, 'out'),
          exitFile: '',
          extraFiles: [],
          cgroups: [],
          limits: { openFiles: 64, fileSizeBytes: 1e9 },
          stdinFifo: join(cwd, 'input.fifo'),
        })
        expect(direct).toMatchObject({ started: false, stage: 'stdin', code: 'ENOTSUP' })
        return
      }
      const task = await starting
      await waitFor(`task ${task.id} running`, async () => (await daemon.client.get(task.id)).state === 'running')
      await daemon.client.input(task.id, 'piped\n', { eof: true })
      expect(await daemon.client.wait(task.id)).toMatchObject({ state: 'exited', exitCode: 0 })
      expect((await daemon.client.read(task.id)).data).toBe('piped\n')
    },
  )

  test(spawner === 'native' ? 'a task on a terminal sees one' : 'a task on a terminal is refused, saying that it needs the native spawner', async () => {
    const daemon = await daemonWith()
    const cwd = mkdtempSync(join(tmpdir(), 'tend-spawner-tty-'))
    cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
    const starting = daemon.client.start({ command: 'test -t 0 && test -t 1 && echo terminal', shell: true, cwd, tty: true })
    if (spawner === 'node') {
      await expect(starting).rejects.toMatchObject({ code: 'TEND_ERR_TTY_UNAVAILABLE', message: expect.stringContaining('needs the native spawner') })
      const direct = await new NodeSpawner().spawn({
        file: 'cat',
        argv: ['cat'],
        env: {},
        cwd,
        outputFile: join(cwd, 'out'),
        exitFile: '',
        extraFiles: [],
        cgroups: [],
        limits: { openFiles: 64, fileSizeBytes: 1e9 },
        stdinFifo: join(cwd, 'input.fifo'),
        terminal: { resizeFifo: join(cwd, 'resize.fifo'), cols: 80, rows: 24 },
      })
      expect(direct).toMatchObject({ started: false, stage: 'tty', code: 'ENOTSUP' })
      expect(existsSync(join(cwd, 'out'))).toBe(false)
      return
    }
    const task = await starting
    expect(await daemon.client.wait(task.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    expect((await daemon.client.read(task.id)).data).toBe('terminal\r\n')
  })

  test(`a root daemon's sandboxed task has its masks (${spawner === 'native' ? 'hidden by the spawner, by descriptor' : 'mounted by bubblewrap: the node spawner is never handed places to hide'})`, async () => {
    const daemon = await daemonWith()
    const cwd = mkdtempSync(join(tmpdir(), 'tend-spawner-masks-'))
    cleanups.push(() => rmSync(cwd, { recursive: true, force: true }))
    const task = await daemon.client.start({ command: 'head -c 64 /etc/shadow 2>&1; stat -c %t:%T /etc/shadow', shell: true, cwd, sandbox: 'workspace' })
    const ended = await daemon.client.wait(task.id)
    const output = (await daemon.client.read(task.id)).data
    expect(ended, `${ended.reason ?? ''} ${output}`).toMatchObject({ state: 'exited', exitCode: 0 })
    // /dev/null in its place, which cannot even be opened there (nodev): nothing of the file is read.
    expect(output).toMatch(/Permission denied\n1:3\n$/)
  })

  test('a missing program and a missing cwd fail with the reason; exit codes and signals are recorded', async () => {
    const daemon = await daemonWith()
    const missing = await daemon.client.wait((await daemon.client.start({ command: ['/no/such/program'] })).id)
    expect(missing).toMatchObject({ state: 'failed', reason: 'no such program: /no/such/program' })
    const noCwd = await daemon.client.wait((await daemon.client.start({ command: ['true'], cwd: '/no/such/dir' })).id)
    expect(noCwd).toMatchObject({ state: 'failed', reason: 'cwd does not exist: /no/such/dir' })
    const three = await daemon.client.wait((await daemon.client.start({ command: ['sh', '-c', 'exit 3'] })).id)
    expect(three).toMatchObject({ state: 'exited', exitCode: 3 })
    const signalled = await daemon.client.wait((await daemon.client.start({ command: ['sh', '-c', 'kill -USR1 $$'] })).id)
    expect(signalled).toMatchObject({ state: 'killed', signal: 'SIGUSR1' })
  })

  test('stopping the daemon while tasks are still being launched leaves none of them running', async () => {
    const daemon = await daemonWith()
    const started = await Promise.all(Array.from({ length: 20 }, () => daemon.client.start({ command: ['sleep', '1000'] })))
    await daemon.stop()
    for (const task of started) expect(processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive)).toEqual([])
  })

  test('kills right after starts (some land while the task is being launched) answer only once no process of it is left', async () => {
    const daemon = await daemonWith()
    for (let round = 0; round < 5; round++) {
      const tasks = await Promise.all(Array.from({ length: 8 }, () => daemon.client.start({ command: ['sleep', '1000'] })))
      const killed = await Promise.all(tasks.map((task) => daemon.client.kill(task.id)))
      for (const task of killed) {
        expect(task.state).toBe('killed')
        expect(processesWithEnv(`TEND_TASK_ID=${task.id}`).filter(isAlive)).toEqual([])
      }
    }
  })

  test('stdout and stderr land in output.log interleaved exactly as written', async () => {
    const daemon = await daemonWith()
    const task = await daemon.client.start({ command: ['sh', join(FIXTURES, 'interleave.sh'), '30'] })
    expect(await daemon.client.wait(task.id)).toMatchObject({ state: 'exited', exitCode: 0 })
    const expected = Array.from({ length: 30 }, (_, index) => `out ${index + 1}\nerr ${index + 1}\n`).join('')
    expect((await daemon.client.read(task.id)).data).toBe(expected)
  })
})

// The same abilities straight on each spawner (no daemon): what bubblewrap is driven with.
describe.each([
  ['native', async (): Promise<Spawner> => NativeSpawner.start(NativeSpawner.binaryPath() ?? missingHelper())],
  ['node', async (): Promise<Spawner> => new NodeSpawner()],
] as const)('the %s spawner on its own', (kind, create) => {
  let spawner: Spawner
  let scratch: string
  /** Set in every child's environment, so the test can prove none is left running. */
  let marker: string
  let count = 0

  beforeAll(async () => {
    spawner = await create()
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tend-spawner-abilities-')))
  })
  afterAll(async () => {
    await spawner.close()
    rmSync(scratch, { recursive: true, force: true })
  })
  beforeEach(() => {
    marker = `TEND_SPAWNER_TEST=${process.pid}-${count++}`
  })
  afterEach(async () => {
    await waitFor(`no child with ${marker} left running`, () => processesWithEnv(marker).filter(isAlive).length === 0, 5000)
  })

  function freshDir(): string {
    const dir = mkdtempSync(join(scratch, 'd-'))
    // Children that run as another user still reach their cwd.
    chmodSync(dir, 0o755)
    return dir
  }

  function shell(script: string, overrides: Partial<SpawnRequest> = {}): SpawnRequest {
    const cwd = overrides.cwd ?? freshDir()
    const [key, value] = marker.split('=') as [string, string]
    return {
      file: '/bin/sh',
      argv: ['sh', '-c', script],
      env: { PATH: '/usr/bin:/bin', [key]: value },
      cwd,
      outputFile: join(cwd, 'output.log'),
      exitFile: join(cwd, 'exit.json'),
      extraFiles: [],
      cgroups: [],
      limits: { openFiles: 1024, fileSizeBytes: 1024 * 1024 * 1024 },
      ...overrides,
    }
  }

  async function run(request: SpawnRequest): Promise<SpawnExit & { output: Buffer }> {
    const outcome = await spawner.spawn(request)
    if (!outcome.started) throw new Error(`expected the child to start, got ${JSON.stringify(outcome)}`)
    const exit = await outcome.exited
    return { ...exit, output: readFileSync(request.outputFile) }
  }

  function pin(path: string): PinnedDir {
    const info = statSync(path, { bigint: true })
    return { path, dev: String(info.dev), ino: String(info.ino) }
  }

  test('a program that reports its setup has started the task once it says so; one that ends first fails at stage setup, with what it said, the output file untouched', async () => {
    const failed = shell('echo could not mount >&2; exit 1', { reportsSetup: true })
    expect(await spawner.spawn(failed)).toEqual({
      started: false,
      stage: 'setup',
      code: 'EIO',
      message: "/bin/sh ended before the task's command ran (exit code 1): could not mount",
    })
    expect(readFileSync(failed.outputFile, 'utf8')).toBe('')
    const killed = shell('echo still setting up >&2; kill -9 $$', { reportsSetup: true })
    expect(await spawner.spawn(killed)).toEqual({
      started: false,
      stage: 'setup',
      code: 'EIO',
      message: "/bin/sh ended before the task's command ran (SIGKILL): still setting up",
    })
    const says = `printf '%s\\n' '${SETUP_DONE}' >&2 && exec "$@" 2>&1`
    const result = await run(shell(says, { argv: ['sh', '-c', says, 'tend-task', 'sh', '-c', 'echo out; echo err >&2'], reportsSetup: true }))
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    expect(result.output.toString()).toBe('out\nerr\n')
  })

  test('a setup report is found however it is cut, after a long complaint, and only its last words are kept when it never comes', async () => {
    // 6000 bytes before the line, written in pieces: the line may straddle any read.
    const noise = `i=0; while [ $i -lt 100 ]; do printf '%059d\\n' $i >&2; i=$((i+1)); done`
    const says = `${noise}; printf 'tend: se' >&2; printf '%s\\n' 't up' >&2 && exec "$@" 2>&1`
    const result = await run(shell(says, { argv: ['sh', '-c', says, 'tend-task', 'echo', 'ran'], reportsSetup: true }))
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    expect(result.output.toString()).toBe('ran\n')
    const failed = shell(`${noise}; echo the last words >&2; exit 3`, { reportsSetup: true })
    const outcome = await spawner.spawn(failed)
    expect(outcome).toMatchObject({ started: false, stage: 'setup', code: 'EIO' })
    const message = (outcome as { message: string }).message
    expect(message).toMatch(/^\/bin\/sh ended before the task's command ran \(exit code 3\): /)
    expect(message).toMatch(/the last words$/)
    expect(message.length).toBeLessThan(9000)
  })

  test('the setup line counts only as a line of its own: bubblewrap naming a path that holds it has not set up', async () => {
    // bubblewrap's "Can't mkdir %s: %s", of a masked path whose name holds the line.
    const complaint = `printf "bwrap: Can't mkdir /home/u/x${SETUP_DONE}\\n: No such file or directory\\n" >&2; exit 1`
    expect(await spawner.spawn(shell(complaint, { reportsSetup: true }))).toMatchObject({ started: false, stage: 'setup', code: 'EIO' })
  })

  test('setup words with NUL, newlines, bytes that are not UTF-8 and a fake reply line are one failure; the spawner answers after', async () => {
    const words = `printf 'a\\0b\\nstarted 1 2 3 4\\n\\377\\376 %%s %%n\\n' >&2; exit 7`
    const outcome = await spawner.spawn(shell(words, { reportsSetup: true }))
    expect(outcome).toEqual({
      started: false,
      stage: 'setup',
      code: 'EIO',
      message: "/bin/sh ended before the task's command ran (exit code 7): a\0b\nstarted 1 2 3 4\n\uFFFD\uFFFD %s %n",
    })
    const says = `printf '%s\\n' '${SETUP_DONE}' >&2 && exec "$@" 2>&1`
    const next = await run(shell(says, { argv: ['sh', '-c', says, 'tend-task', 'echo', 'ran'], reportsSetup: true }))
    expect(next).toMatchObject({ exitCode: 0, signal: null })
  })

  test('what is said on the setup channel after the line never reaches the output, even a flood, and its writer is never left blocked', async () => {
    // A child started after the line keeps the channel (fd 2 before the exec's 2>&1) and floods it while the task runs.
    const says = `printf '%s\\n' '${SETUP_DONE}' >&2 && { (head -c 4000000 /dev/zero >&2) & } && exec "$@" 2>&1`
    const result = await run(shell(says, { argv: ['sh', '-c', says, 'tend-task', 'sh', '-c', 'echo task; echo err >&2'], reportsSetup: true }))
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    expect(result.output.toString()).toBe('task\nerr\n')
    // afterEach: the flooder ends (it finished, or met the channel's end once the task ended).
  })

  test('a setup that is still going after setupWaitMs is stopped with its process group and fails at stage setup (ETIMEDOUT), leaving nothing', async () => {
    // A program that never says it is set up and never ends, with a child of its own holding fd 2.
    const hung = shell('echo mounting >&2; sleep 600 & wait', { reportsSetup: true, setupWaitMs: 300 })
    const outcome = await spawner.spawn(hung)
    expect(outcome).toEqual({
      started: false,
      stage: 'setup',
      code: 'ETIMEDOUT',
      message: '/bin/sh was still setting up after 300 ms and was stopped: mounting',
    })
    expect(readFileSync(hung.outputFile, 'utf8')).toBe('')
    // afterEach: no process with this test's marker is left (the sleep went with its group).
  })

  test('a setupWaitMs without reportsSetup, or out of range, is refused as a bad request', async () => {
    for (const overrides of [{ setupWaitMs: 100 }, { reportsSetup: true, setupWaitMs: 0 }, { reportsSetup: true, setupWaitMs: 3_600_001 }]) {
      expect(await spawner.spawn(shell('true', overrides)), JSON.stringify(overrides)).toMatchObject({ started: false, stage: 'request', code: 'EINVAL' })
    }
  })

  test('an in-memory file of 200 KiB is read back byte for byte from its descriptor, after the extra files', async () => {
    const dir = freshDir()
    const extra = join(dir, 'extra')
    writeFileSync(extra, 'extra\n')
    const big = randomBytes(200 * 1024)
    const small = Buffer.from('second\0file')
    const request = shell('cat <&3; cat <&4; cat <&5', { cwd: dir, extraFiles: [extra], dataFiles: [big, small] })
    expect(descriptorLayout(request)).toEqual({ extra: [3], data: [4, 5], pinned: [] })
    const result = await run(request)
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    expect(result.output.equals(Buffer.concat([Buffer.from('extra\n'), big, small]))).toBe(true)
  })

  test('pinned folders are open on the descriptors after the extra and in-memory files, and readable through them', async () => {
    const dir = freshDir()
    const extra = join(dir, 'extra')
    writeFileSync(extra, '')
    const first = freshDir()
    const second = freshDir()
    writeFileSync(join(first, 'in-first'), '')
    writeFileSync(join(second, 'in-second'), '')
    const request = shell('ls /proc/self/fd/5/; ls /proc/self/fd/6/; readlink /proc/self/fd/5 /proc/self/fd/6', {
      cwd: dir,
      extraFiles: [extra],
      dataFiles: [Buffer.from('args')],
      pinnedDirs: [pin(first), pin(second)],
    })
    expect(descriptorLayout(request)).toEqual({ extra: [3], data: [4], pinned: [5, 6] })
    const result = await run(request)
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    expect(result.output.toString()).toBe(`in-first\nin-second\n${first}\n${second}\n`)
  })

  test('a pinned folder whose path now runs through a symbolic link fails at stage pinned, naming the path', async () => {
    // The link leads back to the very same folder: only refusing symbolic links can catch it.
    const parent = freshDir()
    const pinned = join(parent, 'pinned')
    mkdirSync(join(parent, 'pinned'))
    const inner = join(pinned, 'inner')
    mkdirSync(inner)
    const pins = [pin(pinned), pin(inner)]
    renameSync(pinned, `${pinned}.moved`)
    symlinkSync(`${pinned}.moved`, pinned)

    const last = await spawner.spawn(shell('true', { pinnedDirs: [pins[0]!] }))
    expect(last).toEqual({
      started: false,
      stage: 'pinned',
      code: 'ELOOP',
      message: `folder changed since the task was accepted: ${pinned} (a symbolic link is now in its path)`,
    })
    const above = await spawner.spawn(shell('true', { pinnedDirs: [pin(freshDir()), pins[1]!] }))
    expect(above).toEqual({
      started: false,
      stage: 'pinned',
      code: 'ELOOP',
      message: `folder changed since the task was accepted: ${inner} (a symbolic link is now in its path)`,
    })
  })

  test('a pinned folder replaced by another real folder fails at stage pinned, naming the path', async () => {
    const parent = freshDir()
    const pinned = join(parent, 'pinned')
    mkdirSync(pinned)
    const pinnedDir = pin(pinned)
    renameSync(pinned, `${pinned}.old`)
    mkdirSync(pinned)
    const outcome = await spawner.spawn(shell('true', { pinnedDirs: [pinnedDir] }))
    expect(outcome).toEqual({
      started: false,
      stage: 'pinned',
      code: 'ESTALE',
      message: `folder changed since the task was accepted: ${pinned} (it is no longer the same directory)`,
    })
    rmdirSync(pinned)
    const gone = await spawner.spawn(shell('true', { pinnedDirs: [pinnedDir] }))
    expect(gone).toEqual({
      started: false,
      stage: 'pinned',
      code: 'ENOENT',
      message: `folder changed since the task was accepted: ${pinned} (it no longer exists)`,
    })
  })

  test('a cwd that is no longer the folder it was when the task was accepted fails at stage chdir', async () => {
    const cwd = freshDir()
    const same = await run(shell('pwd', { cwd, cwdIdentity: identity(cwd) }))
    expect(same).toMatchObject({ exitCode: 0, output: Buffer.from(`${cwd}\n`) })
    const other = freshDir()
    const outcome = await spawner.spawn(shell('true', { cwd, cwdIdentity: identity(other) }))
    expect(outcome).toEqual({
      started: false,
      stage: 'chdir',
      code: 'ESTALE',
      message: `cwd changed since the task was accepted: ${cwd} (it is no longer the same directory)`,
    })
  })

  test('a pinned cwd is entered and checked like any other', async () => {
    const cwd = freshDir()
    const result = await run(shell('pwd; ls /proc/self/fd/3/', { cwd, pinnedDirs: [pin(cwd)], cwdIdentity: identity(cwd) }))
    expect(result).toMatchObject({ exitCode: 0, output: Buffer.from(`${cwd}\noutput.log\n`) })
  })

  test('a child run as 65534 has that uid and gid, no supplementary groups and no capabilities, and still writes its output', async () => {
    const dir = freshDir()
    writeFileSync(join(dir, 'data-check'), '')
    const request = shell('cat /proc/self/status; cat <&3', {
      cwd: dir,
      user: { uid: 65534, gid: 65534 },
      dataFiles: [Buffer.from('secret-for-bwrap\n')],
      pinnedDirs: [pin(dir)],
    })
    const result = await run(request)
    expect(result).toMatchObject({ exitCode: 0, signal: null })
    const status = result.output.toString()
    const field = (name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(status)?.[1]?.trim()
    expect(field('Uid')?.split(/\s+/)).toEqual(['65534', '65534', '65534', '65534'])
    expect(field('Gid')?.split(/\s+/)).toEqual(['65534', '65534', '65534', '65534'])
    expect(field('Groups')).toBe('')
    expect(field('CapEff')).toBe('0000000000000000')
    expect(field('CapPrm')).toBe('0000000000000000')
    expect(field('CapAmb')).toBe('0000000000000000')
    expect(status.endsWith('secret-for-bwrap\n')).toBe(true)
    // The output file was opened by the spawner, as root: it stays the daemon's.
    expect(statSync(request.outputFile).uid).toBe(process.getuid!())
  })

  test('a started task names its keeper (native: its exit file is written, and attach watches it) or none (node: attach is not supported)', async () => {
    const request = shell('exit 5')
    const outcome = await spawner.spawn(request)
    if (!outcome.started) throw new Error(`expected the child to start, got ${JSON.stringify(outcome)}`)
    expect(await outcome.exited).toEqual({ exitCode: 5, signal: null })
    const attach = { keeper: outcome.keeper ?? { pid: outcome.pid, startTicks: 1 }, taskPid: outcome.pid, exitFile: request.exitFile }
    if (kind === 'node') {
      expect(outcome.keeper).toBeNull()
      expect(existsSync(request.exitFile)).toBe(false)
      expect(await spawner.attach(attach)).toMatchObject({ attached: false, code: 'ENOTSUP' })
      return
    }
    expect(outcome.keeper).toEqual({ pid: expect.any(Number), startTicks: expect.any(Number) })
    expect(outcome.keeper!.pid).not.toBe(outcome.pid)
    // The keeper writes the exit file before it reports the exit (the daemon records the end at
    // once, with nothing left to write into the task's folder), then exits.
    expect(readExitFile(request.exitFile)).toMatchObject({ pid: outcome.pid, exitCode: 5, signal: null })
    await waitFor('the keeper to exit', () => !isAlive(outcome.keeper!.pid), 5000)
    // The task has ended and its exit file is there: an attach reports it at once.
    const watching = await spawner.attach(attach)
    if (!watching.attached) throw new Error(`expected to attach, got ${JSON.stringify(watching)}`)
    expect(await watching.exited).toEqual({ exitCode: 5, signal: null })
  })

  /** A folder with a `tasks` file, as a cgroup folder has, and its join entry as made. */
  function group(dir: string, name: string): CgroupJoin {
    const path = join(dir, name)
    mkdirSync(path)
    writeFileSync(join(path, 'tasks'), '')
    const info = statSync(path, { bigint: true })
    return { path, dev: String(info.dev), ino: String(info.ino), uid: Number(info.uid) }
  }

  test("the child joins each cgroup through the folder as it was made: its tasks file gets the child's own entry", async () => {
    const dir = freshDir()
    const groups = [group(dir, 'memory'), group(dir, 'pids')]
    const result = await run(shell('echo $$', { cwd: dir, cgroups: groups }))
    expect(result.exitCode).toBe(0)
    // The native child moves itself (0: this thread), the node prelude its shell's pid.
    const written = kind === 'native' ? '0\n' : result.output.toString()
    for (const each of groups) expect(readFileSync(join(each.path, 'tasks'), 'utf8')).toBe(written)
  })

  test('a cgroup folder renamed and replaced by another fails at stage cgroup (ESTALE), and neither folder is joined', async () => {
    const dir = freshDir()
    const made = group(dir, 'group')
    renameSync(made.path, join(dir, 'group-made'))
    mkdirSync(made.path)
    writeFileSync(join(made.path, 'tasks'), '')
    const request = shell('echo ran', { cwd: dir, cgroups: [made] })
    const outcome = await spawner.spawn(request)
    expect(outcome).toMatchObject({
      started: false,
      stage: 'cgroup',
      code: 'ESTALE',
      message: expect.stringContaining(`could not join cgroup ${made.path}: it is no longer the folder the daemon made`),
    })
    expect(readFileSync(join(made.path, 'tasks'), 'utf8')).toBe('')
    expect(readFileSync(join(dir, 'group-made', 'tasks'), 'utf8')).toBe('')
    expect(existsSync(request.outputFile) ? readFileSync(request.outputFile, 'utf8') : '').toBe('')
  })

  test('a cgroup folder reached through a symbolic link fails at stage cgroup (ELOOP); one with another owner (ESTALE)', async () => {
    const dir = freshDir()
    const made = group(dir, 'group')
    symlinkSync(dir, join(dir, 'link'))
    expect(await spawner.spawn(shell('true', { cwd: dir, cgroups: [{ ...made, path: join(dir, 'link', 'group') }] }))).toMatchObject({
      started: false,
      stage: 'cgroup',
      code: 'ELOOP',
    })
    expect(await spawner.spawn(shell('true', { cwd: dir, cgroups: [{ ...made, uid: 4242 }] }))).toMatchObject({
      started: false,
      stage: 'cgroup',
      code: 'ESTALE',
    })
    expect(readFileSync(join(made.path, 'tasks'), 'utf8')).toBe('')
  })

  if (kind === 'node') {
    test('an idmapped folder is refused at stage idmap, saying that it needs the native spawner', async () => {
      const dir = freshDir()
      const outcome = await spawner.spawn(
        shell('true', { cwd: dir, user: { uid: 65534, gid: 65534 }, pinnedDirs: [{ ...pin(dir), owner: { uid: 0, gid: 0 } }] }),
      )
      expect(outcome).toMatchObject({ started: false, stage: 'idmap', code: 'ENOTSUP', message: expect.stringContaining('native spawner') })
    })

    test('hidden paths are refused at stage hidden, saying that they need the native spawner', async () => {
      const dir = freshDir()
      mkdirSync(join(dir, 'secret'))
      const outcome = await spawner.spawn(shell('true', { cwd: dir, hiddenPaths: [join(dir, 'secret')] }))
      expect(outcome).toMatchObject({ started: false, stage: 'hidden', code: 'ENOTSUP', message: expect.stringContaining('native spawner') })
    })
  }

  test('invalid pins, views, cgroups, identities and users are refused as a bad request', async () => {
    const dir = freshDir()
    const bad: Partial<SpawnRequest>[] = [
      { pinnedDirs: [{ path: 'relative/dir', dev: '1', ino: '2' }] },
      { pinnedDirs: [{ path: dir, dev: '-1', ino: '2' }] },
      { pinnedDirs: [{ ...pin(dir), owner: { uid: 0, gid: 0 } }] },
      { user: { uid: 65534, gid: 65534 }, pinnedDirs: [{ ...pin(dir), owner: { uid: -1, gid: 0 } }] },
      { user: { uid: 65534, gid: 65534 }, idmappedViews: [pin(dir)] },
      { cgroups: [{ path: 'relative', dev: '1', ino: '2', uid: 0 }] },
      { cgroups: [{ path: dir, dev: '1', ino: '2', uid: 1.5 }] },
      { cwdIdentity: { dev: '1', ino: 'x' } },
      { user: { uid: -1, gid: 0 } },
      { user: { uid: 0, gid: 1.5 } },
      { hiddenPaths: ['relative/.ssh'] },
      { hiddenPaths: [`${dir}/with\0nul`] },
    ]
    for (const overrides of bad) {
      expect(await spawner.spawn(shell('true', { cwd: dir, ...overrides }))).toMatchObject({ started: false, stage: 'request', code: 'EINVAL' })
    }
  })
})

function identity(path: string): { dev: string; ino: string } {
  const info = statSync(path, { bigint: true })
  return { dev: String(info.dev), ino: String(info.ino) }
}

function missingHelper(): never {
  throw new Error('dist/native/tend-spawner is missing: run `npm run build` (it needs a C compiler)')
}
