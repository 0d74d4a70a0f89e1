import { describe, expect, test } from 'vitest'
import { execa } from 'execa'
import { request as httpRequest, Agent, type IncomingMessage } from 'node:http'
import { existsSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pluginPerFile } from '../harness/plugin-per-file.js'
import { callTool, TestAgent, textOf } from '../harness/host.js'
import { rawRequest } from '../helpers/raw-http.js'
import { createTempHome, daemonEnv, killEverythingOf, startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { settlesWithin, waitFor } from '../helpers/wait-for.js'

/*
 * Issue 25, findings 9 to 12: what a task may do to its own spool files (and to its own keeper),
 * even under `off`: replace them, cut them back, write characters in pieces, stop its keeper.
 */

const PYTHON = '/usr/bin/python3'

const shared = pluginPerFile('own-spool-files', { outputBudgetBytes: 4000 })
const socketOf = () => join(shared.daemon.home, 'tend.sock')

/** Size of a running task's output.log as the daemon reads it. */
async function outputBytes(id: string): Promise<number> {
  return (await shared.daemon.client.read(id, { maxBytes: 1 })).outputBytes
}

/** What a task under `off` finds of its spool folder: TEND_HOME and its id are in its environment. */
const FOLDER = '"$TEND_HOME/spool/$TEND_TASK_ID"'

/** A file of the daemon's that no task may read or change through tend (beside the spool: a hard link can reach it). */
function victim(name: string): string {
  const file = join(shared.daemon.home, name)
  writeFileSync(file, 'SECRET\n', { mode: 0o600 })
  return file
}

/** Rejects, naming what was awaited, when the promise has not settled within timeoutMs. */
async function within<T>(what: string, promise: Promise<T>, timeoutMs = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs}ms waiting for ${what}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** A shell line that waits until `file` exists (the test makes it when it has seen what came before). */
const waitForFile = (file: string) => `while [ ! -e ${file} ]; do sleep 0.02; done`

describe('finding 11: UTF-8 characters written in pieces, read as text while they grow', () => {
  // "café €", its é cut after its first byte and its € after its second.
  const script = (dir: string) =>
    `printf 'caf\\303'; ${waitForFile(join(dir, 'go1'))}; printf '\\251 \\342\\202'; ${waitForFile(join(dir, 'go2'))}; printf '\\254\\n'`

  test('tend logs -f --json prints whole characters, never U+FFFD', async () => {
    const dir = shared.workspace
    const go = [join(dir, 'logs-go1'), join(dir, 'logs-go2')]
    const started = await shared.daemon.client.start({ command: script(dir).replaceAll('/go', '/logs-go'), shell: true, cwd: dir, timeoutMs: 30_000 })
    shared.track(started.id)
    const follower = execa(process.execPath, [TEND_BIN, '--json', 'logs', '-f', started.id], {
      env: daemonEnv(shared.daemon.home),
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      timeout: 30_000,
    })
    let printed = ''
    follower.stdout!.on('data', (chunk: Buffer) => (printed += chunk.toString('utf8')))
    const lines = () => printed.split('\n').filter((line) => line !== '')
    await waitFor('the first piece to be printed', () => lines().length >= 1 && (JSON.parse(lines()[0]!) as { data: string }).data.startsWith('caf'))
    writeFileSync(go[0]!, '')
    await waitFor('the second piece to be written', async () => (await outputBytes(started.id)) === 8)
    await waitFor('the second piece to be printed', () => lines().some((line) => (JSON.parse(line) as { data: string }).data.includes(' ')))
    writeFileSync(go[1]!, '')
    const result = await follower
    expect(result.exitCode, result.stderr).toBe(0)
    const text = lines()
      .map((line) => (JSON.parse(line) as { data: string }).data)
      .join('')
    expect(text).toBe('café €\n')
  })

  test('utf8 reads of the output route stop before a character the growing end cuts, and a long-poll waits for the rest of it', async () => {
    const dir = shared.workspace
    const started = await shared.daemon.client.start({ command: script(dir).replaceAll('/go', '/route-go'), shell: true, cwd: dir, timeoutMs: 30_000 })
    shared.track(started.id)
    const client = shared.daemon.client
    await waitFor('the first piece to be written', async () => (await outputBytes(started.id)) === 4)
    expect(await client.read(started.id)).toMatchObject({ data: 'caf', from: 0, next: 3, truncated: false, done: false })
    // Only the first byte of é is there: the long-poll waits for the rest instead of answering at once.
    const polled = client.read(started.id, { from: 3, waitMs: 20_000 })
    writeFileSync(join(dir, 'route-go1'), '')
    expect(await polled).toMatchObject({ data: 'é ', from: 3, next: 6 })
    writeFileSync(join(dir, 'route-go2'), '')
    await client.wait(started.id, { timeoutMs: 20_000 })
    expect(await client.read(started.id, { from: 6 })).toMatchObject({ data: '€\n', next: 10, done: true })
  })

  test('task_output hands the model whole characters, never U+FFFD', async () => {
    const dir = shared.workspace
    const agent = new TestAgent('utf8-tool')
    const started = await callTool(shared.host, agent, {
      name: 'bash',
      arguments: { command: script(dir).replaceAll('/go', '/tool-go'), run_in_background: true },
    })
    const id = /Started background task ([0-9a-z]{12})/.exec(textOf(started))![1]!
    shared.track(id)
    const seen: string[] = []
    const read = async () => {
      const result = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } })
      expect(result.isError, textOf(result)).toBe(false)
      seen.push((result.meta as { output: string }).output)
    }
    await waitFor('the first piece to be written', async () => (await outputBytes(id)) === 4)
    await read()
    writeFileSync(join(dir, 'tool-go1'), '')
    await waitFor('the second piece to be written', async () => (await outputBytes(id)) === 8)
    await read()
    writeFileSync(join(dir, 'tool-go2'), '')
    await waitFor('the task to end', async () => (await shared.daemon.client.get(id)).state === 'exited')
    await read()
    for (const text of seen) expect(text).not.toContain('\ufffd')
    expect(seen.join('')).toBe('café €\n')
  })
})

