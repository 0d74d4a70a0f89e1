import { mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { chooseWorkingFolder, pathOfFileUri, processFolder } from '../../tools/core/index.js'

const scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tend-working-folder-')))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('the default working folder', () => {
  test('the first candidate that is a real folder wins, by its real path; relative, missing and non-folder candidates are skipped', async () => {
    const file = join(scratch, 'file')
    writeFileSync(file, '')
    const link = join(scratch, 'link')
    symlinkSync(scratch, link)
    const chosen = await chooseWorkingFolder([
      { path: 'relative/folder', source: 'a' },
      { path: join(scratch, 'missing'), source: 'b' },
      { path: file, source: 'c' },
      { path: link, source: 'd' },
    ])
    expect(chosen).toEqual({ path: scratch, source: 'd' })
  })

  test('without a usable candidate, the process folder is the default', async () => {
    expect(await chooseWorkingFolder([{ path: join(scratch, 'missing'), source: 'b' }])).toEqual(processFolder())
    expect(processFolder().path).toBe(process.cwd())
  })

  test('only file:// URIs name a path', () => {
    expect(pathOfFileUri('file:///srv/project')).toBe('/srv/project')
    expect(pathOfFileUri('file:///srv/a%20b')).toBe('/srv/a b')
    expect(pathOfFileUri('https://example.com/x')).toBeUndefined()
    expect(pathOfFileUri('file://elsewhere/srv')).toBeUndefined()
    expect(pathOfFileUri('not a uri')).toBeUndefined()
  })
})
