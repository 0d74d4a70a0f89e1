import { afterEach, describe, expect, test } from 'vitest'
import { mkdtempSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalIds } from '../../daemon/sandbox/local-ids.js'

/*
 * The ids the machine's account files hold (daemon/sandbox/local-ids.ts), read from real files:
 * primary groups for idmapped folders, and every id a user, group or subordinate range holds, for
 * the owners' task ids checked again at each launch.
 */

describe('local ids', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  function files(contents: { passwd?: string; group?: string; subuid?: string; subgid?: string }) {
    const dir = mkdtempSync(join(tmpdir(), 'tend-local-ids-'))
    dirs.push(dir)
    const paths = { passwd: join(dir, 'passwd'), group: join(dir, 'group'), subuid: join(dir, 'subuid'), subgid: join(dir, 'subgid') }
    for (const [name, text] of Object.entries(contents)) writeFileSync(paths[name as keyof typeof paths], text)
    return paths
  }

  /** Dates a file back past the settling second, as one written long ago. */
  const settle = (path: string) => utimesSync(path, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000))

  test("a user's primary group is the first passwd entry's; a uid without an entry has none", () => {
    const ids = new LocalIds(
      files({ passwd: 'root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1001::/home/alice:/bin/sh\nalias:x:1000:5::/:/bin/sh\n# comment\nbroken:x:abc:1\n' }),
    )
    expect(ids.primaryGroupOf(0)).toBe(0)
    expect(ids.primaryGroupOf(1000)).toBe(1001)
    expect(ids.primaryGroupOf(4242)).toBeNull()
  })

  test('an id is held by a user, a group or a subordinate range; missing files hold nothing', () => {
    const ids = new LocalIds(
      files({ passwd: 'alice:x:1000:1000::/:/bin/sh\n', group: 'staff:x:50:\n', subuid: 'alice:100000:65536\n', subgid: 'alice:300000:10\n' }),
    )
    for (const id of [1000, 50, 100000, 165535, 300009]) expect(ids.holds(id), String(id)).toBe(true)
    for (const id of [1001, 99999, 165536, 300010]) expect(ids.holds(id), String(id)).toBe(false)
    const empty = new LocalIds(files({}))
    expect(empty.holds(0)).toBe(false)
    expect(empty.primaryGroupOf(0)).toBeNull()
  })

  test('a file is read again once it changes (useradd replaces /etc/passwd by another file)', () => {
    const paths = files({ passwd: 'alice:x:1000:1000::/:/bin/sh\n', group: '' })
    settle(paths.passwd)
    const ids = new LocalIds(paths)
    expect(ids.holds(2_000_000_000)).toBe(false)
    writeFileSync(`${paths.passwd}+`, 'alice:x:1000:1000::/:/bin/sh\nlate:x:2000000000:100::/:/bin/sh\n')
    renameSync(`${paths.passwd}+`, paths.passwd)
    expect(ids.holds(2_000_000_000)).toBe(true)
    expect(ids.primaryGroupOf(2_000_000_000)).toBe(100)
  })
})