/**
 * A GET of the download route, answered once its head is in (its body is left unread). On a
 * kept-alive connection, as browsers and curl make them: the end of a body is then only what
 * Content-Length says, not the connection closing.
 */
function download(agent: Agent, path: string, headers: Record<string, string> = {}): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath: socketOf(), agent, method: 'GET', path, headers }, resolve)
    req.on('error', reject)
    req.end()
  })
}

/** The whole body of a download answer, or how it ended short: never waits past timeoutMs. */
function bodyOf(res: IncomingMessage, timeoutMs: number): Promise<{ bytes: Buffer; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    const timer = setTimeout(() => {
      res.destroy()
      reject(
        new Error(`the download hung: ${parts.reduce((sum, part) => sum + part.length, 0)} of ${res.headers['content-length']} bytes after ${timeoutMs}ms`),
      )
    }, timeoutMs)
    res.on('data', (chunk: Buffer) => parts.push(chunk))
    res.on('end', () => {
      clearTimeout(timer)
      resolve({ bytes: Buffer.concat(parts), complete: res.complete })
    })
    res.on('error', () => {
      clearTimeout(timer)
      resolve({ bytes: Buffer.concat(parts), complete: false })
    })
    res.on('aborted', () => undefined)
    res.on('close', () => {
      clearTimeout(timer)
      resolve({ bytes: Buffer.concat(parts), complete: res.complete })
    })
    res.resume()
  })
}

