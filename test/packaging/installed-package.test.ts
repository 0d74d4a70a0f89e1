import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, relative } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { execa } from 'execa'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { ConsoleInfo, DaemonStatus } from '../../protocol/index.js'
import { launchBrowser } from '../helpers/browser.js'
import { assertNothingLeft, daemonEnv, REPO_ROOT } from '../helpers/test-daemon.js'

/*
 * The package as a user gets it: `npm pack` of a clean copy of the project (what a publish makes,
 * its lifecycle scripts included), installed into an empty prefix, and every entry point of the
 * installed copy (never the repository's) driven from a folder outside the repository.
 */

/** Packing builds everything (tsc, bundles, the C twice) and installing resolves ~200 packages from npm's cache. */
const SETUP_TIMEOUT_MS = 240_000

/** Top-level parts of the checkout a clean copy leaves out: what a build makes, and git's (node_modules at any depth). */
const NOT_COPIED = new Set(['dist', '.git'])

/**
 * This environment without what npm gives the scripts it runs (`npm test`): an inner npm would read
 * npm_config_local_prefix, the checkout, as its project.
 */
function npmEnv(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !/^npm_/i.test(key) && key !== 'INIT_CWD') env[key] = value
  return env
}

let scratch: string
let prefix: string
let installed: string
let tendBin: string
let work: string
let home: string
let env: Record<string, string>
let installOutput: string
/** The copy's package.json after `npm pack`: postpack must have put back what prepack stripped. */
let manifestAfterPack: string
let browser: Browser | undefined

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tend-package-'))
  const source = join(scratch, 'source')
  cpSync(REPO_ROOT, source, {
    recursive: true,
    filter: (path) => {
      const name = basename(path)
      const topLevel = relative(REPO_ROOT, path).split('/').length === 1
      return name !== 'node_modules' && !(topLevel && NOT_COPIED.has(name)) && !name.startsWith('.tend-test-')
    },
  })
  // The copy builds with the checkout's dependencies, as a publish from a fresh `npm ci` would.
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(source, 'node_modules'))
  const packed = await execa('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: source, env: npmEnv(), extendEnv: false, reject: false })
  expect(packed.exitCode, `npm pack failed: ${packed.stderr}`).toBe(0)
  const [{ filename }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as Array<{ filename: string }>
  const tarball = join(scratch, filename)
  manifestAfterPack = readFileSync(join(source, 'package.json'), 'utf8')

  prefix = join(scratch, 'prefix')
  mkdirSync(prefix)
  const install = await execa('npm', ['install', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', tarball], {
    cwd: scratch,
    env: npmEnv(),
    extendEnv: false,
    reject: false,
    all: true,
  })
  installOutput = String(install.all)
  expect(install.exitCode, `npm install of the tarball failed: ${installOutput}`).toBe(0)
  installed = join(prefix, 'node_modules', 'tend')
  tendBin = join(prefix, 'node_modules', '.bin', 'tend')

  work = join(scratch, 'work')
  home = join(scratch, 'home')
  mkdirSync(work)
  mkdirSync(home)
  env = daemonEnv(home, { TEND_SPAWNER: 'native' })
}, SETUP_TIMEOUT_MS)

afterAll(async () => {
  await browser?.close()
  if (home) {
    await tend(['stop'])
    await assertNothingLeft(home)
  }
  if (scratch) rmSync(scratch, { recursive: true, force: true })
})

/** The installed `tend`, run from the work folder outside the repository. */
async function tend(args: string[]): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const result = await execa(tendBin, args, { cwd: work, env, extendEnv: false, reject: false, stdin: 'ignore', timeout: 30_000 })
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) }
}

async function tendJson<T>(args: string[]): Promise<T> {
  const result = await tend([args[0]!, '--json', ...args.slice(1)])
  expect(result.exitCode, `tend ${args.join(' ')}: ${result.stderr}`).toBe(0)
  return JSON.parse(result.stdout) as T
}

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? filesUnder(path, base) : [relative(base, path)]
  })
}

