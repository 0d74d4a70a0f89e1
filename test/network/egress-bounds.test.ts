import { describe, expect, test } from 'vitest'
import { SyntheticAddresses } from '../../daemon/network/egress/index.js'
import { SYNTHETIC_NAMES_HELD } from '../../daemon/network/egress/synthetic-addresses.js'

/*
 * What a task can make the daemon hold on its behalf is bounded: synthetic names (each holds
 * listeners, descriptors of the daemon's) give up their address, least recently used first.
 */

describe('synthetic addresses', () => {
  test('past the bound, the least recently answered name gives up its address and its listeners', async () => {
    const listened: string[] = []
    const unlistened: string[] = []
    const addresses = new SyntheticAddresses(
      async (address) => void listened.push(address),
      (address) => void unlistened.push(address),
      3,
    )
    const a = await addressOf(addresses, 'a.example')
    const b = await addressOf(addresses, 'b.example')
    await addressOf(addresses, 'c.example')
    // a is used again: b is now the least recent.
    expect(await addressOf(addresses, 'a.example')).toBe(a)
    const d = await addressOf(addresses, 'd.example')
    expect(unlistened).toEqual([b])
    expect(addresses.nameOf(b)).toBeUndefined()
    expect(addresses.nameOf(a)).toBe('a.example')
    expect(addresses.nameOf(d)).toBe('d.example')
    expect(new Set([a, d, await addressOf(addresses, 'c.example')]).size).toBe(3)
    // b asked again gets an address of its own, with its listeners opened again.
    const again = await addressOf(addresses, 'b.example')
    expect(addresses.nameOf(again)).toBe('b.example')
    expect(listened.filter((address) => address === again)).toHaveLength(1)
  })

  test('ten thousand invented names hold no more than the bound', async () => {
    let open = 0
    let most = 0
    const addresses = new SyntheticAddresses(
      async () => void (most = Math.max(most, ++open)),
      () => void open--,
    )
    for (let i = 0; i < 10_000; i++) await addresses.addressFor(`n${i}.example`, [443])
    expect(most).toBe(SYNTHETIC_NAMES_HELD)
    expect(open).toBe(SYNTHETIC_NAMES_HELD)
  })
})

function addressOf(addresses: SyntheticAddresses, name: string): Promise<string> {
  return addresses.addressFor(name, [80, 443])
}
