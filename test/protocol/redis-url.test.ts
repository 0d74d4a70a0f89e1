import { expect, test } from 'vitest'
import { redactRedisUrl, redisUrlHasPassword } from '../../protocol/cluster.js'

test('a Redis URL carries a credential in its user, its password, or anywhere in its query', () => {
  expect(redisUrlHasPassword('redis://127.0.0.1:6379')).toBe(false)
  expect(redisUrlHasPassword('redis://127.0.0.1:6379/2')).toBe(false)
  expect(redisUrlHasPassword('redis://:pw@127.0.0.1:6379')).toBe(true)
  expect(redisUrlHasPassword('redis://tend@127.0.0.1:6379')).toBe(true)
  // Other clients read ?password= (and tend reads no query at all): it is never shown or taken from argv.
  expect(redisUrlHasPassword('redis://127.0.0.1:6379?password=pw')).toBe(true)
  expect(redisUrlHasPassword('rediss://127.0.0.1:6379/0?tls=1&pass=pw')).toBe(true)
})

test('a Redis URL as shown in a message or a log keeps no password, in its userinfo or its query', () => {
  const planted = 'PLANTED-redis-pw-7f3a'
  for (const url of [
    `redis://:${planted}@127.0.0.1:6379`,
    `redis://u:${planted}@127.0.0.1:6379/1`,
    `redis://127.0.0.1:6379?password=${planted}`,
    `rediss://h:6380/0?x=1&pass=${planted}`,
  ]) {
    const shown = redactRedisUrl(url)
    expect(shown, url).not.toContain(planted)
    expect(shown, url).toMatch(/^rediss?:\/\//)
  }
})