describe('finding 10: downloads of output.log', () => {
  test('Range is honoured: 206 with Content-Range, a suffix range, 416 past the end, Accept-Ranges', async () => {
    const started = await shared.daemon.client.start({ command: "printf '0123456789abcdef'", shell: true, cwd: shared.workspace })
    shared.track(started.id)
    await shared.daemon.client.wait(started.id, { timeoutMs: 20_000 })
    const path = `/v1/tasks/${started.id}/output.log`
    const whole = await rawRequest(socketOf(), { method: 'GET', path })
    expect(whole).toMatchObject({ status: 200, text: '0123456789abcdef', headers: { 'accept-ranges': 'bytes', 'content-length': '16' } })
    const middle = await rawRequest(socketOf(), { method: 'GET', path, headers: { range: 'bytes=4-9' } })
    expect(middle).toMatchObject({ status: 206, text: '456789', headers: { 'content-range': 'bytes 4-9/16', 'content-length': '6', 'accept-ranges': 'bytes' } })
    const open = await rawRequest(socketOf(), { method: 'GET', path, headers: { range: 'bytes=10-' } })
    expect(open).toMatchObject({ status: 206, text: 'abcdef', headers: { 'content-range': 'bytes 10-15/16' } })
    const suffix = await rawRequest(socketOf(), { method: 'GET', path, headers: { range: 'bytes=-3' } })
    expect(suffix).toMatchObject({ status: 206, text: 'def', headers: { 'content-range': 'bytes 13-15/16' } })
    const clipped = await rawRequest(socketOf(), { method: 'GET', path, headers: { range: 'bytes=14-99' } })
    expect(clipped).toMatchObject({ status: 206, text: 'ef', headers: { 'content-range': 'bytes 14-15/16' } })
    const past = await rawRequest(socketOf(), { method: 'GET', path, headers: { range: 'bytes=16-' } })
    expect(past).toMatchObject({ status: 416, headers: { 'content-range': 'bytes */16' } })
    // What is not one byte range it can serve is answered whole (RFC 9110 lets a server ignore Range).
    for (const range of ['bytes=0-1,4-5', 'lines=1-2', 'bytes=5-2', 'bytes=x-']) {
      expect(await rawRequest(socketOf(), { method: 'GET', path, headers: { range } }), range).toMatchObject({ status: 200, text: '0123456789abcdef' })
    }
  })

  test('output.log cut back during a download: the download ends at once, short, never hangs', async () => {
    // 48 MiB: far more than the socket buffers, so most of it is still unread when it is cut back.
    const started = await shared.daemon.client.start({ command: 'head -c 48M /dev/zero', shell: true, cwd: shared.workspace })
    shared.track(started.id)
    const task = await shared.daemon.client.wait(started.id, { timeoutMs: 20_000 })
    expect(task).toMatchObject({ state: 'exited', exitCode: 0, outputBytes: 48 * 1024 * 1024 })
    const agent = new Agent({ keepAlive: true })
    for (const headers of [{}, { range: 'bytes=1024-' }] as Array<Record<string, string>>) {
      const res = await download(agent, `/v1/tasks/${started.id}/output.log`, headers)
      expect(res.headers.connection).toBe('keep-alive')
      expect(res.statusCode).toBe('range' in headers ? 206 : 200)
      const announced = Number(res.headers['content-length'])
      res.pause()
      // The task (or anyone with its stdout) cuts its output back while the download is underway.
      truncateSync(join(task.spool, 'output.log'), 10 * 1024 * 1024)
      const body = await bodyOf(res, 10_000)
      expect(body.complete).toBe(false)
      expect(body.bytes.length).toBeLessThan(announced)
      // Restore the size for the second round.
      truncateSync(join(task.spool, 'output.log'), 48 * 1024 * 1024)
    }
    agent.destroy()
    // The daemon still serves.
    expect((await shared.daemon.client.get(started.id)).state).toBe('exited')
  })
})

