import { chmodSync, chownSync, mkdirSync, mkdtempSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { findSafeProgram, programFolderProblem, safePath, safePathEntries } from '../../protocol/program-folders.js'
import { checkUnprivilegedUser } from '../helpers/test-daemon.js'

// The cases chown folders to the test user: they run as root, as the suite does (npm test's pretest makes tend-test).
const other = checkUnprivilegedUser()
const ROOT = 0

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A folder of root's, mode 0700, under /tmp (sticky): safe for root, as mkdtemp makes it. */
function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tend-program-folders-'))
  dirs.push(dir)
  return dir
}

function folder(path: string, mode = 0o755, uid = ROOT): string {
  mkdirSync(path, { recursive: true })
  chmodSync(path, mode)
  if (uid !== ROOT) chownSync(path, uid, other.gid)
  return path
}

function program(path: string, mode = 0o755): string {
  writeFileSync(path, '#!/bin/sh\nexit 0\n')
  chmodSync(path, mode)
  return path
}

describe('programFolderProblem: the rule', () => {
  test('mkdtemp makes a 0700 folder of root under the sticky /tmp: safe for root', () => {
    const dir = scratch()
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    expect(programFolderProblem(dir, ROOT)).toBeNull()
    expect(programFolderProblem(folder(join(dir, 'bin')), ROOT)).toBeNull()
    expect(programFolderProblem('/usr/bin', ROOT)).toBeNull()
  })

  test('a relative entry is never safe', () => {
    expect(programFolderProblem('node_modules/.bin', ROOT)).toMatch(/not an absolute path/)
    expect(programFolderProblem('.', ROOT)).toMatch(/not an absolute path/)
  })

  test("another user's folder is unsafe for root, and safe for that user", () => {
    const bin = folder(join(scratch(), 'bin'), 0o755, other.uid)
    expect(programFolderProblem(bin, ROOT)).toBe(`it is writable by uid ${other.uid} (its owner)`)
    expect(programFolderProblem(bin, other.uid)).toBeNull()
  })

  test('a group- or world-writable folder is unsafe, and so is one under such a folder (not sticky)', () => {
    const dir = scratch()
    expect(programFolderProblem(folder(join(dir, 'group'), 0o775), ROOT)).toMatch(/^it is writable by group \d+$/)
    expect(programFolderProblem(folder(join(dir, 'world'), 0o777), ROOT)).toBe('it is writable by every user')
    const below = folder(join(dir, 'open', 'bin'))
    chmodSync(join(dir, 'open'), 0o777)
    expect(programFolderProblem(below, ROOT)).toBe(`${join(dir, 'open')} is writable by every user`)
  })

  test("a sticky world-writable folder above is fine when the one below is root's; the sticky entry itself is not", () => {
    const dir = scratch()
    const shared = folder(join(dir, 'shared'), 0o1777)
    expect(programFolderProblem(folder(join(shared, 'mine')), ROOT)).toBeNull()
    // Someone else's folder inside the sticky one is theirs to fill.
    expect(programFolderProblem(folder(join(shared, 'theirs'), 0o755, other.uid), ROOT)).toMatch(/writable by uid/)
    expect(programFolderProblem(shared, ROOT)).toBe('it is writable by every user')
  })

  test("the npm case: a checkout under a sticky folder, node_modules/.bin of another user's above it", () => {
    const b = folder(join(scratch(), 'B'), 0o1777)
    folder(join(b, 'checkout', 'node_modules', '.bin'))
    const planted = folder(join(b, 'node_modules', '.bin'), 0o755, other.uid)
    chownSync(join(b, 'node_modules'), other.uid, other.gid)
    const path = [join(b, 'checkout', 'node_modules', '.bin'), planted, '/usr/bin'].join(':')
    expect(safePathEntries(path, ROOT)).toEqual({
      entries: [join(b, 'checkout', 'node_modules', '.bin'), '/usr/bin'],
      skipped: [{ path: planted, reason: `it is writable by uid ${other.uid} (its owner)` }],
    })
  })

  test('a symlinked entry counts as its real folder', () => {
    const dir = scratch()
    const unsafe = folder(join(dir, 'unsafe'), 0o777)
    const safe = folder(join(dir, 'safe'))
    symlinkSync(unsafe, join(dir, 'to-unsafe'))
    symlinkSync(safe, join(dir, 'to-safe'))
    expect(programFolderProblem(join(dir, 'to-unsafe'), ROOT)).toBe(`it (it is ${unsafe}) is writable by every user`)
    expect(programFolderProblem(join(dir, 'to-safe'), ROOT)).toBeNull()
  })

  test("an entry through another user's symlink is kept only as its real folder: what is run never goes through the link", () => {
    // The link's owner can point it elsewhere at any time: between the check and the run included.
    const theirs = folder(join(scratch(), 'theirs'), 0o755, other.uid)
    const link = join(theirs, 'bin')
    symlinkSync('/usr/bin', link)
    expect(safePathEntries(link, ROOT)).toEqual({ entries: ['/usr/bin'], skipped: [] })
    expect(safePath(`${link}:/usr/bin`, ROOT)).toBe('/usr/bin')
    expect(findSafeProgram('ls', link, ROOT)).toBe('/usr/bin/ls')
  })

  test('a missing folder is dropped without a word; an empty entry (the working directory) is named', () => {
    const dir = scratch()
    expect(safePathEntries(`${join(dir, 'none')}::/usr/bin`, ROOT)).toEqual({
      entries: ['/usr/bin'],
      skipped: [{ path: '', reason: 'an empty entry means the working directory' }],
    })
    // /bin is /usr/bin on a merged-/usr system: one entry, the real folder.
    expect(safePath(`relative:${join(dir, 'none')}:/usr/bin:/bin`, ROOT)).toBe([...new Set(['/usr/bin', realpathSync('/bin')])].join(':'))
  })
})

describe('findSafeProgram', () => {
  test('passes over a program planted earlier on PATH in an unsafe folder', () => {
    const dir = scratch()
    const planted = folder(join(dir, 'planted'), 0o755, other.uid)
    const good = folder(join(dir, 'good'))
    program(join(planted, 'tool'))
    program(join(good, 'tool'))
    expect(findSafeProgram('tool', `${planted}:${good}`, ROOT)).toBe(join(good, 'tool'))
    expect(findSafeProgram('tool', planted, ROOT)).toBeNull()
    expect(findSafeProgram('tool', planted, other.uid)).toBe(join(planted, 'tool'))
  })

  test('a program others can write, or a link to one in an unsafe folder, is passed over too', () => {
    const dir = scratch()
    const bin = folder(join(dir, 'bin'))
    program(join(bin, 'writable'), 0o777)
    const open = folder(join(dir, 'open'), 0o777)
    symlinkSync(program(join(open, 'real')), join(bin, 'linked'))
    program(join(bin, 'fine'))
    expect(findSafeProgram('writable', bin, ROOT)).toBeNull()
    expect(findSafeProgram('linked', bin, ROOT)).toBeNull()
    expect(findSafeProgram('fine', bin, ROOT)).toBe(join(bin, 'fine'))
    expect(findSafeProgram('bin/fine', dir, ROOT)).toBeNull()
  })
})
