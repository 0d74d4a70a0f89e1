import type { NetworkCapabilities, SandboxCapabilities } from '../sandbox/capabilities.js'
import type { Spawner } from '../spawn/spawner.js'
import { existsSync } from 'node:fs'
import { OwnerNetwork } from './owner-network.js'

const NSENTER = ['/usr/bin/nsenter', '/bin/nsenter', '/usr/sbin/nsenter', '/sbin/nsenter'].some((path) => existsSync(path))

/**
 * The network modes sandboxed tasks can have here, found once at start: `host` wherever a sandbox
 * runs; `loopback` where an owner's private namespace can be made (probed: one is made and closed)
 * and the spawner can put a task in it; `allow` wherever `loopback` can be (the egress proxy runs in the daemon).
 */
export function networkCapabilities(detected: Pick<SandboxCapabilities, 'missing'>, spawner: Pick<Spawner, 'kind'>): NetworkCapabilities {
  const missing: NetworkCapabilities['missing'] = {}
  if (detected.missing.workspace) {
    for (const mode of ['loopback', 'allow', 'host'] as const) missing[mode] = `no sandbox runs here (${detected.missing.workspace})`
  } else {
    const loopback = loopbackProblem(spawner)
    if (loopback) missing.loopback = missing.allow = loopback
  }
  return { modes: (['loopback', 'allow', 'host'] as const).filter((mode) => missing[mode] === undefined), missing }
}

function loopbackProblem(spawner: Pick<Spawner, 'kind'>): string | null {
  if (spawner.kind !== 'native' && !NSENTER)
    return 'the node fallback spawner puts a task in a private network through nsenter (util-linux), which is not installed'
  try {
    OwnerNetwork.open('the probe').close()
    return null
  } catch (error) {
    return (error as Error).message.replace('the private network of the probe could not be made: ', 'a private network cannot be made here: ')
  }
}
