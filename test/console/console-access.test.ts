import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TendClient, type ConsoleInfo } from '../../client/index.js'
import { runCli } from '../helpers/cli.js'
import { openConsole } from '../helpers/console.js'
import { createTempHome, daemonEnv, startTestDaemon, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'
import { freePort } from '../helpers/ports.js'

/*
 * The console's TCP listener, tried as a stranger would: no token, a wrong or revoked one,
 * another site's page in the same browser (Origin, Sec-Fetch-Site), a name rebound to 127.0.0.1
 * (Host), a cookie without Origin on a change, an address beyond loopback in clear text. Real
 * daemons, the real CLI, real TCP and TLS.
 */

interface Answer {
  status: number
  headers: IncomingHttpHeaders
  text: string
}

interface Target {
  port: number
  host?: string
  tls?: { ca: string }
}

/** One request to the listener with exactly these headers (Host included when given). */
function send(target: Target, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const options = {
      host: target.host ?? '127.0.0.1',
      port: target.port,
      method,
      path,
      agent: false,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }) },
    }
    const onResponse = (res: import('node:http').IncomingMessage) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }))
    }
    const req = target.tls ? httpsRequest({ ...options, ca: target.tls.ca }, onResponse) : httpRequest(options, onResponse)
    req.setTimeout(10_000, () => req.destroy(new Error(`no answer to ${method} ${path} within 10 s`)))
    req.on('error', reject)
    if (body !== undefined) req.write(body)
    req.end()
  })
}

const codeOf = (answer: Answer) => (JSON.parse(answer.text) as { code: string }).code

/** No answer carries a CORS grant: the console is for its own page only. */
function expectNoCors(answer: Answer): void {
  expect(Object.keys(answer.headers).filter((name) => name.startsWith('access-control-'))).toEqual([])
}