describe('the installed package', () => {
  test('installs without a warning from its own scripts, and has no install script', () => {
    const ownLines = installOutput.split('\n').filter((line) => /\btend@|^tend: /.test(line))
    expect(ownLines, installOutput).toEqual([])
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }
    const lifecycle = ['preinstall', 'install', 'postinstall', 'prepare'].filter((name) => manifest.scripts?.[name] !== undefined)
    expect(lifecycle).toEqual([])
    expect(manifestAfterPack).toBe(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'))
  })

  test('holds no test, bench, source-map or TypeScript source file, and holds the console page and the prebuilt native parts', () => {
    const files = filesUnder(installed)
    const unneeded = files.filter(
      (path) => /\.map$/.test(path) || /(^|\/)(test|bench)\//.test(path) || /\.test\.[jt]s$/.test(path) || (/\.ts$/.test(path) && !/\.d\.ts$/.test(path)),
    )
    expect(unneeded).toEqual([])
    expect(files).toContain('daemon/console/page/index.html')
    for (const name of ['tend.node', 'tend-spawner', 'tend-netns']) expect(files).toContain(`dist/native/linux-x64/${name}`)
    // The source build of the packing machine stays out: only the prebuilt place ships.
    expect(files.filter((path) => /^dist\/native\/[^/]+$/.test(path))).toEqual([])
  })

  test('runs tasks through the CLI verbs', async () => {
    const started = await tendJson<{ id: string }>(['run', '--', 'sh', '-c', 'echo hello from the package'])
    const waited = await tend(['wait', started.id])
    expect(waited.exitCode, waited.stderr).toBe(0)
    const logs = await tend(['logs', started.id])
    expect(logs.stdout).toContain('hello from the package')
    const listed = await tendJson<Array<{ id: string }>>(['ps', '--all'])
    expect(listed.map((task) => task.id)).toContain(started.id)

    const sleeper = await tendJson<{ id: string }>(['run', '--', 'sleep', '1000'])
    const killed = await tend(['kill', sleeper.id])
    expect(killed.exitCode, killed.stderr).toBe(0)
    await tend(['wait', sleeper.id])
    const shown = await tendJson<{ state: string }>(['show', sleeper.id])
    expect(shown.state).toBe('killed')
    const removed = await tend(['rm', started.id])
    expect(removed.exitCode, removed.stderr).toBe(0)
  })

  test('uses the prebuilt native spawner and addon: status names them, and they are the files the daemon runs and loaded', async () => {
    const status = await tendJson<DaemonStatus>(['status'])
    expect(status.spawner).toBe('native')
    const prebuilt = join(installed, 'dist', 'native', 'linux-x64')
    expect(status.native).toMatchObject({
      platform: 'linux-x64',
      parts: [
        { name: 'tend.node', from: 'prebuilt', path: join(prebuilt, 'tend.node') },
        { name: 'tend-spawner', from: 'prebuilt', path: join(prebuilt, 'tend-spawner') },
        { name: 'tend-netns', from: 'prebuilt', path: join(prebuilt, 'tend-netns') },
      ],
    })
    expect(status.native.build).toContain(join(installed, 'daemon', 'native', 'build.mjs'))
    const text = await tend(['status'])
    expect(text.stdout).toMatch(/^native: +prebuilt for linux-x64/m)

    expect(readFileSync(`/proc/${status.pid}/maps`, 'utf8')).toContain(join(prebuilt, 'tend.node'))
    const children = readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === status.pid
        } catch {
          return false
        }
      })
    const executables = children.map((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/exe`)
      } catch {
        return ''
      }
    })
    expect(executables).toContain(join(prebuilt, 'tend-spawner'))
  })

  test('tend mcp answers the SDK client: it lists its tools and runs bash', async () => {
    const transport = new StdioClientTransport({ command: tendBin, args: ['mcp'], env, cwd: work, stderr: 'pipe' })
    const client = new Client({ name: 'tend-package-test', version: '0.0.0' })
    await client.connect(transport)
    try {
      const { tools } = await client.listTools()
      expect(tools.map((tool) => tool.name)).toContain('bash')
      const result = await client.callTool({ name: 'bash', arguments: { command: 'echo from the mcp server', description: 'echo' } })
      const text = (result.content as Array<{ text?: string }>).map((block) => block.text ?? '').join('\n')
      expect(text).toContain('from the mcp server')
    } finally {
      await client.close()
    }
  })

  test('the plugin and the client import from the installed prefix', async () => {
    const script = join(prefix, 'imports.mjs')
    writeFileSync(
      script,
      [
        "const dsh = await import('tend/dsh')",
        "const client = await import('tend')",
        'console.log(JSON.stringify({ name: dsh.name, apply: typeof dsh.apply, client: typeof client.TendClient,',
        "  from: import.meta.resolve('tend/dsh') }))",
      ].join('\n'),
    )
    const result = await execa(process.execPath, [script], { cwd: work, reject: false })
    expect(result.exitCode, String(result.stderr)).toBe(0)
    const answer = JSON.parse(String(result.stdout)) as { name: string; apply: string; client: string; from: string }
    expect(answer).toMatchObject({ apply: 'function', client: 'function' })
    expect(answer.name).toBeTruthy()
    expect(answer.from).toBe(`file://${join(installed, 'dist', 'tools', 'dsh', 'index.js')}`)
  })

  test('tend console serves its page: loaded in Chromium, every request answered 200, no error', async () => {
    const info = await tendJson<ConsoleInfo>(['console', '--no-open'])
    browser = await launchBrowser()
    const context = await browser.newContext()
    try {
      const page = await context.newPage()
      const errors: string[] = []
      const answers: Array<{ url: string; status: number }> = []
      page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`))
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(`console: ${message.text()}`)
      })
      page.on('requestfailed', (request) => errors.push(`failed: ${request.url()} ${request.failure()?.errorText}`))
      page.on('response', (response) => answers.push({ url: response.url(), status: response.status() }))
      await page.goto(info.url!)
      await page.waitForSelector('#connection:has-text("live")', { timeout: 10_000 })
      // The token's address is redirected away once the session cookie is set; everything else is a 200.
      const assets = answers.filter((answer) => new URL(answer.url).pathname.startsWith('/console/'))
      expect(assets.map((answer) => new URL(answer.url).pathname)).toEqual(expect.arrayContaining(['/console/app.js', '/console/style.css']))
      expect(answers.filter((answer) => answer.status !== 200 && !(answer.status >= 300 && answer.status < 400))).toEqual([])
      expect(errors).toEqual([])
    } finally {
      await context.close()
    }
  })

  // Last: it replaces the prebuilt spawner and builds the parts from source in the installed package.
  test('where the prebuilt spawner does not run, status names the source build, and the parts built by that command are used', async () => {
    expect((await tend(['stop'])).exitCode).toBe(0)
    await assertNothingLeft(home)
    const prebuiltSpawner = join(installed, 'dist', 'native', 'linux-x64', 'tend-spawner')
    // A helper that cannot run here, as one built for another libc would be.
    writeFileSync(prebuiltSpawner, '#!/bin/sh\nexit 127\n')
    env = { ...env, TEND_SPAWNER: 'auto' }

    const fallenBack = await tendJson<DaemonStatus>(['status'])
    expect(fallenBack.spawner).toBe('node')
    const build = `node ${join(installed, 'daemon', 'native', 'build.mjs')}`
    expect(fallenBack.native.build).toBe(build)
    const text = await tend(['status'])
    expect(text.stdout).toContain(`the spawner does not run here: build from source with \`${build}\``)

    const built = await execa(process.execPath, [join(installed, 'daemon', 'native', 'build.mjs')], { cwd: work, reject: false })
    expect(built.exitCode, String(built.stderr)).toBe(0)
    expect(String(built.stderr)).toBe('')
    expect((await tend(['stop'])).exitCode).toBe(0)
    await assertNothingLeft(home)

    const fromSource = await tendJson<DaemonStatus>(['status'])
    expect(fromSource.spawner).toBe('native')
    const source = join(installed, 'dist', 'native')
    expect(fromSource.native.parts).toEqual([
      { name: 'tend.node', from: 'source', path: join(source, 'tend.node') },
      { name: 'tend-spawner', from: 'source', path: join(source, 'tend-spawner') },
      { name: 'tend-netns', from: 'source', path: join(source, 'tend-netns') },
    ])
    expect((await tend(['status'])).stdout).toMatch(new RegExp(`^native: +built from source \\(${source}\\)$`, 'm'))
  })
})
