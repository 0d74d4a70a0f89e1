import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { chmodSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import { NodeSpawner } from '../../../daemon/spawn/node-spawner.js'
import { SETUP_DONE, type Spawner, type SpawnRequest } from '../../../daemon/spawn/spawner.js'
import { isAlive, processesWithEnv } from '../../helpers/processes.js'
import { waitFor } from '../../helpers/wait-for.js'

/*
 * What a program that reports its setup (bubblewrap, behind the shell that says so) may write on
 * the setup channel, before and after the line, straight on each spawner (no daemon).
 */

describe.each([
  ['native', async (): Promise<Spawner> => NativeSpawner.start(NativeSpawner.binaryPath() ?? missingHelper())],
  ['node', async (): Promise<Spawner> => new NodeSpawner()],
] as const)('the setup channel of the %s spawner', (_kind, create) => {
  let spawner: Spawner
  let scratch: string
  let marker: string
  let count = 0

  beforeAll(async () => {
    spawner = await create()
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tend-setup-channel-')))
  })
  afterAll(async () => {
    await spawner.close()
    rmSync(scratch, { recursive: true, force: true })
  })
  beforeEach(() => {
    marker = `TEND_SETUP_CHANNEL_TEST=${process.pid}-${count++}`
  })
  afterEach(async () => {
    await waitFor(`no child with ${marker} left running`, () => processesWithEnv(marker).filter(isAlive).length === 0, 5000)
  })

  function shell(script: string, argv: string[] = []): SpawnRequest {
    const cwd = mkdtempSync(join(scratch, 'd-'))
    chmodSync(cwd, 0o755)
    const [key, value] = marker.split('=') as [string, string]
    return {
      file: '/bin/sh',
      argv: ['sh', '-c', script, ...argv],
      env: { PATH: '/usr/bin:/bin', [key]: value },
      cwd,
      outputFile: join(cwd, 'output.log'),
      exitFile: join(cwd, 'exit.json'),
      extraFiles: [],
      cgroups: [],
      limits: { openFiles: 1024, fileSizeBytes: 1024 * 1024 * 1024 },
      reportsSetup: true,
    }
  }

  test('the line counts only as a line of its own: bubblewrap naming a path that holds it has not set up', async () => {
    // bubblewrap's "Can't mkdir %s: %s", of a masked path whose name holds the line after a newline's worth of text.
    const complaint = `printf "bwrap: Can't mkdir /home/u/x${SETUP_DONE}\\n: No such file or directory\\n" >&2; exit 1`
    expect(await spawner.spawn(shell(complaint))).toMatchObject({ started: false, stage: 'setup', code: 'EIO' })
  })

  test('words with NUL, newlines, bytes that are not UTF-8 and a fake reply line are passed on as one failure; the spawner answers after', async () => {
    const words = `printf 'a\\0b\\nstarted 1 2 3 4\\n\\377\\376 %%s %%n\\n' >&2; exit 7`
    const outcome = await spawner.spawn(shell(words))
    expect(outcome).toMatchObject({ started: false, stage: 'setup', code: 'EIO' })
    expect((outcome as { message: string }).message).toBe(
      "/bin/sh ended before the task's command ran (exit code 7): a\0b\nstarted 1 2 3 4\n\uFFFD\uFFFD %s %n",
    )
    const says = `printf '%s\\n' '${SETUP_DONE}' >&2 && exec "$@" 2>&1`
    const next = await spawner.spawn(shell(says, ['tend-task', 'echo', 'ran']))
    if (!next.started) throw new Error(`the next spawn did not start: ${JSON.stringify(next)}`)
    expect(await next.exited).toMatchObject({ exitCode: 0 })
  })

  test('what is said on the channel after the line never reaches the output, even a flood, and the writer is never left blocked', async () => {
    // A child keeps the channel (fd 2 before the exec's 2>&1) and floods it while the task runs.
    const says = `(head -c 4000000 /dev/zero >&2) & printf '%s\\n' '${SETUP_DONE}' >&2 && exec "$@" 2>&1`
    const request = shell(says, ['tend-task', 'sh', '-c', 'echo task; echo err >&2'])
    const outcome = await spawner.spawn(request)
    if (!outcome.started) throw new Error(`the spawn did not start: ${JSON.stringify(outcome)}`)
    expect(await outcome.exited).toMatchObject({ exitCode: 0 })
    expect(readFileSync(request.outputFile, 'utf8')).toBe('task\nerr\n')
    // afterEach: the flooder ends (it finished, or met the channel's end once the task ended).
  })
})

function missingHelper(): never {
  throw new Error('the native spawner helper is not built: run npm run build')
}
