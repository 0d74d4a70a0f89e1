import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { execa } from 'execa'
import { socketAnswers } from '../../client/ensure-daemon.js'
import type { Task } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { assertNothingLeft, createTempHome, daemonEnv, REPO_ROOT, startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version

/** Live `tend daemon` processes of a home (the CLI processes and tasks share its TEND_HOME, not its argv). */
function daemonsOf(home: string): number[] {
  return processesWithEnv(`TEND_HOME=${home}`)
    .filter(isAlive)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('daemon')
      } catch {
        return false
      }
    })
}

/** Starts the CLI without waiting for it, so a test can watch its output arrive. */
function startCli(args: string[], env: Record<string, string>) {
  const subprocess = execa(process.execPath, [TEND_BIN, ...args], {
    env,
    extendEnv: false,
    reject: false,
    stdin: 'ignore',
    timeout: 30_000,
    stripFinalNewline: false,
  })
  let stdout = ''
  subprocess.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
  return { subprocess, stdout: () => stdout }
}

describe('the tend CLI against a running daemon', () => {
  let daemon: TestDaemon
  let env: Record<string, string>

  beforeAll(async () => {
    daemon = await startTestDaemon()
    env = daemon.env
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  /** A task that runs until killed, started through the client; waits until it runs. */
  async function startSleeper(name?: string): Promise<Task> {
    const started = await daemon.client.start({ command: ['sleep', '600'], name })
    return waitFor(`task ${started.id} to run`, async () => {
      const task = await daemon.client.get(started.id)
      return task.state === 'running' ? task : null
    })
  }

  async function finishedTask(line: string): Promise<Task> {
    const started = await daemon.client.start({ command: line, shell: true })
    return daemon.client.wait(started.id)
  }

  describe('run', () => {
    test('run -- CMD prints only the new task id', async () => {
      const result = await runCli(['run', '--', 'echo', 'hi'], env)
      expect(result.exitCode).toBe(0)
      expect(result.stderr).toBe('')
      expect(result.stdout).toMatch(/^[0-9a-z]{12}\n$/)
      const task = await daemon.client.wait(result.stdout.trim())
      expect(task).toMatchObject({ state: 'exited', exitCode: 0, command: ['echo', 'hi'] })
    })

    test('run -c LINE runs a shell line and --name, --env, --owner and --cwd reach the task', async () => {
      const result = await runCli(
        ['run', '--name', 'labelled', '--env', 'GREETING=hi there', '--owner', 'agent-7', '--cwd', '/tmp', '-c', 'echo "$GREETING from $(pwd)"'],
        env,
      )
      expect(result.exitCode).toBe(0)
      const task = await daemon.client.wait(result.stdout.trim())
      expect(task).toMatchObject({ state: 'exited', name: 'labelled', owner: 'agent-7', cwd: '/tmp', shell: true, envKeys: ['GREETING'] })
      expect((await daemon.client.read(task.id)).data).toBe('hi there from /tmp\n')
    })

    test('run --wait prints the output and exits with the task exit code', async () => {
      const result = await runCli(['run', '--wait', '--', 'sh', '-c', 'echo before exit; exit 3'], env)
      expect(result.exitCode).toBe(3)
      expect(result.stdout).toBe('before exit\n')
    })

    test('run --wait exits 124 when the task timeout stops it', async () => {
      const result = await runCli(['run', '--wait', '--timeout', '200ms', '--', 'sleep', '30'], env)
      expect(result.exitCode).toBe(124)
      expect(result.stderr).toContain('timed_out')
    })

    test('run --wait of a program that does not exist exits 127 and says why', async () => {
      const result = await runCli(['run', '--wait', '--', 'tend-no-such-program-xyz'], env)
      expect(result.exitCode).toBe(127)
      expect(result.stderr).toContain('no such program: tend-no-such-program-xyz')
    })

    test('run --wait --json prints the finished task as one JSON document', async () => {
      const result = await runCli(['run', '--wait', '--json', '--', 'sh', '-c', 'exit 4'], env)
      expect(result.exitCode).toBe(4)
      expect(JSON.parse(result.stdout)).toMatchObject({ state: 'exited', exitCode: 4 })
    })
  })

  describe('usage errors', () => {
    test.each([
      [['run', '--bogus', '--', 'true'], '--bogus'],
      [['run', '--timeout', 'banana', '--', 'true'], '--timeout'],
      [['run', '--max-output', '12q', '--', 'true'], '--max-output'],
      [['run', '--env', 'NOEQUALS', '--', 'true'], '--env'],
      [['wait', 'aaaaaaaaaaaa', '--timeout', 'soon'], '--timeout'],
      [['logs', 'aaaaaaaaaaaa', '--tail', 'x'], '--tail'],
      [['ps', '--bogus'], '--bogus'],
    ])('tend %j exits 2 and names %s', async (args, flag) => {
      const before = (await daemon.client.list({ all: true })).length
      const result = await runCli(args, env)
      expect(result.exitCode).toBe(2)
      expect(result.stderr).toContain(flag)
      expect(result.stdout).toBe('')
      expect((await daemon.client.list({ all: true })).length).toBe(before)
    })

    test('a bad value is quoted in the message', async () => {
      const result = await runCli(['run', '--timeout', 'banana', '--', 'true'], env)
      expect(result.stderr).toContain('banana')
    })

    test('run with nothing to run exits 2 and says so', async () => {
      const result = await runCli(['run'], env)
      expect(result.exitCode).toBe(2)
      expect(result.stderr).toContain('nothing to run')
    })

    test('an unknown command exits 2', async () => {
      const result = await runCli(['frobnicate'], env)
      expect(result.exitCode).toBe(2)
      expect(result.stderr).toContain('frobnicate')
    })
  })

  describe('kill and wait', () => {
    test('wait on a task killed with TERM exits 128+15', async () => {
      const task = await startSleeper()
      const waiting = runCli(['wait', task.id], env)
      const killed = await runCli(['kill', task.id], env)
      expect(killed.exitCode).toBe(0)
      expect(killed.stdout).toContain(task.id)
      expect(killed.stdout).toContain('killed')
      const waited = await waiting
      expect(waited.exitCode).toBe(143)
      expect(waited.stderr).toContain('killed')
    })

    test('kill --signal KILL ends a task with 128+9', async () => {
      const task = await startSleeper()
      const killed = await runCli(['kill', task.id, '--signal', 'KILL', '--json'], env)
      expect(killed.exitCode).toBe(0)
      expect(JSON.parse(killed.stdout)).toMatchObject({ id: task.id, state: 'killed', signal: 'SIGKILL' })
      expect((await runCli(['wait', task.id], env)).exitCode).toBe(137)
    })

    test('wait --timeout on a task that keeps running exits 75 and leaves it running', async () => {
      const task = await startSleeper()
      try {
        const result = await runCli(['wait', task.id, '--timeout', '100ms'], env)
        expect(result.exitCode).toBe(75)
        expect(result.stderr).toContain('still running')
        expect((await daemon.client.get(task.id)).state).toBe('running')
      } finally {
        await daemon.client.kill(task.id)
      }
    })

    test('wait on a finished task exits with its code at once', async () => {
      const task = await finishedTask('exit 5')
      expect((await runCli(['wait', task.id], env)).exitCode).toBe(5)
    })
  })

  describe('ps and show', () => {
    test('ps shows running tasks in a table with the documented header', async () => {
      const task = await startSleeper('a sleeper')
      try {
        const result = await runCli(['ps'], env)
        expect(result.exitCode).toBe(0)
        const [header, ...rows] = result.stdout.trimEnd().split('\n')
        expect(header!.split(/\s+/)).toEqual(['ID', 'STATE', 'EXIT', 'AGE', 'CPU', 'MEM', 'OUTPUT', 'OWNER', 'COMMAND'])
        const row = rows.find((line) => line.startsWith(task.id))
        expect(row, result.stdout).toBeDefined()
        expect(row).toMatch(/\brunning\b/)
        expect(row).toContain('operator')
        expect(row).toMatch(/a sleeper$/)
      } finally {
        await daemon.client.kill(task.id)
      }
    })

    test('ps --all --json prints one JSON array that includes finished tasks', async () => {
      const finished = await finishedTask('echo listed')
      const result = await runCli(['ps', '--all', '--json'], env)
      expect(result.exitCode).toBe(0)
      const tasks = JSON.parse(result.stdout) as Task[]
      expect(Array.isArray(tasks)).toBe(true)
      expect(tasks.find((task) => task.id === finished.id)).toMatchObject({ state: 'exited', exitCode: 0 })
      const running = JSON.parse((await runCli(['ps', '--json'], env)).stdout) as Task[]
      expect(running.map((task) => task.id)).not.toContain(finished.id)
    })

    test('ps shows what each task uses now (CPU %, memory) and what a finished one used (CPU time, peak); --json carries live and usage', async () => {
      const task = await startSleeper('a measured sleeper')
      const finished = await finishedTask('echo measured')
      try {
        const result = await runCli(['ps', '--all'], env)
        const cells = (id: string) =>
          result.stdout
            .split('\n')
            .find((line) => line.startsWith(id))!
            .split(/\s+/)
        // ID STATE EXIT AGE CPU MEM: a sleeper uses no CPU and some memory now.
        expect(cells(task.id).slice(4, 6), result.stdout).toEqual([expect.stringMatching(/^\d+%$/), expect.stringMatching(/^\d+(\.\d)?[BKMG]$/)])
        expect(cells(finished.id).slice(4, 6), result.stdout).toEqual([expect.stringMatching(/^\d+(ms|s|\.\ds)$/), expect.stringMatching(/^\d+(\.\d)?[BKMG]$/)])
        const listed = JSON.parse((await runCli(['ps', '--all', '--json'], env)).stdout) as Task[]
        expect(listed.find((each) => each.id === task.id)?.live).toMatchObject({ cpuPercent: expect.any(Number), memoryBytes: expect.any(Number) })
        expect(listed.find((each) => each.id === finished.id)?.usage).toMatchObject({ source: 'rusage' })
        expect(listed.find((each) => each.id === finished.id)).not.toHaveProperty('live')
      } finally {
        await daemon.client.kill(task.id)
      }
    })

    test('show prints what a finished task used and what a running one uses now', async () => {
      const finished = await finishedTask('echo used')
      const shown = await runCli(['show', finished.id], env)
      expect(shown.stdout).toMatch(/^used: +CPU \d+(\.\d)? m?s .*, peak \d+(\.\d)? [KMG]iB \(largest process\), read .+, written .+$/m)
      const task = await startSleeper('a shown sleeper')
      try {
        const running = await runCli(['show', task.id], env)
        expect(running.stdout).toMatch(/^now: +CPU \d+(\.\d)?%, memory \d+(\.\d)? [KMG]iB$/m)
        expect(JSON.parse((await runCli(['show', task.id, '--json'], env)).stdout).live).toMatchObject({ memoryBytes: expect.any(Number) })
      } finally {
        await daemon.client.kill(task.id)
      }
    })

    test("ps --owner lists only that owner's tasks", async () => {
      const mine = await daemon.client.start({ command: ['true'], owner: 'only-me' })
      await daemon.client.wait(mine.id)
      const tasks = JSON.parse((await runCli(['ps', '--all', '--owner', 'only-me', '--json'], env)).stdout) as Task[]
      expect(tasks.map((task) => task.id)).toEqual([mine.id])
    })

    test('show ID --json prints the task', async () => {
      const finished = await finishedTask('echo shown')
      const result = await runCli(['show', finished.id, '--json'], env)
      expect(result.exitCode).toBe(0)
      expect(JSON.parse(result.stdout)).toEqual(await daemon.client.get(finished.id))
    })

    test('show ID prints the task for people, with its spool folder', async () => {
      const finished = await finishedTask('exit 2')
      const result = await runCli(['show', finished.id], env)
      expect(result.exitCode).toBe(0)
      expect(result.stdout).toContain(finished.id)
      expect(result.stdout).toContain('exited(2)')
      expect(result.stdout).toContain(finished.spool)
    })

    test('show of an unknown id exits 1 and, with --json, prints the error as one JSON document', async () => {
      const result = await runCli(['show', 'zzzzzzzzzzzz', '--json'], env)
      expect(result.exitCode).toBe(1)
      expect(JSON.parse(result.stdout)).toEqual({ error: expect.objectContaining({ code: 'TEND_ERR_TASK_NOT_FOUND', statusCode: 404 }) })
      expect(result.stderr).toContain('task not found: zzzzzzzzzzzz')
    })
  })

  describe('logs', () => {
    let task: Task
    const output = 'one\ntwo\nthree\n'

    beforeAll(async () => {
      task = await finishedTask("printf 'one\\ntwo\\nthree\\n'")
    })

    test('logs ID prints the raw output', async () => {
      expect(await runCli(['logs', task.id], env)).toEqual({ exitCode: 0, stdout: output, stderr: '' })
    })

    test('logs ID --tail 2 prints the last two lines', async () => {
      expect((await runCli(['logs', task.id, '--tail', '2'], env)).stdout).toBe('two\nthree\n')
    })

    test('logs ID --from N starts at byte N', async () => {
      expect((await runCli(['logs', task.id, '--from', '4'], env)).stdout).toBe('two\nthree\n')
    })

    test('logs ID --json answers {data, from, next, done, truncated}', async () => {
      const result = await runCli(['logs', task.id, '--json'], env)
      expect(result.exitCode).toBe(0)
      expect(JSON.parse(result.stdout)).toMatchObject({ data: output, from: 0, next: output.length, done: true, truncated: false })
      const fromFour = JSON.parse((await runCli(['logs', task.id, '--from', '8', '--json'], env)).stdout)
      expect(fromFour).toMatchObject({ data: 'three\n', from: 8, next: output.length, done: true })
    })

    test('logs of binary output is copied byte for byte', async () => {
      const binary = await daemon.client.start({ command: ['node', join(REPO_ROOT, 'test', 'fixtures', 'write-bytes.mjs'), '70000'] })
      const ended = await daemon.client.wait(binary.id)
      const result = await execa(process.execPath, [TEND_BIN, 'logs', binary.id], { env, extendEnv: false, encoding: 'buffer', stripFinalNewline: false })
      expect(Buffer.compare(Buffer.from(result.stdout), readFileSync(join(ended.spool, 'output.log')))).toBe(0)
    })

    test('logs -f streams output as it is written and returns when the task ends', async () => {
      const gate = join(daemon.home, 'follow-gate')
      const started = await daemon.client.start({ command: `echo first; while [ ! -e '${gate}' ]; do sleep 0.02; done; echo last`, shell: true })
      const follower = startCli(['logs', '-f', started.id], env)
      await waitFor('logs -f to print the first line while the task still runs', () => follower.stdout() === 'first\n')
      expect((await daemon.client.get(started.id)).state).toBe('running')
      writeFileSync(gate, '')
      const result = await follower.subprocess
      expect(result.exitCode).toBe(0)
      expect(follower.stdout()).toBe('first\nlast\n')
    })
  })

  describe('rm, gc and status', () => {
    test('rm of an unknown id exits 1 and names it', async () => {
      const result = await runCli(['rm', 'zzzzzzzzzzzz'], env)
      expect(result.exitCode).toBe(1)
      expect(result.stderr).toContain('zzzzzzzzzzzz')
    })

    test('rm of a finished task removes it; of a running one exits 1 and keeps it', async () => {
      const finished = await finishedTask('true')
      const running = await startSleeper()
      try {
        const result = await runCli(['rm', finished.id, running.id], env)
        expect(result.exitCode).toBe(1)
        expect(result.stdout).toContain(`removed ${finished.id}`)
        expect(result.stderr).toContain(running.id)
        expect((await daemon.client.get(running.id)).state).toBe('running')
        expect((await daemon.client.list({ all: true })).map((task) => task.id)).not.toContain(finished.id)
      } finally {
        await daemon.client.kill(running.id)
      }
    })

    test('gc --older-than 0s --json removes every finished task and says which', async () => {
      const finished = await finishedTask('echo collect me')
      const result = await runCli(['gc', '--older-than', '0s', '--json'], env)
      expect(result.exitCode).toBe(0)
      const answer = JSON.parse(result.stdout) as { removed: string[]; freedBytes: number }
      expect(answer.removed).toContain(finished.id)
      expect(answer.freedBytes).toBeGreaterThan(0)
      expect(await daemon.client.list({ all: true })).toEqual([])
    })

    test('status --json has the daemon pid, version and socket', async () => {
      const result = await runCli(['status', '--json'], env)
      expect(result.exitCode).toBe(0)
      expect(JSON.parse(result.stdout)).toMatchObject({ pid: daemon.process.pid, version: VERSION, socket: join(daemon.home, 'tend.sock') })
    })

    test('a second tend daemon on the same home exits 3 and says another daemon is running', async () => {
      const result = await runCli(['daemon'], env)
      expect(result.exitCode).toBe(3)
      expect(result.stderr).toContain('another daemon is already running')
      expect(result.stderr).toContain(String(daemon.process.pid))
      expect(daemonsOf(daemon.home)).toEqual([daemon.process.pid])
      expect((await daemon.client.status()).pid).toBe(daemon.process.pid)
    })
  })
})

describe('tend stop', () => {
  test('stops the daemon, which then exits', async () => {
    const daemon = await startTestDaemon()
    try {
      const running = await daemon.client.start({ command: ['sleep', '600'] })
      const result = await runCli(['stop'], daemon.env)
      expect(result.exitCode).toBe(0)
      expect(result.stdout).toContain(`daemon stopped (pid ${daemon.process.pid})`)
      await waitFor('the test daemon process to exit', () => daemon.process.exitCode !== null || daemon.process.signalCode !== null)
      expect(daemon.process.exitCode).toBe(0)
      const record = JSON.parse(readFileSync(join(running.spool, 'task.json'), 'utf8')) as Task
      expect(['killed', 'failed']).toContain(record.state)
      // A second stop finds nothing to stop, and does not start a daemon to stop it.
      const again = await runCli(['stop'], daemon.env)
      expect(again.exitCode).toBe(0)
      expect(again.stdout).toContain('no daemon running')
      expect(daemonsOf(daemon.home)).toEqual([])
    } finally {
      await daemon.stop()
    }
  })
})

describe('tend stop with a daemon nobody reaps', () => {
  test('returns once the daemon has exited, even while its parent has not reaped it', async () => {
    const home = createTempHome()
    const env = daemonEnv(home)
    // A parent that never waits for its children (as init in many containers): the daemon that
    // exits stays a zombie, which still answers kill(pid, 0), until this parent goes.
    const parent = spawn('sh', ['-c', `'${process.execPath}' '${TEND_BIN}' daemon 2>/dev/null & exec sleep 600`], { env, stdio: 'ignore' })
    const parentExited = new Promise((resolveExit) => parent.once('exit', resolveExit))
    try {
      await waitFor(`a daemon answering on ${home}`, () => socketAnswers(join(home, 'tend.sock')))
      const result = await runCli(['stop'], env, { timeoutMs: 20_000 })
      expect(result.stdout).toContain('daemon stopped')
      expect(result.exitCode).toBe(0)
    } finally {
      parent.kill('SIGKILL')
      await parentExited
      await assertNothingLeft(home)
      rmSync(home, { recursive: true, force: true })
    }
  })
})

describe('without a running daemon', () => {
  test('tend run --wait starts a daemon, prints the output and exits 0 (default sandbox)', async () => {
    const home = createTempHome()
    const { TEND_SANDBOX: _testDefault, ...env } = daemonEnv(home)
    try {
      const result = await runCli(['run', '--wait', '--', 'echo', 'hello'], env)
      expect(result).toMatchObject({ exitCode: 0, stdout: 'hello\n' })
      const [task] = JSON.parse((await runCli(['ps', '--all', '--json'], env)).stdout)
      expect(task.sandbox).toBe('workspace')
      expect(daemonsOf(home)).toHaveLength(1)
      const stopped = await runCli(['stop'], env)
      expect(stopped.exitCode).toBe(0)
      await assertNothingLeft(home)
    } finally {
      await assertNothingLeft(home)
      rmSync(home, { recursive: true, force: true })
    }
  })

  test('two CLI processes racing to start a daemon leave exactly one', async () => {
    const home = createTempHome()
    const env = daemonEnv(home)
    try {
      const results = await Promise.all([runCli(['status', '--json'], env), runCli(['status', '--json'], env)])
      for (const result of results) expect(result.exitCode, result.stderr).toBe(0)
      const pids = results.map((result) => (JSON.parse(result.stdout) as { pid: number }).pid)
      expect(pids[0]).toBe(pids[1])
      const daemons = await waitFor(`exactly one daemon of ${home} (now ${daemonsOf(home).join(', ')})`, () => {
        const found = daemonsOf(home)
        return found.length === 1 ? found : null
      })
      expect(daemons).toEqual([pids[0]])
      const stopped = await runCli(['stop'], env)
      expect(stopped.exitCode).toBe(0)
      await assertNothingLeft(home)
    } finally {
      await assertNothingLeft(home)
      rmSync(home, { recursive: true, force: true })
    }
  })
})
