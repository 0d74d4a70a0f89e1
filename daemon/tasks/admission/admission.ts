import {
  DEFAULT_NETWORK,
  DEFAULT_TERMINAL_SIZE,
  networkModeOf,
  TendError,
  type NetworkMode,
  type SandboxProfile,
  type StartTaskBody,
  type TerminalSize,
} from '../../../protocol/index.js'
import { parseAllowEntry } from '../../network/allowlist.js'
import type { DaemonConfig } from '../../config.js'
import type { SandboxCapabilities } from '../../sandbox/index.js'
import { STDIN_PIPE_UNSUPPORTED, TTY_UNSUPPORTED, type Spawner } from '../../spawn/spawner.js'

/** What decides whether a start request can be run here. */
export interface AdmissionFacts {
  /** The profile a request that names none gets (the daemon's `sandbox` setting). */
  defaultSandbox: SandboxProfile
  capabilities: SandboxCapabilities
  spawnerKind: Spawner['kind']
  /** The limits a task that gives none gets. */
  limitDefaults: Pick<DaemonConfig, 'strictMemoryBytes' | 'strictPidsMax' | 'workspacePidsMax'>
  /** Whether the request acts for an owner (an agent): only the operator may widen a task's network. */
  actingForOwner?: boolean
}

/** A task's limits as recorded on it: what its groups enforce (null: none of that kind). */
export interface TaskLimits {
  memoryBytes: number | null
  pidsMax: number | null
}

/**
 * The sandbox profile and terminal a start request asks for, once it is known they can be given
 * here: throws the coded error that names what cannot (a field that contradicts another, a
 * profile or a stdin this machine lacks). The schema has checked each field on its own already.
 */
export function checkStartRequest(
  request: StartTaskBody,
  facts: AdmissionFacts,
): { sandbox: SandboxProfile; tty: TerminalSize | null; limits: TaskLimits; network: NetworkMode; allowNet: string[] } {
  if (request.shell && request.command.length !== 1) {
    throw new TendError('TEND_ERR_VALIDATION', {
      detail: `body/command: with shell: true, expected exactly one shell line, got ${request.command.length} items`,
    })
  }
  if (!request.cwd.startsWith('/')) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: `body/cwd: expected an absolute path, got ${JSON.stringify(request.cwd)}` })
  }
  const sandbox = request.sandbox ?? facts.defaultSandbox
  if (!facts.capabilities.profiles.includes(sandbox)) {
    throw new TendError('TEND_ERR_SANDBOX_UNAVAILABLE', {
      profile: sandbox,
      detail: facts.capabilities.missing[sandbox as 'workspace' | 'strict'] ?? 'unknown reason',
    })
  }
  const limits = taskLimits(request, sandbox, facts)
  const tty = terminalSize(request.tty)
  if (tty && request.stdin === 'null') {
    throw new TendError('TEND_ERR_VALIDATION', { detail: "body/stdin: a task on a terminal takes its input from the terminal, got stdin 'null' with tty" })
  }
  if (tty && facts.spawnerKind !== 'native') throw new TendError('TEND_ERR_TTY_UNAVAILABLE', { detail: TTY_UNSUPPORTED })
  if (request.stdin === 'pipe' && facts.spawnerKind !== 'native') {
    throw new TendError('TEND_ERR_STDIN_UNAVAILABLE', { detail: STDIN_PIPE_UNSUPPORTED })
  }
  if (sandbox === 'off' && request.writablePaths?.length) {
    throw new TendError('TEND_ERR_VALIDATION', { detail: 'body/writablePaths: writable paths need a sandbox (workspace or strict), got sandbox off' })
  }
  const { network, allowNet } = networkOf(request, sandbox, facts)
  return { sandbox, tty, limits, network, allowNet }
}

/**
 * The network a task gets: as asked, or loopback (a sandbox) and host (`off`). A mode this machine
 * cannot enforce is refused, never widened; destinations beyond the daemon's list come only from
 * the operator, and only for `allow`.
 */
