import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { ClusterClient, ClusterTasks } from '../../client/cluster/index.js'
import { workersKey, type WorkerEntry } from '../../protocol/index.js'
import { runCli } from '../helpers/cli.js'
import { isAlive, processesWithEnv } from '../helpers/processes.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { checkUnprivilegedUser, createTempHome, daemonEnv, startTestDaemon, stopAll, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * A cluster on a Redis with a password, as an attacker on the same machine sees it: every
 * process's command line, every key and value in Redis, the token each worker publishes there.
 * One worker runs as the unprivileged test user and reads its Redis URL from a 0600 file; the
 * other runs as root, reads it from TEND_REDIS_URL, and allows unsandboxed jobs.
 */

const PASSWORD = `pw-${randomBytes(12).toString('hex')}`
let redis: TestRedis
/** A folder of the test user's: the URL and key files of the worker that runs as that user. */
let secrets: string
let urlFile: string
let keyFile: string
/** root's own copies: a secret file must belong to the user who reads it. */
let rootSecrets: string
let fromFile: TestDaemon
let fromEnv: TestDaemon
let cluster: ClusterClient
let submitterHome: string

beforeAll(async () => {
  const user = checkUnprivilegedUser()
  redis = await startRedis({ password: PASSWORD })
  secrets = mkdtempSync(join(tmpdir(), 'tend-credentials-'))
  urlFile = join(secrets, 'redis-url')
  keyFile = join(secrets, 'cluster-key')
  writeFileSync(urlFile, `${redis.url}\n`, { mode: 0o600 })
  writeFileSync(keyFile, randomBytes(32), { mode: 0o600 })
  for (const path of [secrets, urlFile, keyFile]) chownSync(path, user.uid, user.gid)
  chmodSync(secrets, 0o700)
  fromFile = await startTestDaemon({
    user: 'unprivileged',
    command: ['worker', '--redis-url-file', urlFile, '--name', 'from-file', '--labels', 'via=file'],
    env: { TEND_CLUSTER_KEY_FILE: keyFile },
  })
  rootSecrets = mkdtempSync(join(tmpdir(), 'tend-credentials-root-'))
  const rootKey = join(rootSecrets, 'cluster-key')
  writeFileSync(rootKey, readFileSync(keyFile), { mode: 0o600 })
  fromEnv = await startTestDaemon({
    command: ['worker', '--name', 'from-env', '--labels', 'via=env', '--allow-sandbox', 'off,workspace'],
    env: { TEND_REDIS_URL: redis.url, TEND_CLUSTER_KEY_FILE: rootKey },
  })
  cluster = new ClusterClient(redis.url, undefined, { keyFile: rootKey })
  submitterHome = createTempHome()
})

afterAll(async () => {
  await cluster?.close()
  await stopAll(fromFile, fromEnv, redis)
  for (const folder of [secrets, rootSecrets, submitterHome]) if (folder) rmSync(folder, { recursive: true, force: true })
})

