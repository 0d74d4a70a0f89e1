import { afterAll, describe, expect, test } from 'vitest'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadDaemonConfig } from '../../daemon/config.js'
import { runCli } from '../helpers/cli.js'
import { createTempHome, daemonEnv } from '../helpers/test-daemon.js'

/*
 * networkAllow and networkHosts: every entry is checked when the daemon reads its settings, and
 * a wrong one stops it with a message naming the entry, what is wrong, and what to write instead.
 */

const base = mkdtempSync('/var/tmp/tend-network-settings-')
afterAll(() => rmSync(base, { recursive: true, force: true }))

function configWith(env: Record<string, string>) {
  const home = mkdtempSync(join(base, 'home-'))
  return () => loadDaemonConfig({ TEND_HOME: home, HOME: base, PATH: process.env.PATH, ...env })
}

describe('networkAllow', () => {
  test('domains, wildcards, ports and public addresses are taken, from the environment and from config.json', () => {
    expect(configWith({ TEND_NETWORK_ALLOW: 'registry.npmjs.org, *.example.org,git.example:22,203.0.113.7:443,[2001:db8::1]:443' })().networkAllow).toEqual([
      'registry.npmjs.org',
      '*.example.org',
      'git.example:22',
      '203.0.113.7:443',
      '[2001:db8::1]:443',
    ])
    const home = mkdtempSync(join(base, 'file-'))
    writeFileSync(join(home, 'config.json'), JSON.stringify({ networkAllow: ['pypi.org'], networkHosts: { 'registry.internal': '10.0.0.5' } }), { mode: 0o600 })
    const config = loadDaemonConfig({ TEND_HOME: home, HOME: base, PATH: process.env.PATH })
    expect(config.networkAllow).toEqual(['pypi.org'])
    expect(config.networkHosts).toEqual({ 'registry.internal': '10.0.0.5' })
  })

  test.each([
    ['https://registry.example/npm', /networkAllow\/0: "https:\/\/registry\.example\/npm" is a URL: give the host .*"registry\.example"/],
    ['registry.example:99999', /networkAllow\/0: "registry\.example:99999" has port "99999": expected a number from 1 to 65535/],
    ['reg*.example', /networkAllow\/0: "reg\*\.example": a wildcard stands only at the start/],
    ['*.org', /would allow every name under a top-level domain/],
    ['under_score..example', /is not a domain name/],
    ['10.0.0.5', /networkAllow\/0: "10\.0\.0\.5" is an internal address .*name it in networkHosts/],
    ['127.0.0.1:8080', /is an internal address/],
    ['[::1]:443', /is an internal address/],
    ['169.254.169.254', /is an internal address/],
    ['192.168.1.0/24', /has a path or a network prefix/],
  ])('%s is refused, naming the entry and what is wrong', (entry, message) => {
    expect(configWith({ TEND_NETWORK_ALLOW: entry })).toThrow(message)
  })
})

describe('networkHosts', () => {
  test('maps names to addresses (pairs in TEND_NETWORK_HOSTS)', () => {
    expect(configWith({ TEND_NETWORK_HOSTS: 'up.test=127.0.0.1, db.internal=10.1.2.3' })().networkHosts).toEqual({
      'up.test': '127.0.0.1',
      'db.internal': '10.1.2.3',
    })
  })

  test.each([
    ['up.test', /expected name=address pairs/],
    ['up.test=not-an-address', /networkHosts\/up\.test: expected an IPv4 or IPv6 address, got "not-an-address"/],
    ['*.test=127.0.0.1', /networkHosts\/\*\.test: expected a domain name \(no wildcard, no port\)/],
  ])('%s is refused', (entry, message) => {
    expect(configWith({ TEND_NETWORK_HOSTS: entry })).toThrow(message)
  })
})

test('a daemon with a wrong entry does not start, and says why on the command line', async () => {
  const home = createTempHome()
  try {
    const result = await runCli(['status'], daemonEnv(home, { TEND_NETWORK_ALLOW: '10.0.0.5' }))
    expect(result.exitCode).not.toBe(0)
    expect(result.stderr).toMatch(/TEND_NETWORK_ALLOW=10\.0\.0\.5: networkAllow\/0: "10\.0\.0\.5" is an internal address/)
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
})