function networkOf(request: StartTaskBody, sandbox: SandboxProfile, facts: AdmissionFacts): { network: NetworkMode; allowNet: string[] } {
  const asked = request.network === undefined ? null : networkModeOf(request.network)
  if (sandbox === 'off') {
    if (asked !== null && asked !== 'host')
      throw new TendError('TEND_ERR_VALIDATION', {
        detail: `body/network: network ${asked} needs a sandbox (workspace or strict); with sandbox off a task has the host's network`,
      })
  }
  const network = sandbox === 'off' ? 'host' : (asked ?? DEFAULT_NETWORK)
  const allowNet = request.allowNet ?? []
  if (allowNet.length > 0) {
    if (facts.actingForOwner) {
      throw new TendError('TEND_ERR_VALIDATION', {
        detail:
          'body/allowNet: only the operator may allow a task more destinations; ' +
          "a request acting for an owner (an agent) gets the daemon's networkAllow with network allow",
      })
    }
    if (network !== 'allow')
      throw new TendError('TEND_ERR_VALIDATION', {
        detail: `body/allowNet: destinations are allowed through the egress proxy, which only network allow has, got network ${network}`,
      })
    for (const [index, entry] of allowNet.entries()) {
      const parsed = parseAllowEntry(entry)
      if ('problem' in parsed) throw new TendError('TEND_ERR_VALIDATION', { detail: `body/allowNet/${index}: ${parsed.problem}` })
    }
  }
  if (sandbox !== 'off') {
    const missing = facts.capabilities.network.missing[network]
    if (missing !== undefined) throw new TendError('TEND_ERR_NETWORK_UNAVAILABLE', { mode: network, detail: missing })
  }
  return { network, allowNet }
}

/**
 * The limits a task runs under: strict always has both; workspace a process limit wherever
 * cgroups can enforce it, and a memory limit when it asks (its memory is counted either way). A
 * limit that cannot be enforced here is refused, never ignored.
 */
function taskLimits(request: StartTaskBody, sandbox: SandboxProfile, facts: AdmissionFacts): TaskLimits {
  const asked = request.memoryBytes !== undefined ? 'memoryBytes' : request.pidsMax !== undefined ? 'pidsMax' : null
  if (sandbox === 'off') {
    if (asked) throw new TendError('TEND_ERR_VALIDATION', { detail: `body/${asked}: limits need sandbox workspace or strict, got sandbox off` })
    return { memoryBytes: null, pidsMax: null }
  }
  const { cgroups } = facts.capabilities
  // Every group of a task hangs on its pids group: without one, neither limit can be set.
  const lacking = asked && !cgroups.pids ? asked : request.memoryBytes !== undefined && !cgroups.memory ? 'memoryBytes' : null
  if (lacking)
    throw new TendError('TEND_ERR_SANDBOX_UNAVAILABLE', {
      profile: sandbox,
      detail: `body/${lacking} needs a per-task cgroup, and ${cgroups.problem ?? 'there is none here'}`,
    })
  const defaults = facts.limitDefaults
  if (sandbox === 'strict') return { memoryBytes: request.memoryBytes ?? defaults.strictMemoryBytes, pidsMax: request.pidsMax ?? defaults.strictPidsMax }
  return { memoryBytes: request.memoryBytes ?? null, pidsMax: request.pidsMax ?? (cgroups.pids ? defaults.workspacePidsMax : null) }
}

/** The terminal a start request asks for (true: the default size), or null for none. */
function terminalSize(asked: StartTaskBody['tty']): TerminalSize | null {
  if (asked === undefined || asked === false) return null
  if (asked === true) return { ...DEFAULT_TERMINAL_SIZE }
  return { cols: asked.cols ?? DEFAULT_TERMINAL_SIZE.cols, rows: asked.rows ?? DEFAULT_TERMINAL_SIZE.rows }
}
