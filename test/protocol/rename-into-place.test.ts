import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { renameIntoPlace, renameIntoPlaceSync } from '../../protocol/home-file.js'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-rename-into-place-'))
  dirs.push(dir)
  return dir
}

describe.each([
  ['renameIntoPlace', renameIntoPlace],
  ['renameIntoPlaceSync', async (temporary: string, target: string) => renameIntoPlaceSync(temporary, target)],
] as const)('%s', (_name, renameInto) => {
  test('puts the new version in place of the old one', async () => {
    const dir = scratch()
    writeFileSync(join(dir, 'file'), 'old\n')
    writeFileSync(join(dir, 'file.tmp'), 'new\n')
    await renameInto(join(dir, 'file.tmp'), join(dir, 'file'))
    expect(readFileSync(join(dir, 'file'), 'utf8')).toBe('new\n')
    expect(readdirSync(dir)).toEqual(['file'])
  })

  test('a folder in the way, empty or not, is moved aside, kept, and the new version lands', async () => {
    for (const filled of [false, true]) {
      const dir = scratch()
      mkdirSync(join(dir, 'file'))
      if (filled) writeFileSync(join(dir, 'file', 'inside'), 'x')
      writeFileSync(join(dir, 'file.tmp'), 'new\n')
      await renameInto(join(dir, 'file.tmp'), join(dir, 'file'))
      expect(readFileSync(join(dir, 'file'), 'utf8')).toBe('new\n')
      const aside = readdirSync(dir).filter((name) => name.endsWith('.displaced'))
      expect(aside).toHaveLength(1)
      expect(readdirSync(join(dir, aside[0]!))).toEqual(filled ? ['inside'] : [])
    }
  })

  test('any other failure is thrown, and nothing is moved', async () => {
    const dir = scratch()
    writeFileSync(join(dir, 'file'), 'old\n')
    await expect(renameInto(join(dir, 'missing.tmp'), join(dir, 'file'))).rejects.toMatchObject({ code: 'ENOENT' })
    expect(readdirSync(dir)).toEqual(['file'])
  })
})