describe('finding 10: output.log cut back under a follower', () => {
  test('tend logs -f says so and reads it again from the start, instead of waiting for bytes past its old end', async () => {
    const dir = shared.workspace
    const started = await shared.daemon.client.start({
      // The task cuts its own stdout back (as a log rotation would), then writes on.
      command: `echo 'a first line, longer than what follows'; ${waitForFile(join(dir, 'cut-go1'))}; ${PYTHON} -c 'import os; os.ftruncate(1, 0)'; echo 2nd; ${waitForFile(join(dir, 'cut-go2'))}`,
      shell: true,
      cwd: dir,
      timeoutMs: 30_000,
    })
    shared.track(started.id)
    const follower = execa(process.execPath, [TEND_BIN, 'logs', '-f', started.id], {
      env: daemonEnv(shared.daemon.home),
      extendEnv: false,
      reject: false,
      stdin: 'ignore',
      timeout: 30_000,
    })
    let printed = ''
    let said = ''
    follower.stdout!.on('data', (chunk: Buffer) => (printed += chunk.toString('utf8')))
    follower.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString('utf8')))
    await waitFor('the first line to be printed', () => printed.includes('longer than what follows\n'))
    writeFileSync(join(dir, 'cut-go1'), '')
    // The task still runs: what it wrote after the cut is shown now, not at its end.
    await waitFor('what was written after the cut to be printed', () => printed.endsWith('2nd\n'), 15_000)
    expect(said).toMatch(/cut back/)
    expect((await shared.daemon.client.get(started.id)).state).toBe('running')
    writeFileSync(join(dir, 'cut-go2'), '')
    const result = await follower
    expect(result.exitCode, result.stderr).toBe(0)
    expect(printed).toBe('a first line, longer than what follows\n2nd\n')
  })

  test('task_output reads a cut-back output again from its start, instead of waiting past its old end', async () => {
    const dir = shared.workspace
    const agent = new TestAgent('cut-back-tool')
    const started = await shared.daemon.client.start({
      command: `echo 'a first line, longer than what follows'; ${waitForFile(join(dir, 'tool-cut-go1'))}; ${PYTHON} -c 'import os; os.ftruncate(1, 0)'; echo 2nd; ${waitForFile(join(dir, 'tool-cut-go2'))}`,
      shell: true,
      cwd: dir,
      owner: 'cut-back-tool',
      timeoutMs: 30_000,
    })
    shared.track(started.id)
    const read = async (args: Record<string, unknown> = {}) => {
      const result = await callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: started.id, ...args } })
      expect(result.isError, textOf(result)).toBe(false)
      return (result.meta as { output: string }).output
    }
    await waitFor('the first line', async () => (await outputBytes(started.id)) > 0)
    expect(await read()).toBe('a first line, longer than what follows\n')
    writeFileSync(join(dir, 'tool-cut-go1'), '')
    await waitFor('the cut and what follows it', async () => (await outputBytes(started.id)) === 4)
    // Answered, not held for its 20 s wait: nothing is waited for past an end that is gone.
    expect(await settlesWithin('task_output to answer before its 20 s wait', read({ wait_ms: 20_000 }), 10_000)).toBe('2nd\n')
    writeFileSync(join(dir, 'tool-cut-go2'), '')
  })
})

describe('finding 12: a terminal task whose keeper is stopped', () => {
  test('a resize flood gets a retryable coded error (503, Retry-After) once its pipe is full, never a 500; resizes work again once the keeper runs', async () => {
    const started = await shared.daemon.client.start({ command: ['sleep', '120'], tty: true, cwd: shared.workspace })
    shared.track(started.id)
    const running = await waitFor('the task to run', async () => {
      const task = await shared.daemon.client.get(started.id)
      return task.state === 'running' && task.keeper ? task : undefined
    })
    const keeper = running.keeper!.pid
    process.kill(keeper, 'SIGSTOP')
    try {
      const agent = new Agent({ keepAlive: true, maxSockets: 16 })
      const resize = (n: number) =>
        rawRequest(socketOf(), {
          method: 'POST',
          path: `/v1/tasks/${started.id}/resize`,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ cols: 10_000 - (n % 9000), rows: 10_000 }),
          agent,
          timeoutMs: 30_000,
        })
      let refused: Awaited<ReturnType<typeof resize>> | undefined
      // A pipe holds 64 KiB, a resize line 12 bytes: ~5,500 of them fill it.
      for (let sent = 0; sent < 12_000 && !refused; sent += 50) {
        const answers = await Promise.all(Array.from({ length: 50 }, (_, n) => resize(sent + n)))
        for (const answer of answers) expect([200, 503], answer.text).toContain(answer.status)
        refused = answers.find((answer) => answer.status !== 200)
      }
      agent.destroy()
      expect(refused, 'no resize was refused while the keeper was stopped').toBeDefined()
      expect(JSON.parse(refused!.text)).toMatchObject({ code: 'TEND_ERR_TERMINAL_BUSY', retryable: true })
      expect(Number(refused!.headers['retry-after'])).toBeGreaterThanOrEqual(1)
      // stdin to the same stopped keeper: a coded retryable error too.
      const input = await shared.daemon.client.input(started.id, Buffer.alloc(256 * 1024, 'x')).then(
        () => null,
        (error: unknown) => error as { code: string; retryable: boolean },
      )
      expect(input).toMatchObject({ code: 'TEND_ERR_STDIN_FULL', retryable: true })
    } finally {
      process.kill(keeper, 'SIGCONT')
    }
    await waitFor('a resize to be taken again', () =>
      shared.daemon.client.resize(started.id, { cols: 90, rows: 30 }).then(
        () => true,
        () => false,
      ),
    )
    expect((await shared.daemon.client.get(started.id)).tty).toEqual({ cols: 90, rows: 30 })
    expect(existsSync(join(running.spool, 'resize.fifo'))).toBe(true)
  })
})