describe('the console on loopback', () => {
  let daemon: TestDaemon
  let info: ConsoleInfo
  let target: Target
  beforeAll(async () => {
    daemon = await startTestDaemon()
    info = await openConsole(daemon.env)
    target = { port: info.port! }
  })
  afterAll(async () => {
    await daemon?.stop()
  })

  test('tend console prints a URL with a fresh token, binds 127.0.0.1 only, and keeps only a digest of each token, 0600', async () => {
    expect(info).toMatchObject({ listening: true, host: '127.0.0.1', tls: false, origin: `http://127.0.0.1:${info.port}` })
    expect(info.url).toBe(`${info.origin}/?token=${info.token}`)
    // Port 0 is any free port: the one it listens on already.
    const again = await openConsole(daemon.env, '--port', '0')
    expect(again.port, 'the same listener').toBe(info.port)
    expect(again.token).not.toBe(info.token)
    const file = join(daemon.home, 'console-tokens.json')
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const kept = readFileSync(file, 'utf8')
    expect(kept).not.toContain(info.token!)
    expect(kept).not.toContain(again.token!)
    // Another loopback address of this machine: nothing listens there.
    await expect(send({ ...target, host: '127.0.0.2' }, 'GET', '/v1/status')).rejects.toMatchObject({ code: 'ECONNREFUSED' })
    const human = await runCli(['console', '--no-open'], daemon.env)
    expect(human.stdout).toMatch(new RegExp(`^tend console: http://127\\.0\\.0\\.1:${info.port}/\\?token=[A-Za-z0-9_-]{43}\\n`))
  })

  test('without a token the page and the API answer 401; a wrong token too', async () => {
    const page = await send(target, 'GET', '/')
    expect(page.status).toBe(401)
    expect(page.headers['content-type']).toMatch(/^text\/html/)
    expect(page.text).toContain('tend console')
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer wrong-token' },
      { authorization: `Bearer ${info.token}x` },
      { authorization: `Basic ${info.token}` },
      { cookie: `tend_console_${info.port}=made-up` },
    ]
    for (const headers of attempts) {
      const api = await send(target, 'GET', '/v1/status', headers)
      expect(api.status, JSON.stringify(headers)).toBe(401)
      expect(codeOf(api)).toBe('TEND_ERR_UNAUTHORIZED')
      expectNoCors(api)
    }
    expect((await send(target, 'GET', '/?token=not-a-token')).status).toBe(401)
    expect((await send(target, 'GET', '/console/app.js')).status).toBe(401)
  })

  test('the token opens a session: an HttpOnly SameSite=Strict cookie, and the token leaves the address', async () => {
    const opened = await send(target, 'GET', `/?token=${info.token}`)
    expect(opened.status).toBe(303)
    expect(opened.headers.location).toBe('/')
    const [cookie] = opened.headers['set-cookie'] ?? []
    expect(cookie).toMatch(new RegExp(`^tend_console_${info.port}=[A-Za-z0-9_-]{43};`))
    expect(cookie).toContain('HttpOnly')
    expect(cookie).toContain('SameSite=Strict')
    expect(cookie).toContain('Path=/')
    expect(cookie).not.toContain(info.token!)
    const session = cookie!.split(';')[0]!
    const page = await send(target, 'GET', '/', { cookie: session })
    expect(page.status).toBe(200)
    expect(page.headers['content-security-policy']).toContain("default-src 'self'")
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'")
    expect(page.headers['x-frame-options']).toBe('DENY')
    expect((await send(target, 'GET', '/v1/status', { cookie: session })).status).toBe(200)
    // A change made with the cookie must say where it comes from: a form of another site would not.
    const started = await daemon.client.start({ command: ['sleep', '1000'] })
    await waitFor('the task to run', async () => (await daemon.client.get(started.id)).state === 'running')
    const bare = await send(target, 'POST', `/v1/tasks/${started.id}/kill`, { cookie: session }, '{}')
    expect(bare.status).toBe(403)
    expect(codeOf(bare)).toBe('TEND_ERR_FOREIGN_ORIGIN')
    expect((await daemon.client.get(started.id)).state).toBe('running')
    const own = await send(target, 'POST', `/v1/tasks/${started.id}/kill`, { cookie: session, origin: info.origin! }, '{"signal":"SIGKILL"}')
    expect(own.status).toBe(200)
    expect(JSON.parse(own.text)).toMatchObject({ state: 'killed', stoppedBy: 'operator' })
  })

  test('a request from another origin is refused, with the token or the cookie; no CORS is granted', async () => {
    const session = (await send(target, 'GET', `/?token=${info.token}`)).headers['set-cookie']![0]!.split(';')[0]!
    const foreign: Array<Record<string, string>> = [
      { origin: 'http://evil.example' },
      { origin: `http://127.0.0.1:${info.port! + 1}` },
      { origin: 'null' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
    ]
    for (const extra of foreign) {
      for (const auth of [{ authorization: `Bearer ${info.token}` }, { cookie: session }] as Array<Record<string, string>>) {
        for (const [method, path, body] of [
          ['GET', '/v1/tasks'],
          ['POST', '/v1/gc', '{}'],
          ['OPTIONS', '/v1/tasks'],
          ['GET', '/'],
        ] as const) {
          const answer = await send(target, method, path, { ...auth, ...extra, 'access-control-request-method': 'POST' }, body)
          expect(answer.status, `${method} ${path} ${JSON.stringify(extra)}`).toBe(403)
          expect(codeOf(answer)).toBe('TEND_ERR_FOREIGN_ORIGIN')
          expectNoCors(answer)
        }
      }
    }
    // Its own origin passes.
    expect(
      (await send(target, 'GET', '/v1/tasks', { authorization: `Bearer ${info.token}`, origin: info.origin!, 'sec-fetch-site': 'same-origin' })).status,
    ).toBe(200)
  })

  test('a Host that is not the console (a name rebound to 127.0.0.1) is refused, whatever it carries', async () => {
    for (const host of [`evil.example:${info.port}`, 'evil.example', `127.0.0.1:${info.port! + 1}`]) {
      const answer = await send(target, 'GET', '/v1/status', { host, authorization: `Bearer ${info.token}` })
      expect(answer.status, host).toBe(403)
      expect(codeOf(answer)).toBe('TEND_ERR_FOREIGN_ORIGIN')
    }
    expect((await send(target, 'GET', '/v1/status', { host: `localhost:${info.port}`, authorization: `Bearer ${info.token}` })).status).toBe(200)
  })

  test("the console's own control is not served over TCP: a token cannot make tokens", async () => {
    for (const [method, path] of [
      ['POST', '/v1/console'],
      ['GET', '/v1/console'],
      ['DELETE', '/v1/console'],
      ['POST', '/v1/console/revoke'],
    ] as const) {
      const answer = await send(target, method, path, { authorization: `Bearer ${info.token}` }, method === 'POST' ? '{}' : undefined)
      expect(answer.status, `${method} ${path}`).toBe(404)
      expect(codeOf(answer)).toBe('TEND_ERR_ROUTE_NOT_FOUND')
    }
  })

  test('tend console over TCP (TEND_URL) is refused with a usage error that says why', async () => {
    const remote = await runCli(['console', '--no-open'], { ...daemon.env, TEND_URL: info.origin!, TEND_TOKEN: info.token! })
    expect(remote.exitCode).toBe(2)
    expect(remote.stderr).toContain('through its socket')
    // The rest of the CLI works over TCP.
    const listed = await runCli(['ps', '--all', '--json'], { ...daemon.env, TEND_URL: info.origin!, TEND_TOKEN: info.token! })
    expect(listed.exitCode, listed.stderr).toBe(0)
    expect(Array.isArray(JSON.parse(listed.stdout))).toBe(true)
  })

  test('an owner asks for a whole-daemon console: refused as operator only', async () => {
    const owned = new TendClient({ home: daemon.home, autoStart: false, owner: 'alice', env: {} })
    try {
      await expect(owned.openConsole()).rejects.toMatchObject({ code: 'TEND_ERR_OPERATOR_ONLY' })
    } finally {
      owned.close()
    }
  })

  test('a task output downloads whole as output.log, with the token', async () => {
    const task = await daemon.client.wait((await daemon.client.start({ command: ['sh', '-c', 'printf "a\\033[31mred\\033[0m\\n"'] })).id)
    const answer = await send(target, 'GET', `/v1/tasks/${task.id}/output.log`, { authorization: `Bearer ${info.token}` })
    expect(answer.status).toBe(200)
    expect(answer.headers['content-disposition']).toBe(`attachment; filename="tend-${task.id}-output.log"`)
    expect(answer.text).toBe('a\u001b[31mred\u001b[0m\n')
  })

  test('revoking ends every token and every session; --stop closes the listener; the next start makes a token that works', async () => {
    const session = (await send(target, 'GET', `/?token=${info.token}`)).headers['set-cookie']![0]!.split(';')[0]!
    const revoked = await runCli(['console', '--revoke', '--json'], daemon.env)
    expect(revoked.exitCode, revoked.stderr).toBe(0)
    expect(JSON.parse(revoked.stdout)).toMatchObject({ listening: true, tokens: 0 })
    expect((await send(target, 'GET', '/v1/status', { authorization: `Bearer ${info.token}` })).status).toBe(401)
    expect((await send(target, 'GET', '/v1/status', { cookie: session })).status).toBe(401)
    const stopped = await runCli(['console', '--stop'], daemon.env)
    expect(stopped.stdout).toContain('not listening')
    await expect(send(target, 'GET', '/v1/status')).rejects.toMatchObject({ code: 'ECONNREFUSED' })
    const reopened = await openConsole(daemon.env)
    expect((await send({ port: reopened.port! }, 'GET', '/v1/status', { authorization: `Bearer ${reopened.token}` })).status).toBe(200)
    info = reopened
    target = { port: reopened.port! }
  })

  test("no token reaches the daemon's log, though pages were opened with ?token=", async () => {
    await send(target, 'GET', `/?token=${info.token}`)
    await send(target, 'GET', `/?token=${info.token}x`)
    const log = readFileSync(join(daemon.home, 'daemon.log'), 'utf8')
    expect(log).toContain('console listening')
    expect(log).not.toContain(info.token!)
    expect(log).not.toMatch(/token=[A-Za-z0-9_-]{20}/)
  })
})

