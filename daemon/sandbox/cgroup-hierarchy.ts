import { findCgroupRoots, type CgroupParentOptions, type CgroupRoots } from './cgroup-parent.js'
import { findUnifiedRoot, type UnifiedFound, type UnifiedRootOptions } from './cgroup-v2-root.js'

/** Where task groups are made, on which hierarchy, and why. */
export interface TaskCgroupRoots extends CgroupRoots {
  /** The daemon's cgroup v2 folder of task groups (every task gets a group in it), or null: none. */
  unified: { path: string; controllers: string[] } | null
  /** Which hierarchy the task groups are on, and why, for `tend status`. */
  hierarchy: CgroupHierarchy
}

export interface CgroupHierarchy {
  /** 2: each task has a v2 group (its limits on v2, or on v1 beside it where `limits` says so); 1: v1 groups only; null: no groups. */
  version: 1 | 2 | null
  /** The daemon's folder of task groups on that hierarchy (v1: its pids folder). */
  path: string | null
  /** Where the limits are (memory, pids): `v2`, `v1` (a hybrid host whose v2 subtree lacks the controllers), or null: none. */
  limits: 1 | 2 | null
  why: string
}

export interface TaskCgroupOptions extends CgroupParentOptions {
  /** Setting cgroupRoot: the v2 subtree (`own`, or an absolute folder), or null: none given. */
  unifiedSetting: string | null
  /** Tests: the v2 discovery's own options (fake trees). */
  unified?: Partial<UnifiedRootOptions>
}

const LIMIT_CONTROLLERS = ['memory', 'pids'] as const
const NOT_GIVEN = 'no cgroup v2 subtree was given to the daemon (setting cgroupRoot: "own" under a unit with Delegate=yes, or a folder delegated to its uid)'

/**
 * Finds the hierarchy for the daemon's task groups: the v2 subtree it was given, when usable; with
 * it, v1's memory and pids folders only where the subtree lacks those controllers (a hybrid host).
 * Without a usable v2 subtree, v1 as before, and status says why.
 */
export function findTaskCgroupRoots(options: TaskCgroupOptions): TaskCgroupRoots {
  const unified =
    options.unifiedSetting === null
      ? null
      : findUnifiedRoot({
          setting: options.unifiedSetting,
          uid: options.uid,
          daemon: options.daemon,
          ...(options.pidsMax !== undefined ? { pidsMax: options.pidsMax } : {}),
          ...options.unified,
        })
  const limitsOnV2 = unified !== null && 'root' in unified && LIMIT_CONTROLLERS.every((name) => unified.root.controllers.includes(name))
  return chooseHierarchy(limitsOnV2 ? null : findCgroupRoots(options), unified)
}

/**
 * Puts v1's folders (null: not looked for, the v2 subtree has the limits) and the v2 subtree found
 * (null: none given) together. Never silent: every fallback says why in `hierarchy.why`, and a
 * limit that neither hierarchy can hold says why in `problem` (strict is then unavailable).
 */
export function chooseHierarchy(v1: CgroupRoots | null, unified: UnifiedFound | null): TaskCgroupRoots {
  if (unified !== null && 'root' in unified) {
    const { root } = unified
    const lacking = LIMIT_CONTROLLERS.filter((name) => !root.controllers.includes(name))
    const group = { path: root.path, controllers: root.controllers }
    if (lacking.length === 0 || v1 === null) {
      return {
        memory: root.path,
        pids: root.path,
        problem: null,
        allTasksPidsMax: root.allTasksPidsMax,
        unified: group,
        hierarchy: { version: 2, path: root.path, limits: 2, why: root.why },
      }
    }
    const lacks = `the v2 subtree ${root.subtree} lacks the ${lacking.join(' and ')} controller${lacking.length > 1 ? 's' : ''}`
    const hybrid = v1.memory !== null && v1.pids !== null
    const why = hybrid
      ? `${root.why}; limits on cgroup v1 memory and pids beside it (${lacks}: a hybrid host)`
      : `${root.why}; no per-task limits: ${lacks} (as root, enable them in the cgroup.subtree_control of every folder above it), and ${v1.problem}`
    return {
      ...v1,
      problem: hybrid ? v1.problem : `${lacks}, and ${v1.problem}`,
      unified: group,
      hierarchy: { version: 2, path: root.path, limits: hybrid ? 1 : null, why },
    }
  }
  const roots = v1 ?? { memory: null, pids: null, problem: NOT_GIVEN }
  const because = unified === null ? NOT_GIVEN : `the cgroup v2 subtree given is not usable: ${unified.problem}`
  const problem = unified === null || roots.problem === null ? roots.problem : `${roots.problem}; ${because}`
  return {
    ...roots,
    problem,
    unified: null,
    hierarchy: { version: roots.pids !== null ? 1 : null, path: roots.pids, limits: roots.memory !== null && roots.pids !== null ? 1 : null, why: because },
  }
}
