import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import type { DaemonPerFile } from '../helpers/daemon-per-file.js'

/** What the model reads must be text: no escape sequence, no carriage return, no other control character but \n and \t. */
export const expectPlain = (text: string): void => {
  expect(text, JSON.stringify(text)).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/)
}

/** A task's output.log as written, for the checks that it stays raw. */
export const rawOutputOf = async (shared: DaemonPerFile, id: string): Promise<string> =>
  readFileSync(join((await shared.daemon.client.get(id)).spool, 'output.log'), 'utf8')

/** The task id a bash result names, tracked so that the test leaves no process of it behind. */
export const trackedTaskIdIn = (shared: DaemonPerFile, text: string): string => {
  const match = /background task ([0-9a-z]{12})/.exec(text)
  if (!match) throw new Error(`no task id in: ${text}`)
  return shared.track(match[1]!)
}