describe('the console beyond loopback', () => {
  let daemon: TestDaemon
  let certs: string
  beforeAll(async () => {
    daemon = await startTestDaemon()
    certs = mkdtempSync(join(tmpdir(), 'tend-console-tls-'))
    // A certificate of its own for 127.0.0.1, as an operator would make one (openssl from Debian).
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=tend-test',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(certs, 'key.pem'),
        '-out',
        join(certs, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    )
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=other',
        '-keyout',
        join(certs, 'other-key.pem'),
        '-out',
        join(certs, 'other-cert.pem'),
      ],
      { stdio: 'ignore' },
    )
  })
  afterEach(async () => {
    await runCli(['console', '--stop'], daemon.env)
  })
  afterAll(async () => {
    await daemon?.stop()
    rmSync(certs, { recursive: true, force: true })
  })

  test('another address without TLS is refused (exit 2, TEND_ERR_CONSOLE_INSECURE) and nothing listens', async () => {
    const refused = await runCli(['console', '--json', '--no-open', '--host', '0.0.0.0'], daemon.env)
    expect(refused.exitCode).toBe(2)
    expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: 'TEND_ERR_CONSOLE_INSECURE' } })
    expect(JSON.parse(refused.stdout).error.message).toContain('--insecure')
    expect((await daemon.client.consoleInfo()).listening).toBe(false)
  })

  test('--insecure serves it in clear text, on every address', async () => {
    const info = await openConsole(daemon.env, '--host', '0.0.0.0', '--insecure')
    expect(info).toMatchObject({ host: '0.0.0.0', tls: false })
    // Beyond loopback any Host is accepted: the token is the gate.
    expect((await send({ port: info.port! }, 'GET', '/v1/status', { host: `tend.example:${info.port}`, authorization: `Bearer ${info.token}` })).status).toBe(
      200,
    )
    expect((await send({ port: info.port! }, 'GET', '/v1/status', { host: `tend.example:${info.port}` })).status).toBe(401)
  })

  test('with a certificate and key it speaks HTTPS only; the client trusts it with ca; the session cookie is Secure', async () => {
    const info = await openConsole(daemon.env, '--host', '0.0.0.0', '--tls-cert', join(certs, 'cert.pem'), '--tls-key', join(certs, 'key.pem'))
    expect(info).toMatchObject({ tls: true })
    expect(info.origin).toMatch(/^https:\/\//)
    const ca = readFileSync(join(certs, 'cert.pem'), 'utf8')
    const target = { port: info.port!, tls: { ca } }
    expect((await send(target, 'GET', '/v1/status')).status).toBe(401)
    const opened = await send(target, 'GET', `/?token=${info.token}`, { host: `127.0.0.1:${info.port}` })
    expect(opened.headers['set-cookie']![0]).toContain('Secure')
    const client = new TendClient({ url: `https://127.0.0.1:${info.port}`, token: info.token!, ca, env: {} })
    try {
      expect((await client.status()).pid).toBe((await daemon.client.status()).pid)
      const task = await client.wait((await client.start({ command: ['echo', 'over tls'] })).id)
      expect((await client.read(task.id)).data).toBe('over tls\n')
    } finally {
      client.close()
    }
    // Clear text to the TLS port gets no API.
    await expect(send({ port: info.port! }, 'GET', '/v1/status', { authorization: `Bearer ${info.token}` })).rejects.toThrow()
  })

  test("a key that is not the certificate's, a missing file, or a certificate without its key: exit 2, TEND_ERR_CONSOLE_TLS", async () => {
    for (const args of [
      ['--tls-cert', join(certs, 'cert.pem'), '--tls-key', join(certs, 'other-key.pem')],
      ['--tls-cert', join(certs, 'missing.pem'), '--tls-key', join(certs, 'key.pem')],
      ['--tls-cert', join(certs, 'cert.pem')],
    ]) {
      const refused = await runCli(['console', '--json', '--no-open', '--host', '0.0.0.0', ...args], daemon.env)
      expect(refused.exitCode, args.join(' ')).toBe(2)
      expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: 'TEND_ERR_CONSOLE_TLS' } })
    }
    expect((await daemon.client.consoleInfo()).listening).toBe(false)
  })

  test('a port already taken is refused with TEND_ERR_CONSOLE_LISTEN, and a console that listens stays where it is', async () => {
    const info = await openConsole(daemon.env)
    // A second daemon (its own home) asks for the port the first console holds.
    const other = await startTestDaemon()
    try {
      const taken = await runCli(['console', '--json', '--no-open', '--port', String(info.port)], other.env)
      expect(taken.exitCode).toBe(1)
      expect(JSON.parse(taken.stdout)).toMatchObject({ error: { code: 'TEND_ERR_CONSOLE_LISTEN' } })
      expect(JSON.parse(taken.stdout).error.message).toContain(`:${info.port}`)
      expect((await other.client.consoleInfo()).listening).toBe(false)
      // The other daemon's console, once it listens elsewhere, refuses a move to the taken port and stays.
      const elsewhere = await openConsole(other.env)
      expect((await runCli(['console', '--json', '--no-open', '--port', String(info.port)], other.env)).exitCode).toBe(1)
      expect((await send({ port: elsewhere.port! }, 'GET', '/v1/status', { authorization: `Bearer ${elsewhere.token}` })).status).toBe(200)
    } finally {
      await other.stop()
    }
    expect((await send({ port: info.port! }, 'GET', '/v1/status', { authorization: `Bearer ${info.token}` })).status).toBe(200)
  })
})