/** Every process on the machine whose command line holds `secret`, as "pid: cmdline". */
function commandLinesHolding(secret: string): string[] {
  const found: string[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`)
      if (cmdline.includes(secret)) found.push(`${entry}: ${cmdline.toString().split('\0').join(' ')}`)
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** Everything Redis holds, key by key, read by type (and its DUMP besides), as text. */
async function everythingInRedis(): Promise<Map<string, string>> {
  const client = new Redis(redis.url)
  try {
    const everything = new Map<string, string>()
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'COUNT', 1000)
      cursor = next
      for (const key of keys) {
        const type = await client.type(key)
        const value =
          type === 'string'
            ? await client.get(key)
            : type === 'hash'
              ? await client.hgetall(key)
              : type === 'list'
                ? await client.lrange(key, 0, -1)
                : type === 'set'
                  ? await client.smembers(key)
                  : type === 'zset'
                    ? await client.zrange(key, 0, -1, 'WITHSCORES')
                    : type === 'stream'
                      ? await client.xrange(key, '-', '+')
                      : `(type ${type})`
        const dump = await client.dumpBuffer(key)
        everything.set(key, `${JSON.stringify(value)}\n${dump?.toString('latin1') ?? ''}`)
      }
    } while (cursor !== '0')
    return everything
  } finally {
    client.disconnect()
  }
}

async function keysHolding(secret: string): Promise<string[]> {
  return [...(await everythingInRedis())].filter(([, text]) => text.includes(secret)).map(([key]) => key)
}

async function publishedEntry(worker: string): Promise<WorkerEntry> {
  const client = new Redis(redis.url)
  try {
    return await waitFor(`worker ${worker} announced with a token`, async () => {
      const text = await client.hget(workersKey('tend'), worker)
      const entry = text ? (JSON.parse(text) as WorkerEntry) : null
      return entry?.token && entry.origin ? entry : null
    })
  } finally {
    client.disconnect()
  }
}

describe("the cluster's Redis password is in no process's argv", () => {
  test('tend worker refuses a Redis URL with a password on its command line, and names the two other ways', async () => {
    const home = createTempHome()
    try {
      const refused = await runCli(['worker', '--redis', redis.url], daemonEnv(home))
      expect(refused.exitCode).toBe(2)
      expect(refused.stderr).toContain('TEND_REDIS_URL')
      expect(refused.stderr).toContain('--redis-url-file')
      expect(refused.stderr).not.toContain(PASSWORD)
      expect(existsSync(join(home, 'tend.sock'))).toBe(false)
    } finally {
      rmSync(home, { recursive: true, force: true })
    }
  })

  test('a Redis URL file that others may read, or that is a symlink, is refused', async () => {
    const home = createTempHome()
    const dir = mkdtempSync(join(tmpdir(), 'tend-url-file-'))
    try {
      const open = join(dir, 'readable')
      writeFileSync(open, redis.url, { mode: 0o644 })
      chmodSync(open, 0o644)
      const readable = await runCli(['worker', '--redis-url-file', open], daemonEnv(home))
      expect(readable.exitCode).toBe(2)
      expect(readable.stderr).toMatch(/TEND_ERR_SECRET_FILE|group or others/)
      expect(readable.stderr).toContain('chmod 600')
      const closed = join(dir, 'closed')
      writeFileSync(closed, redis.url, { mode: 0o600 })
      const link = join(dir, 'link')
      symlinkSync(closed, link)
      const linked = await runCli(['worker', '--redis-url-file', link], daemonEnv(home))
      expect(linked.exitCode).toBe(2)
      expect(linked.stderr).toContain('symbolic link')
      for (const result of [readable, linked]) expect(result.stderr).not.toContain(PASSWORD)
      expect(existsSync(join(home, 'tend.sock'))).toBe(false)
    } finally {
      rmSync(home, { recursive: true, force: true })
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('workers that read it from a file (as the test user) or from TEND_REDIS_URL run tasks, and no command line or task environment holds it', async () => {
    const onFile = await cluster.start({ command: ['sleep', '1000'], sandbox: 'workspace', require: { via: 'file' } })
    const onEnv = await cluster.start({ command: ['sleep', '1000'], sandbox: 'off', require: { via: 'env' } })
    for (const task of [onFile, onEnv]) await waitFor(`task ${task.id} running`, async () => (await cluster.get(task.id)).state === 'running', 30_000)
    expect(commandLinesHolding(PASSWORD)).toEqual([])
    // An unsandboxed task starts from the daemon's environment: its credentials are not part of it.
    const unsandboxed = processesWithEnv(`TEND_TASK_ID=${onEnv.id}`).filter(isAlive)
    expect(unsandboxed.length).toBeGreaterThan(0)
    for (const pid of unsandboxed) expect(readFileSync(`/proc/${pid}/environ`).includes(PASSWORD), `task process ${pid}'s environment`).toBe(false)
    for (const task of [onFile, onEnv]) expect(await cluster.kill(task.id, { signal: 'SIGKILL' })).toMatchObject({ state: 'killed' })
  })

  test('a daemon given only the file (TEND_REDIS_URL_FILE, the setting clusterRedisUrlFile) reads its Redis URL there and joins the cluster', async () => {
    const settingFile = join(rootSecrets, 'redis-url-setting')
    writeFileSync(settingFile, `${redis.url}\n`, { mode: 0o600 })
    const daemon = await startTestDaemon({ env: { TEND_REDIS_URL_FILE: settingFile, TEND_CLUSTER_NAME: 'from-setting' } })
    try {
      expect((await publishedEntry('from-setting')).token).toBeTruthy()
      expect(commandLinesHolding(PASSWORD)).toEqual([])
    } finally {
      await daemon.stop()
    }
  })

  test('the CLI and tend mcp refuse a password in --cluster and name TEND_CLUSTER and --cluster-url-file; both of those work', async () => {
    const env = daemonEnv(submitterHome)
    const run = await runCli(['run', '--cluster', redis.url, '--sandbox', 'workspace', '--', 'true'], env)
    expect(run.exitCode).toBe(2)
    expect(run.stderr).toContain('TEND_CLUSTER')
    expect(run.stderr).toContain('--cluster-url-file')
    expect(run.stderr).not.toContain(PASSWORD)
    const mcp = await runCli(['mcp', '--cluster', redis.url], env)
    expect(mcp.exitCode).toBe(2)
    expect(mcp.stderr).toContain('--cluster-url-file')
    const rootUrlFile = join(rootSecrets, 'redis-url')
    writeFileSync(rootUrlFile, redis.url, { mode: 0o600 })
    const fromUrlFile = await runCli(['ps', '--json', '--all', '--cluster-url-file', rootUrlFile], env)
    expect(fromUrlFile.exitCode, fromUrlFile.stderr).toBe(0)
    const fromVariable = await runCli(['ps', '--json', '--all'], { ...env, TEND_CLUSTER: redis.url })
    expect(fromVariable.exitCode, fromVariable.stderr).toBe(0)
    expect(JSON.parse(fromVariable.stdout)).toEqual(JSON.parse(fromUrlFile.stdout))
    // Neither started a daemon on the submitter's machine.
    expect(existsSync(join(submitterHome, 'tend.sock'))).toBe(false)
  })
})

