import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { isAlive } from '../helpers/processes.js'
import { startTestDaemon, TEND_BIN, type TestDaemon } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * `tend mcp`'s default cwd, end to end with the SDK's Client over stdio: the client's roots (the
 * first file:// root that is a real folder, followed when the client says they changed), else the
 * folder the server was started in; a cwd the sandbox refuses says to pass cwd.
 */

let daemon: TestDaemon
let scratch: string
const open: Array<() => Promise<void>> = []

beforeAll(async () => {
  daemon = await startTestDaemon({ env: { TEND_SANDBOX: 'workspace' } })
  scratch = mkdtempSync('/var/tmp/tend-mcp-roots-')
  // A root daemon's tasks run on a uid of their own, which must reach their cwd.
  chmodSync(scratch, 0o711)
})

afterEach(async () => {
  await Promise.all(open.splice(0).map((close) => close()))
})

afterAll(async () => {
  rmSync(scratch, { recursive: true, force: true })
  await daemon?.stop()
})

interface RootsSession {
  call(args: Record<string, unknown>): Promise<{ text: string; isError: boolean }>
  setRoots(uris: string[]): Promise<void>
}

/** `tend mcp` started in `cwd`, its client offering `roots` when given (else no roots capability). */
async function connect(cwd: string, roots?: string[]): Promise<RootsSession> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [TEND_BIN, 'mcp'], env: daemon.env, cwd, stderr: 'pipe' })
  let stderr = ''
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  let current = roots ?? []
  const client = new Client({ name: 'tend-mcp-roots-test', version: '0.0.0' }, roots ? { capabilities: { roots: { listChanged: true } } } : {})
  if (roots) client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: current.map((uri) => ({ uri })) }))
  await client.connect(transport)
  const pid = transport.pid!
  open.push(async () => {
    await client.close()
    await waitFor(`tend mcp server ${pid} to exit (stderr: ${stderr})`, () => !isAlive(pid))
  })
  return {
    async call(args) {
      const result = await client.callTool({ name: 'bash', arguments: args })
      const text = (result.content as Array<{ text?: string }>).map((block) => block.text ?? '').join('\n')
      return { text, isError: result.isError === true }
    },
    async setRoots(uris) {
      current = uris
      await client.sendRootsListChanged()
    },
  }
}

function folder(name: string): string {
  const path = join(scratch, name)
  mkdirSync(path)
  chmodSync(path, 0o755)
  return realpathSync(path)
}

describe('tend mcp: the default cwd', () => {
  test("a call without cwd runs in the client's first root that is a real folder, and follows a changed list", async () => {
    const project = folder('project')
    const other = folder('other')
    const file = join(scratch, 'a-file')
    writeFileSync(file, '')
    const link = join(scratch, 'link-to-project')
    symlinkSync(project, link)
    const session = await connect('/', [
      'https://example.com/not-a-folder',
      pathToFileURL(join(scratch, 'missing')).href,
      pathToFileURL(file).href,
      pathToFileURL(link).href,
      pathToFileURL(other).href,
    ])
    const first = await session.call({ command: 'pwd' })
    expect(first.isError, first.text).toBe(false)
    expect(first.text).toMatch(new RegExp(`^${project}\\n\\[exit code: 0\\]`))
    mkdirSync(join(project, 'src'))
    const relative = await session.call({ command: 'pwd', cwd: 'src' })
    expect(relative.text).toMatch(new RegExp(`^${project}/src\\n\\[exit code: 0\\]`))
    await session.setRoots([pathToFileURL(other).href])
    await waitFor('the call to run in the changed root', async () => (await session.call({ command: 'pwd' })).text.startsWith(`${other}\n`))
  })

  test('without roots, started in /, a call without cwd is refused, naming cwd and the folder to pass', async () => {
    const session = await connect('/')
    const refused = await session.call({ command: 'true' })
    expect(refused.isError).toBe(true)
    expect(refused.text).toMatch(/^the task was refused: cwd: under sandbox workspace \/ would become writable/)
    expect(refused.text).toContain('pass cwd: the absolute path of the project folder you work in')
    expect(refused.text).toContain('cwd was not given: the default is / (the folder tend mcp was started in)')
  })

  test('with roots of which none is a usable folder, the folder it was started in is the default', async () => {
    const started = folder('started-here')
    const session = await connect(started, ['https://example.com/', pathToFileURL(join(scratch, 'nowhere')).href])
    const result = await session.call({ command: 'pwd' })
    expect(result.text).toMatch(new RegExp(`^${started}\\n\\[exit code: 0\\]`))
  })
})
