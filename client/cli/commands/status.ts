import type { Command } from 'commander'
import { dirname } from 'node:path'
import { formatBytes, formatLabels, type DaemonStatus } from '../../../protocol/index.js'
import { skippedEntryText } from '../../../protocol/program-folders.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson } from '../output.js'

export function registerStatusCommand(program: Command): void {
  const command = program.command('status').summary('daemon pid, version, socket, spool use, sandbox capability')
  command.action(
    action(command, async ({ client, io }) => {
      const status = await client.status()
      if (io.json) {
        printJson(io, status)
        return EXIT.ok
      }
      io.out(
        [
          `daemon:      pid ${status.pid}, tend ${status.version}, up since ${status.startedAt}`,
          `socket:      ${status.socket}`,
          `tasks:       ${status.tasks.running} running, ${status.tasks.queued} queued, ${status.tasks.finished} finished`,
          `limits:      ${status.concurrency} at once, ${status.perOwnerConcurrency} per owner`,
          ...workerLines(status.worker),
          `spool:       ${status.spool.path}, ${formatBytes(status.spool.usedBytes)} of ${formatBytes(status.spool.quotaBytes)}`,
          ...spoolHealthLines(status.spool),
          `spawner:     ` +
            (status.spawner === 'native'
              ? 'native helper'
              : 'node child_process (the native helper was not built or does not work here, see daemon.log: slower starts)'),
          ...nativeLines(status),
          ...(status.pathSkipped ?? []).map((entry) => `path:        ${skippedEntryText(entry)}`),
          `callers:     ${status.peerCheck.enforced ? 'requests from sandboxed tasks are refused' : 'NOT checked: sandboxed tasks can drive this daemon'}` +
            `${status.peerCheck.reason ? ` (${status.peerCheck.reason})` : ''}`,
          `sandbox:     default ${status.sandbox.default}; can enforce ${status.sandbox.profiles.join(', ')}` +
            (status.sandbox.bubblewrap ? ` (bubblewrap ${status.sandbox.bubblewrap.version} at ${status.sandbox.bubblewrap.path})` : ''),
          ...Object.entries(status.sandbox.missing).map(([profile, why]) => `             ${profile} unavailable: ${why}`),
          `identity:    ${identityLine(status.sandbox.identity)}`,
          ...taskUidsLine(status.sandbox.identity),
          `keyring:     ` +
            (status.sandbox.keyring.fresh
              ? 'every task gets a session keyring of its own'
              : `tasks share the daemon's session keyring: ${status.sandbox.keyring.reason}`),
          ...seccompLines(status.sandbox.filters),
          ...cgroupLines(status.sandbox.cgroups.hierarchy),
          ...boundsLines(status.sandbox.bounds),
          ...networkLines(status.sandbox.network),
        ].join('\n'),
      )
      return EXIT.ok
    }),
  )
}

/** Its part in a cluster's shared queue, when it is a worker of one. */
function workerLines(worker: DaemonStatus['worker']): string[] {
  if (!worker) return []
  const labels = formatLabels(worker.labels)
  const { count, ids } = worker.running
  const running = `${count} cluster task${count === 1 ? '' : 's'} running${count > 0 ? `: ${ids.join(' ')}` : ''}`
  return [`cluster:     worker ${worker.name}${labels ? ` (${labels})` : ''} on ${worker.redis}, queue ${worker.queue}; ${running}`]
}

const ORIGINS = { prebuilt: 'prebuilt', source: 'built from source', none: 'none' } as const

/**
 * Which native parts the daemon found (the package's prebuilt ones, a source build, or none), and
 * the command that builds them where they are missing or do not run; nothing from an older daemon.
 */
function nativeOrigin(native: NonNullable<DaemonStatus['native']>): string {
  const origins = new Set(native.parts.map((part) => part.from))
  if (origins.size > 1) return native.parts.map((part) => `${part.name} ${ORIGINS[part.from]}`).join(', ')
  const folders = new Set(native.parts.flatMap((part) => (part.path ? [dirname(part.path)] : [])))
  const where = folders.size === 1 ? ` (${[...folders][0]})` : ''
  if (origins.has('prebuilt')) return `prebuilt for ${native.platform}${where}`
  if (origins.has('source')) return `built from source${where}`
  return `none for ${native.platform}`
}

function nativeLines(status: DaemonStatus): string[] {
  const native = status.native as DaemonStatus['native'] | undefined
  if (!native) return []
  const origins = new Set(native.parts.map((part) => part.from))
  const lines = [`native:      ${nativeOrigin(native)}`]
  const spawnerUnused = status.spawner === 'node' && native.parts.some((part) => part.name === 'tend-spawner' && part.from !== 'none')
  if (origins.has('none') || spawnerUnused)
    lines.push(
      `             ${spawnerUnused ? 'the spawner does not run here' : 'missing parts'}: ` +
        `build from source with \`${native.build}\` (needs cc), then restart the daemon`,
    )
  return lines
}