describe('the token a worker publishes in Redis', () => {
  test('reads output and records; every request that changes something is refused 403 TEND_ERR_READ_ONLY_TOKEN', async () => {
    const entry = await publishedEntry('from-env')
    const task = await cluster.start({ command: ['sh', '-c', 'echo readable; exec sleep 1000'], sandbox: 'off', stdin: 'pipe', require: { via: 'env' } })
    await waitFor('the task running', async () => (await cluster.get(task.id)).state === 'running', 30_000)
    const ask = (method: string, path: string, body?: unknown) =>
      fetch(`${entry.origin}${path}`, {
        method,
        headers: { authorization: `Bearer ${entry.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    expect((await ask('GET', `/v1/tasks/${task.id}`)).status).toBe(200)
    await waitFor(
      'its output readable with the published token',
      async () => ((await (await ask('GET', `/v1/tasks/${task.id}/output`)).json()) as { data: string }).data === 'readable\n',
    )
    const changes: Array<[string, string, unknown?]> = [
      ['POST', '/v1/tasks', { command: ['touch', join(fromEnv.home, 'started-with-a-read-token')], cwd: tmpdir(), sandbox: 'off' }],
      ['POST', `/v1/tasks/${task.id}/kill`, {}],
      ['POST', `/v1/tasks/${task.id}/input`, undefined],
      ['DELETE', `/v1/tasks/${task.id}`],
      ['POST', '/v1/gc', {}],
      ['POST', '/v1/stop', {}],
    ]
    for (const [method, path, body] of changes) {
      const answer = await ask(method, path, body)
      expect(answer.status, `${method} ${path}`).toBe(403)
      expect(((await answer.json()) as { code: string }).code, `${method} ${path}`).toBe('TEND_ERR_READ_ONLY_TOKEN')
    }
    expect(existsSync(join(fromEnv.home, 'started-with-a-read-token'))).toBe(false)
    expect(await fromEnv.client.get(task.id)).toMatchObject({ state: 'running' })
    // What the cluster's clients change goes through Redis instead: input, then the kill.
    const owned = new ClusterTasks(cluster, 'operator')
    expect(await owned.input(task.id, 'typed\n')).toMatchObject({ acceptedBytes: 6 })
    expect(await cluster.kill(task.id, { signal: 'SIGKILL' })).toMatchObject({ state: 'killed' })
  })
})

describe('environment values on the queue', () => {
  test('never sit in Redis in the clear while queued, reach the task, and are gone from the job once a worker has taken it', async () => {
    const planted = `planted-${randomBytes(12).toString('hex')}`
    const submitted = await cluster.start({
      command: ['sh', '-c', 'echo "value=$PLANTED"; exec sleep 1000'],
      env: { PLANTED: planted },
      sandbox: 'workspace',
      require: { zone: 'later' },
    })
    expect(await cluster.get(submitted.id)).toMatchObject({ state: 'queued' })
    expect(await keysHolding(planted)).toEqual([])
    // A worker with that label comes: it takes the job, opens the environment, runs the task.
    const later = await startTestDaemon({
      command: ['worker', '--name', 'later', '--labels', 'zone=later'],
      env: { TEND_REDIS_URL: redis.url, TEND_CLUSTER_KEY_FILE: cluster.keyFile! },
    })
    try {
      await waitFor('the task running on the later worker', async () => (await cluster.get(submitted.id)).state === 'running', 30_000)
      await waitFor('its output', async () => (await later.client.read(submitted.id)).data === `value=${planted}\n`)
      const client = new Redis(redis.url)
      try {
        const data = JSON.parse((await client.hget(`bull:tend~zone=later:${submitted.id}`, 'data'))!) as {
          request: Record<string, unknown>
          sealedEnv?: unknown
        }
        expect(data.sealedEnv).toBeUndefined()
        expect(data.request.env).toBeUndefined()
      } finally {
        client.disconnect()
      }
      expect(await keysHolding(planted)).toEqual([])
      expect(await cluster.kill(submitted.id, { signal: 'SIGKILL' })).toMatchObject({ state: 'killed' })
      for (const worker of [later, fromFile, fromEnv]) {
        const log = readFileSync(join(worker.home, 'daemon.log'), 'utf8')
        expect(log, `${worker.home}/daemon.log`).not.toContain(planted)
        expect(log, `${worker.home}/daemon.log`).not.toContain(PASSWORD)
      }
    } finally {
      await later.stop()
    }
  })

  test('a cluster task with environment values and no cluster key is refused, saying how to make one', async () => {
    const keyless = new ClusterClient(redis.url)
    try {
      await expect(keyless.start({ command: ['true'], env: { A: 'b' }, sandbox: 'workspace' })).rejects.toMatchObject({
        code: 'TEND_ERR_CLUSTER_KEY',
        message: expect.stringContaining('head -c 32 /dev/urandom'),
      })
    } finally {
      await keyless.close()
    }
    const cli = await runCli(['run', '--env', 'A=b', '--sandbox', 'workspace', '--', 'true'], { ...daemonEnv(submitterHome), TEND_CLUSTER: redis.url })
    expect(cli.exitCode).not.toBe(0)
    expect(cli.stderr).toContain('head -c 32 /dev/urandom')
  })
})

describe('the sandbox profiles a worker accepts', () => {
  test('a worker without --allow-sandbox off refuses an unsandboxed job (also by its default profile): it fails with a reason and nothing runs', async () => {
    const marker = join(fromEnv.home, `never-${randomBytes(4).toString('hex')}`)
    const asked = await cluster.start({ command: ['touch', marker], sandbox: 'off', require: { via: 'file' } })
    const byDefault = await cluster.start({ command: ['touch', marker], require: { via: 'file' } })
    for (const job of [asked, byDefault]) {
      const ended = await cluster.wait(job.id, { timeoutMs: 30_000 })
      expect(ended).toMatchObject({ state: 'failed', worker: null })
      expect(ended.reason).toContain('sandbox off')
      expect(ended.reason).toContain('--allow-sandbox off')
    }
    expect(existsSync(marker)).toBe(false)
    // Each refusal is in the worker's audit log, with where the job came from.
    const audited = readFileSync(join(fromFile.home, 'daemon.log'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    for (const job of [asked, byDefault]) {
      expect(audited).toContainEqual(
        expect.objectContaining({
          msg: 'change requested',
          taskId: job.id,
          outcome: 'TEND_ERR_SANDBOX_NOT_ALLOWED',
          caller: { via: 'cluster', queue: 'tend', channel: 'jobs' },
        }),
      )
    }
    // The worker that allows it runs it.
    const allowed = await cluster.start({ command: ['true'], sandbox: 'off', require: { via: 'env' } })
    expect(await cluster.wait(allowed.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', worker: 'from-env' })
  })
})

describe('the Redis ACL docs/cluster.md gives', () => {
  test('is enough for a worker and a submitter: start, output, input, kill, remove; and the default user is off', async () => {
    const docs = readFileSync(new URL('../../docs/cluster.md', import.meta.url), 'utf8')
    const rule = /^user tend on >CHANGE-THIS-LONG-RANDOM-PASSWORD (.+)$/m.exec(docs)?.[1]
    expect(rule, 'the ACL line of docs/cluster.md').toBeDefined()
    expect(docs).toMatch(/^user default off$/m)
    const password = `acl-${randomBytes(8).toString('hex')}`
    const own = await startRedis({ user: 'tend', password, configuration: [`user tend on >${password} ${rule}`, 'user default off'] })
    let worker: TestDaemon | undefined
    const submitter = new ClusterClient(own.url, undefined, { keyFile: cluster.keyFile })
    try {
      const anonymous = new Redis(own.url.replace(/\/\/[^@]*@/, '//'), { maxRetriesPerRequest: 0, lazyConnect: true })
      anonymous.on('error', () => undefined)
      await expect(anonymous.connect().then(() => anonymous.get('tend:anything'))).rejects.toThrow()
      anonymous.disconnect()
      worker = await startTestDaemon({ command: ['worker', '--name', 'acl'], env: { TEND_REDIS_URL: own.url, TEND_CLUSTER_KEY_FILE: cluster.keyFile! } })
      const echoed = await submitter.start({ command: ['sh', '-c', 'echo "acl $VALUE"'], env: { VALUE: 'works' }, sandbox: 'workspace' })
      expect(await submitter.wait(echoed.id, { timeoutMs: 30_000 })).toMatchObject({ state: 'exited', worker: 'acl' })
      const { client } = await submitter.workerClient(echoed.id)
      expect((await client.read(echoed.id)).data).toBe('acl works\n')
      client.close()
      const reading = await submitter.start({ command: ['sh', '-c', 'read line; echo "got $line"; exec sleep 1000'], stdin: 'pipe', sandbox: 'workspace' })
      await waitFor('the reading task running', async () => (await submitter.get(reading.id)).state === 'running', 30_000)
      await new ClusterTasks(submitter, 'operator').input(reading.id, 'typed\n')
      await waitFor('its answer', async () => (await worker!.client.read(reading.id)).data === 'got typed\n')
      expect(await submitter.kill(reading.id, { signal: 'SIGKILL' })).toMatchObject({ state: 'killed' })
      expect(await submitter.remove(echoed.id)).toMatchObject({ removed: echoed.id })
      expect(existsSync(join(worker.home, 'spool', echoed.id))).toBe(false)
    } finally {
      await submitter.close()
      await stopAll(worker, own)
    }
  })
})
