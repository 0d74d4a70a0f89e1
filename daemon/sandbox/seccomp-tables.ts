/**
 * System call numbers and ABI constants of the architectures tend has filters for. A name missing
 * from a table is a call that architecture does not have (arm64 has only the *at forms).
 * Numbers from 424 on are the same on every architecture.
 */

export type SyscallName =
  | 'chmod'
  | 'fchmod'
  | 'fchmodat'
  | 'fchmodat2'
  | 'open'
  | 'openat'
  | 'openat2'
  | 'creat'
  | 'mkdir'
  | 'mkdirat'
  | 'mknod'
  | 'mknodat'
  | 'setxattr'
  | 'lsetxattr'
  | 'fsetxattr'
  | 'setxattrat'
  | 'keyctl'
  | 'add_key'
  | 'request_key'
  | 'bpf'
  | 'perf_event_open'
  | 'userfaultfd'
  | 'io_uring_setup'
  | 'io_uring_enter'
  | 'io_uring_register'
  | 'init_module'
  | 'finit_module'
  | 'delete_module'
  | 'kexec_load'
  | 'kexec_file_load'
  | 'unshare'
  | 'clone'
  | 'clone3'
  | 'ptrace'
  | 'process_vm_readv'
  | 'process_vm_writev'
  | 'socket'
  | 'socketpair'
  | 'fallocate'
  | 'ioctl'

export interface ArchTable {
  /** AUDIT_ARCH_* of the native ABI. */
  audit: number
  /** The x32 ABI shares x86-64's AUDIT_ARCH and marks its calls with this bit in the number. */
  x32Bit?: number
  calls: Partial<Record<SyscallName, number>>
}

const UNIFIED = { io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, clone3: 435, openat2: 437, fchmodat2: 452, setxattrat: 463 } as const

export const ARCH_TABLES: Readonly<Record<string, ArchTable>> = {
  x64: {
    audit: 0xc000003e,
    x32Bit: 0x40000000,
    calls: {
      ...UNIFIED,
      chmod: 90,
      fchmod: 91,
      fchmodat: 268,
      open: 2,
      openat: 257,
      creat: 85,
      mkdir: 83,
      mkdirat: 258,
      mknod: 133,
      mknodat: 259,
      setxattr: 188,
      lsetxattr: 189,
      fsetxattr: 190,
      keyctl: 250,
      add_key: 248,
      request_key: 249,
      bpf: 321,
      perf_event_open: 298,
      userfaultfd: 323,
      init_module: 175,
      finit_module: 313,
      delete_module: 176,
      kexec_load: 246,
      kexec_file_load: 320,
      unshare: 272,
      clone: 56,
      ptrace: 101,
      process_vm_readv: 310,
      process_vm_writev: 311,
      socket: 41,
      socketpair: 53,
      fallocate: 285,
      ioctl: 16,
    },
  },
  arm64: {
    audit: 0xc00000b7,
    calls: {
      ...UNIFIED,
      fchmod: 52,
      fchmodat: 53,
      openat: 56,
      mkdirat: 34,
      mknodat: 33,
      setxattr: 5,
      lsetxattr: 6,
      fsetxattr: 7,
      keyctl: 219,
      add_key: 217,
      request_key: 218,
      bpf: 280,
      perf_event_open: 241,
      userfaultfd: 282,
      init_module: 105,
      finit_module: 273,
      delete_module: 106,
      kexec_load: 104,
      kexec_file_load: 294,
      unshare: 97,
      clone: 220,
      ptrace: 117,
      process_vm_readv: 270,
      process_vm_writev: 271,
      socket: 198,
      socketpair: 199,
      fallocate: 47,
      ioctl: 29,
    },
  },
}

// Bits the kernel reads the same way on both architectures.
export const S_ISUID = 0o4000
export const S_ISGID = 0o2000
/** open and openat use their mode only with one of these (fs/open.c, build_open_how). */
export const O_CREAT = 0o100
export const O_TMPFILE_BIT = 0o20000000
export const CLONE_NEWUSER = 0x10000000
export const AF_UNIX = 1
export const EPERM = 1
export const ENOSYS = 38
export const EAFNOSUPPORT = 97
export const EOPNOTSUPP = 95
/**
 * The ioctl requests that reach vfs_fallocate (fs/ioctl.c): the space reservations of the old XFS
 * interface, each `_IOW('X', nr, struct space_resv)` (include/linux/falloc.h). struct space_resv
 * is 48 bytes on x86-64 and arm64 alike (two __s16, then __s64 aligned to 8), and both encode
 * requests the generic way (asm-generic/ioctl.h: write 1 << 30, size << 16, type << 8, nr), so the
 * numbers are the same on both. The 32-bit forms (struct space_resv_32) come only through the ia32
 * ABI, which the filters kill.
 */
export const SPACE_RESERVATION_IOCTLS = {
  FS_IOC_RESVSP: 0x40305828,
  FS_IOC_UNRESVSP: 0x40305829,
  FS_IOC_RESVSP64: 0x4030582a,
  FS_IOC_UNRESVSP64: 0x4030582b,
  FS_IOC_ZERO_RANGE: 0x40305839,
} as const
