/**
 * The seccomp filters of the sandboxed profiles, as bubblewrap loads them (`--seccomp FD`).
 *
 * `baseline` (workspace, and under strict's): what an agent's builds and tests never need, and
 * every way to plant a privilege on the host. Keyrings, bpf, perf events, userfaultfd, io_uring
 * (whose requests would bypass the mode checks below), kernel modules and kexec fail with EPERM. A
 * setuid or setgid bit in a mode (the chmod family; open, creat, mkdir, mknod that create with it)
 * fails with EPERM. Every setxattr answers EOPNOTSUPP: `security.capability` cannot be told from
 * other names in BPF (a pointer), so user xattrs and ACLs go too, and "not supported" is what lets
 * `cp -p` and `mv` carry on without them, as on a file system that has none. New user namespaces
 * (unshare, clone with CLONE_NEWUSER) fail with EPERM. fallocate with any mode but plain allocation
 * (keep size, punch or zero a range, ...) answers EOPNOTSUPP: past the end of a file it takes disk
 * that neither the file's size nor RLIMIT_FSIZE shows or bounds (the task's output.log included, in
 * the spool), while plain allocation grows the size, which both do. So do the ioctl requests that
 * the kernel turns into such a fallocate (FS_IOC_RESVSP and its kin, seccomp-tables.ts). clone3 and openat2 hide their flags and mode
 * in a struct BPF cannot read: they answer ENOSYS, and callers fall back to clone and openat. A
 * call of another ABI (ia32 through `int $0x80`, arm32) kills the process: the rules name native
 * numbers only. x32 calls fail with EPERM.
 *
 * `strict` adds: ptrace and process_vm_readv/writev (EPERM), new Unix-domain sockets and socket
 * pairs (EAFNOSUPPORT).
 */

import { assembleFilter, RET_KILL_PROCESS, retErrno, type ArgCondition, type Rule } from './seccomp-bpf.js'
import {
  AF_UNIX,
  ARCH_TABLES,
  CLONE_NEWUSER,
  EAFNOSUPPORT,
  ENOSYS,
  EOPNOTSUPP,
  EPERM,
  O_CREAT,
  O_TMPFILE_BIT,
  S_ISGID,
  S_ISUID,
  SPACE_RESERVATION_IOCTLS,
  type ArchTable,
  type SyscallName,
} from './seccomp-tables.js'

export type SeccompFilter = 'baseline' | 'strict'

/** The filter each profile gets (`off` none). */
export const PROFILE_FILTERS = { off: null, workspace: 'baseline', strict: 'strict' } as const satisfies Record<string, SeccompFilter | null>

/** What each filter denies, in words, for `tend status`. */
const FILTER_DENIES: Readonly<Record<SeccompFilter, readonly string[]>> = {
  baseline: [
    'setuid/setgid modes',
    'extended attributes (file capabilities)',
    'new user namespaces',
    'keyrings',
    'bpf',
    'perf_event_open',
    'userfaultfd',
    'io_uring',
    'kernel modules',
    'kexec',
    'fallocate past the end of a file (and its ioctl forms)',
    'ia32 and x32 system calls',
  ],
  strict: ['everything the baseline denies', 'ptrace', 'process_vm_readv/writev', 'Unix-domain sockets'],
}

/** Each profile's filter as `tend status` shows it. */
export function seccompFilters(): { off: null; workspace: FilterSummary; strict: FilterSummary } {
  const summary = (name: SeccompFilter): FilterSummary => ({ name, denies: [...FILTER_DENIES[name]] })
  return { off: null, workspace: summary(PROFILE_FILTERS.workspace), strict: summary(PROFILE_FILTERS.strict) }
}

export interface FilterSummary {
  name: SeccompFilter
  denies: string[]
}

export function seccompSupported(arch: string = process.arch): boolean {
  return arch in ARCH_TABLES
}

const SET_ID_BITS = S_ISUID | S_ISGID

const programs = new Map<string, Buffer>()

/** The classic-BPF program of a filter for this architecture (made once; callers only read it). */
export function seccompProgram(filter: SeccompFilter, arch: string = process.arch): Buffer {
  const key = `${filter} ${arch}`
  let program = programs.get(key)
  if (!program) programs.set(key, (program = assembleProgram(filter, arch)))
  return program
}

function assembleProgram(filter: SeccompFilter, arch: string): Buffer {
  const table = ARCH_TABLES[arch]
  if (!table) throw new Error(`no seccomp filter for architecture ${arch}`)
  const rules = filter === 'strict' ? [...baselineRules(table), ...strictRules(table)] : baselineRules(table)
  return assembleFilter({
    audit: table.audit,
    foreignArchRet: RET_KILL_PROCESS,
    ...(table.x32Bit ? { numbersFrom: { nr: table.x32Bit, ret: retErrno(EPERM) } } : {}),
    rules,
  })
}

function baselineRules(table: ArchTable): Rule[] {
  const rule = rulesFor(table)
  const setIdIn = (arg: number): ArgCondition[] => [{ arg, anyOf: SET_ID_BITS }]
  return [
    ...rule(['keyctl', 'add_key', 'request_key', 'bpf', 'perf_event_open', 'userfaultfd'], EPERM),
    ...rule(['io_uring_setup', 'io_uring_enter', 'io_uring_register'], EPERM),
    ...rule(['init_module', 'finit_module', 'delete_module', 'kexec_load', 'kexec_file_load'], EPERM),
    ...rule(['setxattr', 'lsetxattr', 'fsetxattr', 'setxattrat'], EOPNOTSUPP),
    ...rule(['clone3', 'openat2'], ENOSYS),
    // Any mode bit: what a file system without those modes answers, so tools fall back to writing.
    ...rule(['fallocate'], EOPNOTSUPP, [{ arg: 1, anyOf: 0xffffffff }]),
    // The same through ioctl: the kernel turns these into fallocate with keep size (or punch, zero).
    ...Object.values(SPACE_RESERVATION_IOCTLS).flatMap((request) => rule(['ioctl'], EOPNOTSUPP, [{ arg: 1, equals: request }])),
    ...rule(['unshare', 'clone'], EPERM, [{ arg: 0, anyOf: CLONE_NEWUSER }]),
    ...rule(['chmod', 'fchmod', 'creat', 'mkdir', 'mknod'], EPERM, setIdIn(1)),
    ...rule(['fchmodat', 'fchmodat2', 'mkdirat', 'mknodat'], EPERM, setIdIn(2)),
    // The mode of open and openat counts only when they create; otherwise it is whatever the register held.
    ...rule(['open'], EPERM, [{ arg: 1, anyOf: O_CREAT | O_TMPFILE_BIT }, ...setIdIn(2)]),
    ...rule(['openat'], EPERM, [{ arg: 2, anyOf: O_CREAT | O_TMPFILE_BIT }, ...setIdIn(3)]),
  ]
}

function strictRules(table: ArchTable): Rule[] {
  const rule = rulesFor(table)
  return [...rule(['ptrace', 'process_vm_readv', 'process_vm_writev'], EPERM), ...rule(['socket', 'socketpair'], EAFNOSUPPORT, [{ arg: 0, equals: AF_UNIX }])]
}

/** One rule per call this architecture has. */
function rulesFor(table: ArchTable) {
  return (names: readonly SyscallName[], errno: number, when?: ArgCondition[]): Rule[] =>
    names.flatMap((name) => {
      const nr = table.calls[name]
      return nr === undefined ? [] : [{ nr, ret: retErrno(errno), ...(when ? { when } : {}) }]
    })
}
