import { realpath } from 'node:fs/promises'
import { TendError, type SandboxProfile } from '../../protocol/index.js'

/**
 * System folders a sandboxed task may not get write access to, as its cwd or a writable path:
 * the whole file system, the host's /proc, /sys and /dev (host processes, kernel and cgroup
 * settings, devices), programs and their configuration, and the folders where services keep
 * their state and sockets.
 */
const PROTECTED = ['/proc', '/sys', '/dev', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/boot', '/run', '/var/run', '/var/lib', '/var/log']

/** Refuses a cwd or writable path that is /, or is or lies in a protected system folder (symlinks resolved). */
export async function validateWritablePaths(profile: SandboxProfile, cwd: string, writablePaths: string[]): Promise<void> {
  if (profile === 'off') return
  for (const [field, path] of [['cwd', cwd] as const, ...writablePaths.map((each) => ['writablePaths', each] as const)]) {
    const real = await realpath(path).catch(() => path)
    const normalized = real.replace(/\/+$/, '') || '/'
    const hit = normalized === '/' ? '/' : PROTECTED.find((root) => normalized === root || normalized.startsWith(`${root}/`))
    if (hit) {
      throw new TendError('TEND_ERR_VALIDATION', {
        detail: `body/${field}: under sandbox ${profile} ${path} would become writable${real !== path ? ` (it is ${real})` : ''}, and ${hit === '/' ? 'that is the whole file system' : `${hit} belongs to the system`}: choose a project folder, or sandbox off`,
      })
    }
  }
}
