import { createRequire } from 'node:module'
import { nativeArtifact, nativeBuildCommand } from './artifacts.js'

/** tend.node, every in-process C part: the source build, else the package's prebuilt one (artifacts.ts). */
export const ADDON_PATH = nativeArtifact('tend.node')

/** The addon's parts, by the name each is under on the module (daemon/native/addon.c). */
export type AddonPart = 'peerCredentials' | 'durableWrite' | 'memoryRelease' | 'instanceLock' | 'holderControl' | 'spliceRelay' | 'serviceNotify'

/**
 * Loads one part of the daemon's N-API addon and checks that it has the functions expected of it.
 * A missing or broken build is a reason, never a throw: each part has a slower way or a weaker
 * guarantee to fall back on, and the daemon says which. `name` is the part as the build's warning
 * names it ("the <name> addon was not built").
 */
export function loadAddon<T>(
  part: AddonPart,
  name: string,
  functions: ReadonlyArray<keyof T & string>,
  path: string = ADDON_PATH,
): { addon: T; reason?: undefined } | { addon: null; reason: string } {
  let module: Partial<Record<AddonPart, T>>
  try {
    module = createRequire(import.meta.url)(path) as Partial<Record<AddonPart, T>>
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'MODULE_NOT_FOUND' || (code === 'ERR_DLOPEN_FAILED' && /No such file/.test((error as Error).message))) {
      return {
        addon: null,
        reason: `the ${name} addon was not built (${path} is missing: build it with \`${nativeBuildCommand()}\`, which needs a C compiler and Node's headers)`,
      }
    }
    return {
      addon: null,
      reason: `the ${name} addon could not be loaded from ${path}: ${(error as Error).message} (build it here with \`${nativeBuildCommand()}\`)`,
    }
  }
  const addon = module[part]
  if (addon === undefined || addon === null)
    return { addon: null, reason: `the ${name} addon was not built (${path} has no ${part}: its C did not compile at install)` }
  if (functions.some((fn) => typeof addon[fn] !== 'function')) return { addon: null, reason: `${path} is not the ${name} addon` }
  return { addon }
}