describe('finding 9: a task under off replaces its own spool files', () => {
  // What output.log becomes; each is read, tailed, downloaded and read by task_output.
  const outputPlants: Array<[string, (secret: string) => string]> = [
    ['a hard link to a file of the daemon', (secret) => `ln -f ${secret} ${FOLDER}/output.log`],
    ['a symbolic link to a file of the daemon', (secret) => `ln -sf ${secret} ${FOLDER}/output.log`],
    ['a symbolic link to /etc/shadow', () => `ln -sf /etc/shadow ${FOLDER}/output.log`],
    ['a folder', () => `rm -f ${FOLDER}/output.log && mkdir ${FOLDER}/output.log`],
  ]
  for (const [what, plant] of outputPlants) {
    test(`output.log as ${what}: readers get the task's own output while it runs, a coded error once it has ended, never what is planted`, async () => {
      const secret = victim(`victim-output-${outputPlants.findIndex(([name]) => name === what)}`)
      const dir = shared.workspace
      const release = join(dir, `release-output-${secret.slice(-1)}`)
      const owner = `plant-output-${secret.slice(-1)}`
      const agent = new TestAgent(owner)
      const started = await shared.daemon.client.start({
        command: `echo mine; ${plant(secret)} && echo planted > ${release}.planted; ${waitForFile(release)}`,
        shell: true,
        cwd: dir,
        sandbox: 'off',
        owner,
        timeoutMs: 30_000,
      })
      const id = shared.track(started.id)
      await waitFor('the task to plant its output.log', () => existsSync(`${release}.planted`), 20_000)
      const client = shared.daemon.client
      const download = () => rawRequest(socketOf(), { method: 'GET', path: `/v1/tasks/${id}/output.log`, timeoutMs: 10_000 })
      // Running: the file its keeper writes, held by the daemon, whatever is at the name.
      const running = await within(
        'the reads of the running task',
        Promise.all([client.read(id), client.read(id, { tail: 5 }), client.read(id, { encoding: 'base64' })]),
      )
      expect(running.map((read) => Buffer.from(read.data, read.encoding === 'base64' ? 'base64' : 'utf8').toString())).toEqual(['mine\n', 'mine\n', 'mine\n'])
      expect(await download()).toMatchObject({ status: 200, text: 'mine\n' })
      const tool = await within('task_output', callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id } }))
      expect((tool.meta as { output: string }).output).toBe('mine\n')
      writeFileSync(release, '')
      const ended = await within('the task to end', client.wait(id, { timeoutMs: 20_000 }), 25_000)
      expect(ended).toMatchObject({ state: 'exited', exitCode: 0 })
      // Ended: read by its name again, where nothing but a file of its own is read.
      const answers = await within(
        'the reads of the planted output.log',
        Promise.allSettled([client.read(id), client.read(id, { tail: 5 }), client.read(id, { encoding: 'base64' })]),
      )
      for (const answer of answers) expect(answer).toMatchObject({ status: 'rejected', reason: { code: 'TEND_ERR_OUTPUT_MISSING' } })
      const after = await download()
      expect(after.status).toBe(410)
      expect(after.text).not.toContain('SECRET')
      const late = await within('task_output', callTool(shared.host, agent, { name: 'task_output', arguments: { task_id: id, from: 0 } }))
      expect(textOf(late)).not.toContain('SECRET')
      expect(textOf(late)).not.toContain('root:')
      expect(readFileSync(secret, 'utf8')).toBe('SECRET\n')
    })
  }

  test('output.log made nameless and a new file put at its name: the cap still counts what the task writes, and readers read it', async () => {
    const dir = shared.workspace
    const started = await shared.daemon.client.start({
      // Its stdout still writes the file it had; a new empty one is at the name.
      command: `echo before; rm -f ${FOLDER}/output.log && : > ${FOLDER}/output.log && echo after && touch ${join(dir, 'nameless.planted')} && ${waitForFile(join(dir, 'nameless.go'))} && head -c 64M /dev/zero; sleep 30`,
      shell: true,
      cwd: dir,
      sandbox: 'off',
      maxOutputBytes: 1024 * 1024,
      timeoutMs: 60_000,
    })
    shared.track(started.id)
    await waitFor('the task to replace its output.log', () => existsSync(join(dir, 'nameless.planted')), 20_000)
    expect((await shared.daemon.client.read(started.id)).data).toBe('before\nafter\n')
    writeFileSync(join(dir, 'nameless.go'), '')
    const ended = await shared.daemon.client.wait(started.id, { timeoutMs: 20_000 })
    expect(ended).toMatchObject({ state: 'killed', stoppedBy: 'output-cap' })
  })

  // What input.fifo and resize.fifo become: the daemon must answer with a coded error, never write there, never a 500.
  const pipePlants: Array<[string, (file: string) => string]> = [
    ['a regular file', (file) => `rm -f ${file} && echo x > ${file}`],
    ['a symbolic link', (file) => `rm -f ${file} && ln -s /dev/null ${file}`],
    ['a folder', (file) => `rm -f ${file} && mkdir ${file}`],
    ['nothing', (file) => `rm -f ${file}`],
  ]
  for (const [what, plant] of pipePlants) {
    test(`the keeper's FIFOs replaced by ${what}: input and resize answer a coded 4xx error, never a 500`, async () => {
      const dir = shared.workspace
      const marker = join(dir, `pipes-planted-${pipePlants.findIndex(([name]) => name === what)}`)
      const started = await shared.daemon.client.start({
        command: `${plant(`${FOLDER}/input.fifo`)} && ${plant(`${FOLDER}/resize.fifo`)} && touch ${marker}; exec sleep 60`,
        shell: true,
        cwd: dir,
        sandbox: 'off',
        tty: true,
        timeoutMs: 30_000,
      })
      shared.track(started.id)
      await waitFor('the task to replace its FIFOs', () => existsSync(marker), 20_000)
      const post = (path: string, body: unknown) =>
        rawRequest(socketOf(), {
          method: 'POST',
          path: `/v1/tasks/${started.id}/${path}`,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      for (const answer of [await post('input', { text: 'hello' }), await post('resize', { cols: 100, rows: 40 })]) {
        expect(answer.status, answer.text).toBeGreaterThanOrEqual(400)
        expect(answer.status, answer.text).toBeLessThan(500)
        expect(JSON.parse(answer.text).code, answer.text).toMatch(/^TEND_ERR_/)
      }
    })
  }

  test('input.log as a hard link to a file of the daemon: the input reaches the task, the file is never written', async () => {
    const secret = victim('victim-input')
    const dir = shared.workspace
    const release = join(dir, 'release-input')
    const started = await shared.daemon.client.start({
      command: `ln -f ${secret} ${FOLDER}/input.log && touch ${release}.planted; cat > ${join(dir, 'input-read')}`,
      shell: true,
      cwd: dir,
      sandbox: 'off',
      stdin: 'pipe',
      timeoutMs: 30_000,
    })
    shared.track(started.id)
    await waitFor('the task to plant its input.log', () => existsSync(`${release}.planted`), 20_000)
    await shared.daemon.client.input(started.id, 'hello\n', { eof: true })
    expect(await shared.daemon.client.wait(started.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'exited', exitCode: 0 })
    expect(readFileSync(join(dir, 'input-read'), 'utf8')).toBe('hello\n')
    expect(readFileSync(secret, 'utf8')).toBe('SECRET\n')
  })

  test("the record's temporary names planted as hard links to a file of the daemon: the ending lands, the file is never written", async () => {
    const secret = victim('victim-record')
    const pid = shared.daemon.process.pid!
    // The temporary file of a record is task.json.<daemon pid>-<n>.tmp: every n a task may guess.
    const plant = `${PYTHON} -c 'import os, sys
for n in range(0, 30000): os.link(sys.argv[1], os.path.join(sys.argv[2], "task.json.%s-%d.tmp" % (sys.argv[3], n)))' ${secret} ${FOLDER} ${pid}`
    const started = await shared.daemon.client.start({ command: `${plant} && exit 7`, shell: true, cwd: shared.workspace, sandbox: 'off', timeoutMs: 30_000 })
    shared.track(started.id)
    const ended = await shared.daemon.client.wait(started.id, { timeoutMs: 20_000 })
    expect(ended).toMatchObject({ state: 'exited', exitCode: 7 })
    expect(readFileSync(secret, 'utf8')).toBe('SECRET\n')
    expect(JSON.parse(readFileSync(join(ended.spool, 'task.json'), 'utf8'))).toMatchObject({ state: 'exited', exitCode: 7 })
  })

  test('task.json replaced by a folder that is not empty: the ending is still known, and rm removes the task', async () => {
    const dir = shared.workspace
    const release = join(dir, 'release-record-folder')
    const started = await shared.daemon.client.start({
      command: `until mkdir -p ${FOLDER}/task.json/inside 2>/dev/null; do rm -f ${FOLDER}/task.json; done; touch ${release}.planted; ${waitForFile(release)}; exit 3`,
      shell: true,
      cwd: dir,
      sandbox: 'off',
      timeoutMs: 30_000,
    })
    shared.track(started.id)
    await waitFor('the task to plant its task.json', () => existsSync(`${release}.planted`), 20_000)
    writeFileSync(release, '')
    const ended = await within('the ending', shared.daemon.client.wait(started.id, { timeoutMs: 20_000 }), 25_000)
    expect(ended).toMatchObject({ state: 'exited', exitCode: 3 })
    await within('tend rm', shared.daemon.client.remove(started.id), 15_000)
    expect(existsSync(ended.spool)).toBe(false)
  })
})

