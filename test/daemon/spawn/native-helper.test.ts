import { describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { NativeSpawner } from '../../../daemon/spawn/native-spawner.js'
import type { KeeperRef } from '../../../daemon/spawn/spawner.js'
import { isAlive } from '../../helpers/processes.js'
import { REPO_ROOT } from '../../helpers/test-daemon.js'
import { waitFor } from '../../helpers/wait-for.js'
import {
  binary,
  exitRecord,
  extraSpawners,
  fifo,
  freshDir,
  keeperGone,
  leftovers,
  request,
  run,
  spawner,
  started,
  startSleeper,
  useNativeSpawner,
} from './native-fixture.js'

/** The native spawner's helper process: killed, closed, or left by its parent, what waits on it settles and its keepers are attached to again. */

useNativeSpawner()

describe('native spawner: its helper process', () => {
  test("when the helper is killed, pending spawns fail, a new helper watches the running children's keepers (their exits still arrive), and serves the next spawn", async () => {
    const own = await NativeSpawner.start(binary!)
    extraSpawners.push(own)
    const dir = freshDir()
    const gate = fifo(dir)
    // Ends with 3 once the test writes to its fifo.
    const child = started(await own.spawn(request({ file: '/bin/sh', argv: ['sh', '-c', 'read line < ./gate; exit 3'], cwd: dir })))
    leftovers.push(child.pid)
    const firstHelper = own.helperPid!
    // Stopped first, so the request below is certainly still unanswered when the helper dies.
    process.kill(firstHelper, 'SIGSTOP')
    const pending = own.spawn(request({ file: '/bin/true' }))
    process.kill(firstHelper, 'SIGKILL')

    expect(await pending).toMatchObject({ started: false, stage: 'spawner', code: 'ESPAWNER' })
    await waitFor('the killed helper to be gone', () => !isAlive(firstHelper), 5000)
    // The child and its keeper are untouched; a new helper is watching the keeper.
    expect(isAlive(child.pid)).toBe(true)
    expect(isAlive(child.keeper!.pid)).toBe(true)
    const secondHelper = await waitFor('a new helper', () => own.helperPid !== firstHelper && own.helperPid)
    writeFileSync(gate, 'go\n')
    expect(await child.exited).toEqual({ exitCode: 3, signal: null })
    await keeperGone(child.keeper!)
    expect(exitRecord(join(dir, 'exit.json'))).toMatchObject({ pid: child.pid, exitCode: 3, signal: null })

    const result = await run(request({ file: '/bin/sh', argv: ['sh', '-c', 'exit 7'] }), own)
    expect(result.exitCode).toBe(7)
    expect(own.helperPid).toBe(secondHelper)
  })

  test('close() stops the helper, leaves running children and their keepers alone, and refuses later spawns and attaches', async () => {
    const own = await NativeSpawner.start(binary!)
    const helper = own.helperPid!
    const child = await startSleeper({}, own)
    const exitError = child.exited.then(
      () => null,
      (error: Error) => error,
    )
    await own.close()
    expect(isAlive(helper)).toBe(false)
    expect(isAlive(child.pid)).toBe(true)
    expect(isAlive(child.keeper!.pid)).toBe(true)
    expect((await exitError)?.message).toMatch(/spawner was closed/)
    expect(await own.spawn(request({ file: '/bin/true' }))).toMatchObject({ started: false, stage: 'spawner', code: 'ESPAWNER' })
    expect(await own.attach({ keeper: child.keeper!, taskPid: child.pid, exitFile: child.req.exitFile })).toMatchObject({ attached: false, code: 'ESPAWNER' })
    expect(own.helperPid).toBeUndefined()
    // The keeper still records the end.
    process.kill(child.pid, 'SIGTERM')
    await waitFor('the exit file', () => exitRecord(child.req.exitFile))
    expect(exitRecord(child.req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 15 })
    await waitFor('the keeper to be gone', () => !isAlive(child.keeper!.pid), 5000)
  })

  test('the helper dies with the process that started it; its keepers and their tasks do not, and another helper attaches to them', async () => {
    const dir = freshDir()
    const req = request({ file: '/bin/sleep', argv: ['sleep', '600'], cwd: dir })
    const script = [
      `import { NativeSpawner } from ${JSON.stringify(join(REPO_ROOT, 'dist', 'daemon', 'spawn', 'native-spawner.js'))}`,
      // The helper's pipes never hold the event loop open: this does, through the spawn.
      'setInterval(() => {}, 1000)',
      'const spawner = await NativeSpawner.start(NativeSpawner.binaryPath())',
      `const child = await spawner.spawn(${JSON.stringify(req)})`,
      'console.log(JSON.stringify({ helper: spawner.helperPid, child }))',
    ].join('\n')
    const owner = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    owner.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    const ownerGone = new Promise((resolve) => owner.once('close', resolve))
    const said = await waitFor('the owner to print its helper and child', () =>
      stdout.includes('\n') ? (JSON.parse(stdout.split('\n')[0]!) as { helper: number; child: { pid: number; keeper: KeeperRef } }) : undefined,
    )
    const { helper, child } = said
    leftovers.push(child.pid)
    expect(isAlive(helper)).toBe(true)
    owner.kill('SIGKILL')
    await ownerGone
    await waitFor(`helper ${helper} to die with its owner`, () => !isAlive(helper), 5000)
    expect(isAlive(child.keeper.pid)).toBe(true)
    expect(isAlive(child.pid)).toBe(true)

    const watching = await spawner.attach({ keeper: child.keeper, taskPid: child.pid, exitFile: req.exitFile })
    if (!watching.attached) throw new Error(`expected to attach, got ${JSON.stringify(watching)}`)
    process.kill(child.pid, 'SIGTERM')
    // The exit is heard once the keeper has exited, so its exit file is there.
    expect(await watching.exited).toEqual({ exitCode: null, signal: 'SIGTERM' })
    expect(exitRecord(req.exitFile)).toMatchObject({ pid: child.pid, exitCode: null, signal: 15 })
  })
})
