import { describe, expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { WIRE } from '../../../daemon/spawn/native-request.js'
import { SETUP_DONE } from '../../../daemon/spawn/spawner.js'
import { REPO_ROOT } from '../../helpers/test-daemon.js'

/** The wire's version, flags and limits are written twice, in C and in TypeScript: they must agree. */

/** The value of each numeric #define in spawner.h, its expression evaluated (numbers, +-*|, parentheses, names defined above). */
function definesOf(header: string): Map<string, number> {
  const defines = new Map<string, number>()
  for (const [, name, expression] of header.matchAll(/^#define (\w+) (.+)$/gm)) {
    const replaced = expression!.replace(/\b([A-Z_]\w*)\b/g, (word) => String(defines.get(word) ?? NaN)).replace(/(\d+)u\b/g, '$1')
    if (!/^[\d\s()+*|-]+$/.test(replaced)) continue
    defines.set(name!, Function(`"use strict"; return (${replaced})`)() as number)
  }
  return defines
}

describe('the wire in spawner.h and in native-request.ts', () => {
  const defines = definesOf(readFileSync(join(REPO_ROOT, 'daemon', 'spawner', 'spawner.h'), 'utf8'))

  test('the same version and flags', () => {
    expect(defines.get('PROTOCOL_VERSION')).toBe(WIRE.version)
    expect({
      stdin: defines.get('SPAWN_STDIN'),
      tty: defines.get('SPAWN_TTY'),
      lifeline: defines.get('SPAWN_LIFELINE'),
      setup: defines.get('SPAWN_SETUP'),
    }).toEqual(WIRE.flags)
    expect(defines.get('SPAWN_FLAGS')).toBe(WIRE.flags.stdin | WIRE.flags.tty | WIRE.flags.lifeline | WIRE.flags.setup)
  })

  test("the same line that says a sandbox is set up (a keeper waits for it where a request's flags say so)", () => {
    const header = readFileSync(join(REPO_ROOT, 'daemon', 'spawner', 'spawner.h'), 'utf8')
    expect(header).toContain(`#define SETUP_DONE_LINE "${SETUP_DONE}\\n"`)
  })

  test('the same limits', () => {
    expect({
      maxRequestBytes: defines.get('MAX_PAYLOAD'),
      maxReqidBytes: defines.get('MAX_REQID'),
      maxSetupWaitMs: defines.get('MAX_SETUP_WAIT_MS'),
      maxExitPathBytes: defines.get('MAX_EXIT_PATH'),
      maxDescriptors: defines.get('MAX_DESCRIPTORS'),
      maxViews: defines.get('MAX_VIEWS'),
      maxCovers: defines.get('MAX_COVERS'),
    }).toEqual({
      maxRequestBytes: WIRE.maxRequestBytes,
      maxReqidBytes: WIRE.maxReqidBytes,
      maxSetupWaitMs: WIRE.maxSetupWaitMs,
      maxExitPathBytes: WIRE.maxExitPathBytes,
      maxDescriptors: WIRE.maxDescriptors,
      maxViews: WIRE.maxViews,
      maxCovers: WIRE.maxCovers,
    })
  })
})
