import { expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const DAEMON_BUNDLE = fileURLToPath(new URL('../../dist/bundle/daemon.cjs', import.meta.url))
/** What bin/bundle.mjs leaves out of the daemon's bundle, to be loaded when first used. */
const LEFT_OUT = ['execa', '@fastify/swagger']

// In a CommonJS bundle a static import of a left-out library becomes require(): it loads at every
// start, and fails for an ES module (execa) before Node 20.19. Only import() keeps both promises.
test.each(LEFT_OUT)('the daemon bundle reaches %s only through import(), never require()', (name) => {
  const source = readFileSync(DAEMON_BUNDLE, 'utf8')
  const quoted = JSON.stringify(name)
  expect(source.includes(`require(${quoted})`), `require(${quoted}) in ${DAEMON_BUNDLE}`).toBe(false)
  expect(source.includes(`import(${quoted})`)).toBe(true)
})
