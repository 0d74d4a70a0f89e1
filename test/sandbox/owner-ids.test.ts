import { describe, expect, test } from 'vitest'
import { spawn } from 'node:child_process'
import { liveProcessUids, OwnerIds, TASK_ID_FIRST, TASK_ID_LAST } from '../../daemon/sandbox/owner-ids.js'
import { checkUnprivilegedUser, setprivArgs } from '../helpers/test-daemon.js'
import { waitFor } from '../helpers/wait-for.js'

/*
 * How owners get their task ids (daemon/sandbox/owner-ids.ts): one per owner, never one for two
 * owners of a daemon, passed over while a live process or the user database holds it. The user
 * database is asked for real unless a test says otherwise; live processes are read from /proc.
 */

const HOME = '/var/lib/tend-owner-ids-test'
const none = async () => new Set<number>()
const free = async () => false

describe('owner ids', () => {
  test('an owner keeps its id; another owner gets another; both in the range', async () => {
    const ids = new OwnerIds(HOME, { liveUids: none })
    const alice = await ids.idsFor('alice')
    const bob = await ids.idsFor('bob')
    expect(alice).toEqual({ uid: expect.any(Number), gid: 'uid' in alice ? alice.uid : -1 })
    expect(await ids.idsFor('alice')).toEqual(alice)
    expect('uid' in bob && 'uid' in alice && bob.uid !== alice.uid).toBe(true)
    for (const each of [alice, bob]) {
      expect('uid' in each && each.uid >= TASK_ID_FIRST && each.uid <= TASK_ID_LAST).toBe(true)
    }
    expect(ids.list()).toEqual([
      { owner: 'alice', ...alice },
      { owner: 'bob', ...bob },
    ])
    // The same home and owner give the same id at the next start.
    expect(await new OwnerIds(HOME, { liveUids: none }).idsFor('alice')).toEqual(alice)
  })

  test('an id another owner holds is passed over for the next: two owners never share one', async () => {
    const aliceOwn = await new OwnerIds(HOME, { liveUids: none, taken: free }).idsFor('alice')
    if (!('uid' in aliceOwn)) throw new Error(aliceOwn.problem)
    const ids = new OwnerIds(HOME, { liveUids: none, taken: free })
    // bob's task from an earlier daemon still runs on the id alice's hash gives.
    ids.adopt('bob', aliceOwn.uid)
    const alice = await ids.idsFor('alice')
    expect(alice).toEqual({ uid: aliceOwn.uid + 1, gid: aliceOwn.uid + 1 })
    expect(await ids.idsFor('bob')).toEqual(aliceOwn)
    // An id spoken for is not adopted by another owner, nor an owner with an id given another.
    ids.adopt('carol', aliceOwn.uid)
    ids.adopt('alice', aliceOwn.uid + 7)
    expect(ids.list()).toEqual([
      { owner: 'bob', ...aliceOwn },
      { owner: 'alice', uid: aliceOwn.uid + 1, gid: aliceOwn.uid + 1 },
    ])
  })

  test('concurrent first tasks of one owner get one id, and of many owners as many ids', async () => {
    const ids = new OwnerIds(HOME, { liveUids: none, taken: free })
    const owners = ['a', 'b', 'c', 'd', 'e', 'f', 'a', 'b', 'c']
    const results = await Promise.all(owners.map((owner) => ids.idsFor(owner)))
    const byOwner = new Map<string, number>()
    for (const [index, result] of results.entries()) {
      if (!('uid' in result)) throw new Error(result.problem)
      const seen = byOwner.get(owners[index]!)
      if (seen !== undefined) expect(result.uid).toBe(seen)
      byOwner.set(owners[index]!, result.uid)
    }
    expect(new Set(byOwner.values()).size).toBe(6)
  })

  test("the uid of a live process on the host (another daemon's task) is passed over", async () => {
    const user = checkUnprivilegedUser()
    const first = await new OwnerIds(HOME, { liveUids: none, taken: free }).idsFor('alice')
    if (!('uid' in first)) throw new Error(first.problem)
    // A real process on that uid, as another home's task would be.
    const other = spawn('setpriv', [...setprivArgs({ ...user, uid: first.uid, gid: first.uid }), '--', 'sleep', '60'], { stdio: 'ignore' })
    try {
      await waitFor(`a process of uid ${first.uid}`, async () => (await liveProcessUids()).has(first.uid))
      expect(await new OwnerIds(HOME, { taken: free }).idsFor('alice')).toEqual({ uid: first.uid + 1, gid: first.uid + 1 })
      // /proc is read for real: root's own processes are there.
      expect((await liveProcessUids()).has(0)).toBe(true)
    } finally {
      other.kill('SIGKILL')
      await new Promise<void>((resolve) => (other.exitCode !== null || other.signalCode !== null ? resolve() : other.once('exit', () => resolve())))
    }
  })

  test("an id the machine's account files hold since its owner got it is given up at the owner's next ask: the owner gets another, and no other owner gets the old one", async () => {
    const held = new Set<number>()
    const ids = new OwnerIds(HOME, { liveUids: none, taken: free, heldLocally: (id) => held.has(id) })
    const first = await ids.idsFor('alice')
    if (!('uid' in first)) throw new Error(first.problem)
    expect(await ids.idsFor('alice')).toEqual(first)
    // useradd -u <alice's id>, while the daemon runs.
    held.add(first.uid)
    const second = await ids.idsFor('alice')
    expect(second).toEqual({ uid: first.uid + 1, gid: first.uid + 1 })
    expect(ids.list()).toEqual([{ owner: 'alice', ...second }])
    // Tasks of alice may still run on the old id: it is no other owner's, even once the user is gone again.
    held.clear()
    ids.adopt('bob', first.uid)
    expect(await ids.idsFor('bob')).not.toEqual(first)
  })

  test('when the user database cannot answer, the owner gets a problem that says so (its tasks are then not run)', async () => {
    const ids = new OwnerIds(HOME, { liveUids: none, taken: async () => Promise.reject(new Error('getent passwd 1 exited 1: broken')) })
    expect(await ids.idsFor('alice')).toEqual({ problem: 'no uid could be chosen for the tasks of alice: getent passwd 1 exited 1: broken' })
    expect(ids.list()).toEqual([])
  })
})
