import { afterAll, beforeAll, describe, expect } from 'vitest'
import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Task } from '../../client/index.js'
import { openConsole } from '../helpers/console.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { checkUnprivilegedUser, daemonEnv, startTestDaemon, type TestDaemon, endSuite } from '../helpers/test-daemon.js'
import { eachSandboxedProfile } from '../helpers/profiles.js'

/*
 * tend's own credentials are hidden from every sandboxed task, wherever they are: the cluster key
 * (clusterKeyFile), the Redis URL file a worker was given (--redis-url-file), ~/.config/tend (where
 * docs/cluster.md keeps both), the console's tokens and its TLS key. A --net task on a worker that reads the
 * Redis URL or the cluster key can start jobs on every worker of the cluster.
 */

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

function q(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`
}

let redis: TestRedis

beforeAll(async () => {
  redis = await startRedis({ password: `pw-${randomBytes(12).toString('hex')}` })
})

afterAll(async () => {
  await redis?.stop()
})

function defineSuite(who: 'root' | 'non-root'): void {
  describe(`tend's own credentials, worker as ${who}`, () => {
    const base = join('/var/tmp', `tend-credentials-${who}-${process.pid}-${randomBytes(4).toString('hex')}`)
    const userHome = join(base, 'user')
    const home = join(base, 'tend-home')
    const workspace = join(base, 'ws')
    const owner = who === 'root' ? { uid: 0, gid: 0 } : checkUnprivilegedUser()
    /** Where docs/cluster.md keeps them. */
    const documented = join(userHome, '.config', 'tend')
    /** Where this worker was told they are. */
    const given = join(userHome, 'run')
    const keyBytes = randomBytes(32)
    let worker: TestDaemon
    let tokenDigestFile: string
    const taskIds: string[] = []

    function secretFile(path: string, data: string | Buffer): void {
      writeFileSync(path, data, { mode: 0o600 })
      chownSync(path, owner.uid, owner.gid)
    }

    beforeAll(async () => {
      mkdirSync(base, { mode: 0o711 })
      for (const dir of [userHome, join(userHome, '.config'), documented, given, workspace]) {
        mkdirSync(dir, { mode: 0o711 })
        chownSync(dir, owner.uid, owner.gid)
      }
      mkdirSync(home, { mode: 0o700 })
      chownSync(home, owner.uid, owner.gid)
      for (const dir of [documented, given]) {
        secretFile(join(dir, 'redis-url'), `${redis.url}\n`)
        secretFile(join(dir, 'cluster-key'), keyBytes)
      }
      // The console's TLS key: whoever holds it can pose as the console to its operator.
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
          join(given, 'console-key.pem'),
          '-out',
          join(given, 'console-cert.pem'),
        ],
        { stdio: 'ignore' },
      )
      for (const file of ['console-key.pem', 'console-cert.pem']) chownSync(join(given, file), owner.uid, owner.gid)
      chmodSync(join(given, 'console-key.pem'), 0o600)
      worker = await startTestDaemon({
        user: who === 'root' ? undefined : 'unprivileged',
        home,
        command: ['worker', '--redis-url-file', join(given, 'redis-url'), '--name', `creds-${who}`],
        env: {
          HOME: userHome,
          PATH: SYSTEM_PATH,
          TEND_SANDBOX: 'workspace',
          TEND_CLUSTER_KEY_FILE: join(given, 'cluster-key'),
          TEND_CONSOLE_TLS_CERT: join(given, 'console-cert.pem'),
          TEND_CONSOLE_TLS_KEY: join(given, 'console-key.pem'),
        },
      })
      expect((await openConsole(daemonEnv(home, { TEND_CONSOLE_PORT: '0' }))).tls).toBe(true)
      tokenDigestFile = join(home, 'console-tokens.json')
      expect(existsSync(tokenDigestFile)).toBe(true)
    })

    afterAll(() => endSuite(taskIds, base, worker))

    async function attempt(line: string, sandbox: 'workspace' | 'strict'): Promise<{ task: Task; output: string }> {
      const started = await worker.client.start({ command: line, shell: true, cwd: workspace, timeoutMs: 20_000, sandbox, network: 'host' })
      taskIds.push(started.id)
      const task = await worker.client.wait(started.id, { timeoutMs: 40_000 })
      return { task, output: (await worker.client.read(started.id)).data }
    }

    eachSandboxedProfile(
      "a --net task reads neither the Redis URL, nor the cluster key, nor the console's tokens or TLS key, wherever they are",
      () => worker.client,
      async (sandbox) => {
        const files = [
          join(documented, 'redis-url'),
          join(documented, 'cluster-key'),
          join(given, 'redis-url'),
          join(given, 'cluster-key'),
          join(given, 'console-key.pem'),
          tokenDigestFile,
        ]
        const line = [...files.map((file) => `base64 -w0 ${q(file)} 2>/dev/null | sed 's|^|read ${file}: |'; echo`), 'echo done'].join('; ')
        const { task, output } = await attempt(line, sandbox)
        expect(output, task.reason ?? '').toContain('done\n')
        expect(output).not.toMatch(/read [^:]+: \S/)
        expect(output).not.toContain(redis.password!)
        expect(output).not.toContain(keyBytes.toString('base64'))
        expect(output).not.toContain('PRIVATE KEY')
        // The files are there, as they were, on the host: the task could have read them had they shown.
        expect(readFileSync(join(given, 'cluster-key'))).toEqual(keyBytes)
        expect(readFileSync(join(documented, 'redis-url'), 'utf8')).toContain(redis.password!)
      },
    )
  })
}

defineSuite('root')
defineSuite('non-root')