describe('finding 9: spool files replaced while no daemon runs', () => {
  test('exit.json and task.json as links, a folder, a socket, a FIFO: the next daemon starts at once, reads none of them, and supervises the tasks again', async () => {
    const home = createTempHome()
    const dir = shared.workspace
    const release = join(dir, 'restart-release')
    // Five tasks at once: more than an owner's default four slots.
    const env = { TEND_PER_OWNER_CONCURRENCY: '8' }
    let first: TestDaemon | undefined = await startTestDaemon({ home, env })
    let second: TestDaemon | undefined
    try {
      // A regular file of the daemon's saying the task exited 42: linked in, it must not be believed.
      const forged = join(home, 'forged-exit.json')
      const plants: Array<[string, string]> = [
        ['exit.json as a symbolic link', `ln -s ${forged} ${FOLDER}/exit.json`],
        ['exit.json as a hard link', `ln ${forged} ${FOLDER}/exit.json`],
        ['exit.json as a folder', `mkdir -p ${FOLDER}/exit.json/inside`],
        ['exit.json as a socket', `${PYTHON} -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' ${FOLDER}/exit.json`],
      ]
      writeFileSync(forged, `{"pid":${process.pid},"exitCode":42,"signal":null,"endedAtMs":${Date.now()}}\n`)
      // Each task plants once its running record has landed (a later record would replace a task.json it planted).
      const plantGo = join(dir, 'restart-plant')
      const planted = (id: string) => `${join(dir, 'restart-planted')}-${id}`
      const start = (plant: string) =>
        first!.client.start({
          command: `${waitForFile(plantGo)}; ${plant} && touch ${join(dir, 'restart-planted')}-$TEND_TASK_ID; ${waitForFile(release)}`,
          shell: true,
          cwd: dir,
          sandbox: 'off',
        })
      const tasks = new Map<string, string>()
      for (const [what, plant] of plants) tasks.set(what, (await start(plant)).id)
      // A task.json the task makes a FIFO: an entry the next daemon quarantines, without waiting on it.
      const fifo = await start(`rm -f ${FOLDER}/task.json && mkfifo ${FOLDER}/task.json`)
      const crashing = first
      for (const id of [...tasks.values(), fifo.id])
        await waitFor(`task ${id} to be recorded running`, async () => (await crashing.client.get(id)).state === 'running', 20_000)
      writeFileSync(plantGo, '')
      for (const id of [...tasks.values(), fifo.id]) await waitFor(`task ${id} to plant its file`, () => existsSync(planted(id)), 20_000)
      await first.crash()
      first = undefined
      second = await within('the next daemon to start', startTestDaemon({ home, env }), 30_000)
      for (const [what, id] of tasks) expect(await second.client.get(id), what).toMatchObject({ state: 'running' })
      expect(await second.client.get(fifo.id)).toMatchObject({ state: 'corrupt', reason: expect.stringContaining('FIFO') })
      writeFileSync(release, '')
      for (const [what, id] of tasks) expect(await second.client.wait(id, { timeoutMs: 20_000 }), what).toMatchObject({ state: 'exited', exitCode: 0 })
    } finally {
      writeFileSync(release, '')
      await killEverythingOf(home)
      await second?.stop()
      if (!second) rmSync(home, { recursive: true, force: true })
    }
  })

  test('output.log made nameless while no daemon runs: the next daemon holds the file the keeper writes, reads it and counts it against the cap', async () => {
    const home = createTempHome()
    const dir = shared.workspace
    const go = [join(dir, 'nameless-restart-go1'), join(dir, 'nameless-restart-go2')]
    let first: TestDaemon | undefined = await startTestDaemon({ home })
    let second: TestDaemon | undefined
    try {
      const started = await first.client.start({
        command: `echo before; ${waitForFile(go[0]!)}; rm -f ${FOLDER}/output.log && : > ${FOLDER}/output.log && echo after && touch ${go[0]}.planted; ${waitForFile(go[1]!)}; head -c 64M /dev/zero; sleep 30`,
        shell: true,
        cwd: dir,
        sandbox: 'off',
        maxOutputBytes: 1024 * 1024,
        timeoutMs: 60_000,
      })
      const crashing = first
      await waitFor('the first line', async () => (await crashing.client.read(started.id)).data === 'before\n', 20_000)
      await first.crash()
      first = undefined
      writeFileSync(go[0]!, '')
      await waitFor('the task to make its output nameless', () => existsSync(`${go[0]}.planted`), 20_000)
      second = await within('the next daemon to start', startTestDaemon({ home }), 30_000)
      expect((await second.client.read(started.id)).data).toBe('before\nafter\n')
      writeFileSync(go[1]!, '')
      expect(await second.client.wait(started.id, { timeoutMs: 20_000 })).toMatchObject({ state: 'killed', stoppedBy: 'output-cap' })
    } finally {
      writeFileSync(go[0]!, '')
      writeFileSync(go[1]!, '')
      await killEverythingOf(home)
      await second?.stop()
      if (!second) rmSync(home, { recursive: true, force: true })
    }
  })
})