describe('the console setting', () => {
  test('console: true serves it from the start on its port; tokens outlive the daemon', async () => {
    const port = await freePort()
    const home = createTempHome()
    let daemon = await startTestDaemon({ home, env: { TEND_CONSOLE: '1', TEND_CONSOLE_PORT: String(port) } })
    try {
      const status = await runCli(['console', '--status', '--json'], daemon.env)
      expect(JSON.parse(status.stdout)).toMatchObject({ listening: true, port, origin: `http://127.0.0.1:${port}`, token: null })
      const info = await openConsole(daemon.env)
      expect(info.port).toBe(port)
      // A crash keeps the home (a test daemon's stop removes it): the next daemon starts on it.
      await daemon.crash()
      daemon = await startTestDaemon({ home, env: { TEND_CONSOLE: '1', TEND_CONSOLE_PORT: String(port) } })
      await waitFor(
        'the console of the new daemon to answer',
        async () => (await send({ port }, 'GET', '/v1/status', { authorization: `Bearer ${info.token}` }).catch(() => null))?.status === 200,
      )
    } finally {
      await daemon.stop()
      rmSync(home, { recursive: true, force: true })
    }
  })

  test('a tokens file that cannot be read is logged when the daemon starts: the operator learns why the earlier tokens stopped working', async () => {
    const home = createTempHome()
    writeFileSync(join(home, 'console-tokens.json'), '{"tokens": [ broken', { mode: 0o600 })
    const daemon = await startTestDaemon({ home })
    try {
      // The console is made when the daemon starts; its tokens file is read then.
      await waitFor('the warning in daemon.log', () =>
        readFileSync(join(home, 'daemon.log'), 'utf8').includes('console tokens unreadable: earlier tokens no longer work'),
      )
      // A new token works all the same.
      const info = await openConsole(daemon.env)
      expect((await send({ port: info.port! }, 'GET', '/v1/status', { authorization: `Bearer ${info.token}` })).status).toBe(200)
    } finally {
      await daemon.stop()
      rmSync(home, { recursive: true, force: true })
    }
  })

  test('a console setting that is wrong stops the daemon from starting, naming it', async () => {
    const home = createTempHome()
    try {
      const started = await runCli(['daemon'], daemonEnv(home, { TEND_CONSOLE: 'maybe', TEND_CONSOLE_PORT: '70000' }))
      expect(started.exitCode).toBe(2)
      expect(started.stderr).toContain('TEND_CONSOLE')
      expect(started.stderr).toContain('TEND_CONSOLE_PORT')
    } finally {
      rmSync(home, { recursive: true, force: true })
    }
  })
})
