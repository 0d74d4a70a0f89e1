import { describe, expect, test } from 'vitest'
import { createPeerCheck, decidePeer, loadPeerAddon, type OwnIdentity, type PeerInspection } from '../../../daemon/peer/index.js'

describe('the peer check', () => {
  test('without the addon the check is off and says why', () => {
    const check = createPeerCheck(loadPeerAddon('/nonexistent/peer-credentials.node'))
    expect(check.status.enforced).toBe(false)
    expect(check.status.reason).toMatch(/peer-credentials addon was not built/)
    expect(check.check(0)).toMatchObject({ allowed: true })
  })
})

describe('the decision', () => {
  const own: OwnIdentity = {
    namespaces: { user: '4:1', pid: '4:2', mnt: '4:3' },
    visible: { pidDepth: 1, mountId: 22, uidMap: '0 0 4294967295\n' },
  }
  const peer = (overrides: Partial<PeerInspection>): PeerInspection => ({
    pid: 42,
    uid: 1000,
    gid: 1000,
    namespaces: { ...own.namespaces },
    visible: null,
    pinning: 'SO_PEERPIDFD',
    alive: true,
    unreadable: null,
    ...overrides,
  })

  test.each([
    { what: 'the same namespaces', inspection: peer({}), allowed: true },
    { what: 'another mount namespace', inspection: peer({ namespaces: { ...own.namespaces, mnt: '4:9' } }), allowed: false },
    { what: 'pid 0 (an outer pid namespace)', inspection: peer({ pid: 0, namespaces: null }), allowed: false },
    { what: 'a process gone before the check ended', inspection: peer({ alive: false }), allowed: false },
    {
      what: 'unreadable namespaces',
      inspection: peer({ namespaces: { ...own.namespaces, user: null }, unreadable: '/proc/42/ns/user: No such file or directory' }),
      allowed: false,
    },
    {
      what: 'closed namespaces and the same visible facts',
      inspection: peer({ namespaces: { user: null, pid: null, mnt: null }, visible: { ...own.visible! } }),
      allowed: true,
    },
    {
      what: 'closed namespaces, one pid namespace deeper',
      inspection: peer({ namespaces: { user: null, pid: null, mnt: null }, visible: { ...own.visible!, pidDepth: 2 } }),
      allowed: false,
    },
    {
      what: 'closed namespaces and another first mount',
      inspection: peer({ namespaces: { user: null, pid: null, mnt: null }, visible: { ...own.visible!, mountId: 65 } }),
      allowed: false,
    },
    { what: 'closed namespaces and no visible facts', inspection: peer({ namespaces: { user: null, pid: null, mnt: null } }), allowed: false },
  ])('a caller with $what is allowed: $allowed', ({ inspection, allowed }) => {
    expect(decidePeer(own, inspection).allowed).toBe(allowed)
  })
})
