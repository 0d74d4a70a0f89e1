import { createRequire } from 'node:module'

/**
 * Loads one of the daemon's N-API addons (built beside its code at install) and checks that it
 * has the functions expected of it. A missing or broken build is a reason, never a throw: each
 * addon has a slower way or a weaker guarantee to fall back on, and the daemon says which.
 */
export function loadAddon<T>(path: string, name: string, functions: ReadonlyArray<keyof T & string>): { addon: T; reason?: undefined } | { addon: null; reason: string } {
  try {
    const addon = createRequire(import.meta.url)(path) as T
    if (functions.some((fn) => typeof addon[fn] !== 'function')) return { addon: null, reason: `${path} is not the ${name} addon` }
    return { addon }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'MODULE_NOT_FOUND' || (code === 'ERR_DLOPEN_FAILED' && /No such file/.test((error as Error).message))) {
      return { addon: null, reason: `the ${name} addon was not built (${path} is missing: building it needs a C compiler and Node's headers)` }
    }
    return { addon: null, reason: `the ${name} addon could not be loaded from ${path}: ${(error as Error).message}` }
  }
}