/** Which network modes sandboxed tasks can have, why not the others, and the allowlist; nothing from an older daemon. */
function networkLines(network: DaemonStatus['sandbox']['network'] | undefined): string[] {
  if (!network) return []
  const lines = [`network:     default ${network.default}; can enforce ${network.modes.join(', ') || 'none'}`]
  for (const [mode, why] of Object.entries(network.missing)) lines.push(`             ${mode} unavailable: ${why}`)
  lines.push(`             allowlist (networkAllow): ${network.allow.length > 0 ? network.allow.join(' ') : 'empty: allow tasks reach no host'}`)
  return lines
}

/** Whether records can be written, and the reserve; nothing from a daemon that does not say (an older one). */
function spoolHealthLines(spool: DaemonStatus['spool']): string[] {
  const lines: string[] = []
  if (spool.writable === false)
    lines.push(`             NOT writable: ${spool.problem ?? 'unknown'}; ${spool.heldRecords} task record(s) held in memory until it is`)
  if (spool.reserveHeld === false)
    lines.push(`             reserve of ${formatBytes(spool.reserveBytes)} spent on a full disk: new tasks are refused until there is room to make it again`)
  return lines
}

/** Which seccomp filter each profile gets, and what it denies. */
function seccompLines(filters: DaemonStatus['sandbox']['filters']): string[] {
  const lines = (['workspace', 'strict'] as const).map(
    (profile) => `${profile}: the ${filters[profile].name} filter (denies ${filters[profile].denies.join(', ')})`,
  )
  return [...lines, 'off: none'].map((line, index) => `${index === 0 ? 'seccomp:     ' : '             '}${line}`)
}

/** Who workspace and strict tasks run as, and off tasks. */
function identityLine(identity: DaemonStatus['sandbox']['identity']): string {
  const off = `off tasks as ${identity.off.as === 'taskUser' ? 'taskUser' : 'the daemon'} (uid ${identity.off.uid})`
  if (identity.fallback) return `sandboxed tasks run as uid ${identity.uid} without capabilities: ${identity.fallback}; ${off}`
  if (identity.as === 'task') {
    const home = identity.home ? `, and see ${identity.home} read-only` : ''
    const range = identity.range ? `, from ${identity.range.first}-${identity.range.last}` : ''
    return `sandboxed tasks run as a uid and gid of their owner's own${range} (what they make in their folders belongs to each folder's owner${home}); ${off}`
  }
  return `sandboxed tasks run as ${identity.as === 'taskUser' ? 'taskUser' : 'the daemon'} (uid ${identity.uid} gid ${identity.gid}); ${off}`
}

/** Owners shown by name in the text status; --json lists them all. */
const OWNERS_SHOWN = 20

/** Each owner's task uid (gid the same), when sandboxed tasks run on their own identity. */
function taskUidsLine(identity: DaemonStatus['sandbox']['identity']): string[] {
  if (identity.as !== 'task' || identity.fallback) return []
  const shown = identity.owners.slice(0, OWNERS_SHOWN).map(({ owner, uid }) => `${owner} ${uid}`)
  const more = identity.owners.length > OWNERS_SHOWN ? `, and ${identity.owners.length - OWNERS_SHOWN} more (--json lists them)` : ''
  return [`task uids:   ${shown.length > 0 ? shown.join(', ') : 'none given yet'}${more}`]
}

/** Which hierarchy task groups are on, and why (absent from an older daemon's status). */
function cgroupLines(hierarchy: DaemonStatus['sandbox']['cgroups']['hierarchy']): string[] {
  if (!hierarchy) return []
  const where = hierarchy.version === null ? 'none' : `v${hierarchy.version}${hierarchy.path ? ` at ${hierarchy.path}` : ''}`
  const limits = hierarchy.version === 2 && hierarchy.limits === 1 ? ' (limits on v1)' : ''
  return [`cgroups:     ${where}${limits}: ${hierarchy.why}`]
}

type ProfileBounds = NonNullable<DaemonStatus['sandbox']['bounds']['workspace']>

/** One line: what each sandboxed profile bounds per task here; the next says why processes and memory are not, when they are not. */
function boundsLines(bounds: DaemonStatus['sandbox']['bounds']): string[] {
  const profiles = (['workspace', 'strict'] as const).filter((profile) => bounds[profile]).map((profile) => `${profile}: ${describeBounds(bounds[profile]!)}`)
  if (profiles.length === 0) return []
  const together = bounds.allTasksPidsMax ? [`             all tasks together: ${bounds.allTasksPidsMax} processes`] : []
  if (bounds.allDaemonsPidsMax) together.push(`             all daemons together: ${bounds.allDaemonsPidsMax} processes`)
  else if (bounds.allDaemonsProblem) together.push(`             all daemons together: no limit: ${bounds.allDaemonsProblem}`)
  return [`bounds:      ${profiles.join('; ')}`, ...together, ...(bounds.reason ? [`             no process or memory bounds: ${bounds.reason}`] : [])]
}

function describeBounds(bounds: ProfileBounds): string {
  const processes = bounds.pidsMax === null ? 'processes unbounded' : `${bounds.pidsMax} processes`
  const memory =
    bounds.memoryBytes !== null ? `memory ${formatBytes(bounds.memoryBytes)}` : bounds.memoryAccounted ? 'memory counted (no limit)' : 'memory unbounded'
  return `${processes}, ${memory}, tmpfs ${formatBytes(bounds.tmpfsBytes)} in all`
}
