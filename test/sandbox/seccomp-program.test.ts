import { describe, expect, test } from 'vitest'
import { existsSync, readFileSync } from 'node:fs'
import { seccompProgram, type SeccompFilter } from '../../daemon/sandbox/seccomp.js'
import { ARCH_TABLES } from '../../daemon/sandbox/seccomp-tables.js'

/*
 * The filters as programs, for both architectures: each decision read by running the program in a
 * small classic-BPF interpreter (the five instructions the assembler emits), and each call number
 * checked against the kernel headers installed here. seccomp.test.ts runs the x86-64 program in the
 * kernel; this is what covers arm64 on an x86-64 machine.
 */

const ALLOW = 0x7fff0000
const KILL_PROCESS = 0x80000000
const errno = (value: number) => 0x00050000 | value
const EPERM = errno(1)
const ENOSYS = errno(38)
const EAFNOSUPPORT = errno(97)
const EOPNOTSUPP = errno(95)

/** Runs a program on one `struct seccomp_data` and returns the action. */
function decide(program: Buffer, call: { arch: number; nr: number; args?: bigint[] }): number {
  const data = Buffer.alloc(64)
  data.writeUInt32LE(call.nr, 0)
  data.writeUInt32LE(call.arch, 4)
  ;(call.args ?? []).forEach((arg, index) => data.writeBigUInt64LE(BigInt.asUintN(64, arg), 16 + 8 * index))
  let accumulator = 0
  for (let pc = 0, steps = 0; steps < 10_000; steps++) {
    if (pc * 8 >= program.length) throw new Error(`ran off the end of the program at ${pc}`)
    const code = program.readUInt16LE(pc * 8)
    const jt = program.readUInt8(pc * 8 + 2)
    const jf = program.readUInt8(pc * 8 + 3)
    const k = program.readUInt32LE(pc * 8 + 4)
    const jump = (holds: boolean) => (pc += 1 + (holds ? jt : jf))
    switch (code) {
      case 0x20: // ld [k]
        accumulator = data.readUInt32LE(k)
        pc++
        break
      case 0x15: // jeq #k
        jump(accumulator === k)
        break
      case 0x35: // jge #k
        jump(accumulator >= k)
        break
      case 0x45: // jset #k
        jump((accumulator & k) >>> 0 !== 0)
        break
      case 0x06: // ret #k
        return k
      default:
        throw new Error(`unexpected instruction ${code.toString(16)} at ${pc}`)
    }
  }
  throw new Error('the program did not return')
}

const FOREIGN = { x64: 0x40000003 /* AUDIT_ARCH_I386 */, arm64: 0x40000028 /* AUDIT_ARCH_ARM */ }
const HIGH = 0xffffffffn << 32n

describe.each(['x64', 'arm64'] as const)('the filters for %s', (arch) => {
  const table = ARCH_TABLES[arch]!
  const nr = (name: keyof typeof table.calls) => {
    const number = table.calls[name]
    if (number === undefined) throw new Error(`${arch} has no ${name}`)
    return number
  }
  const programs: Record<SeccompFilter, Buffer> = { baseline: seccompProgram('baseline', arch), strict: seccompProgram('strict', arch) }
  const both = (call: { nr: number; args?: bigint[] }, expected: number) => {
    for (const filter of ['baseline', 'strict'] as const)
      expect(decide(programs[filter], { arch: table.audit, ...call }), `${filter}: call ${call.nr}`).toBe(expected)
  }

  test('a mode with a setuid or setgid bit is refused in every call that takes one, judged by its low word', () => {
    const modeCalls: Array<[string, number]> = [
      ['fchmod', 1],
      ['fchmodat', 2],
      ['fchmodat2', 2],
      ['mkdirat', 2],
      ['mknodat', 2],
    ]
    if (arch === 'x64') modeCalls.push(['chmod', 1], ['creat', 1], ['mkdir', 1], ['mknod', 1])
    for (const [name, index] of modeCalls) {
      const withMode = (mode: bigint) => Array.from({ length: 6 }, (_, i) => (i === index ? mode : 0n))
      both({ nr: nr(name as keyof typeof table.calls), args: withMode(0o4755n) }, EPERM)
      both({ nr: nr(name as keyof typeof table.calls), args: withMode(0o2775n) }, EPERM)
      both({ nr: nr(name as keyof typeof table.calls), args: withMode(HIGH | 0o4755n) }, EPERM)
      both({ nr: nr(name as keyof typeof table.calls), args: withMode(0o1777n) }, ALLOW)
      both({ nr: nr(name as keyof typeof table.calls), args: withMode(HIGH | 0o755n) }, ALLOW)
    }
  })

  test('openat counts its mode only when it creates (O_CREAT or O_TMPFILE)', () => {
    const O_CREAT = 0o100n
    const O_TMPFILE = 0o20000000n
    both({ nr: nr('openat'), args: [0n, 0n, O_CREAT, 0o4755n] }, EPERM)
    both({ nr: nr('openat'), args: [0n, 0n, O_TMPFILE, 0o2755n] }, EPERM)
    both({ nr: nr('openat'), args: [0n, 0n, HIGH | O_CREAT, HIGH | 0o4755n] }, EPERM)
    both({ nr: nr('openat'), args: [0n, 0n, O_CREAT, 0o644n] }, ALLOW)
    // Without a create flag the kernel ignores the mode: whatever the register held is no reason to refuse.
    both({ nr: nr('openat'), args: [0n, 0n, 0n, 0o6777n] }, ALLOW)
    both({ nr: nr('openat'), args: [0n, 0n, HIGH, 0o6777n] }, ALLOW)
  })

  test('extended attributes are not supported; openat2 and clone3 are not implemented', () => {
    for (const name of ['setxattr', 'lsetxattr', 'fsetxattr', 'setxattrat'] as const) both({ nr: nr(name) }, EOPNOTSUPP)
    both({ nr: nr('openat2') }, ENOSYS)
    both({ nr: nr('clone3') }, ENOSYS)
  })

  test('the ioctls that reach fallocate (the space reservations) are not supported, judged by their low word; other requests pass', () => {
    // _IOW('X', nr, struct space_resv): a 48-byte struct, the generic encoding (include/linux/falloc.h, asm-generic/ioctl.h).
    const reservation = (nr: number) => BigInt(((1 << 30) | (48 << 16) | (0x58 << 8) | nr) >>> 0)
    for (const number of [40, 41, 42, 43, 57]) {
      both({ nr: nr('ioctl'), args: [1n, reservation(number), 0n] }, EOPNOTSUPP)
      both({ nr: nr('ioctl'), args: [1n, HIGH | reservation(number), 0n] }, EOPNOTSUPP)
    }
    // TCGETS, FIONREAD, FS_IOC_GETFLAGS, and the XFS request numbered next to them (XFS_IOC_ALLOCSP, gone from Linux 5.17).
    for (const request of [0x5401n, 0x541bn, 0x80086601n, reservation(10)]) both({ nr: nr('ioctl'), args: [1n, request, 0n] }, ALLOW)
  })

  test('new user namespaces are refused; other namespaces and threads are not', () => {
    const CLONE_NEWUSER = 0x10000000n
    for (const name of ['unshare', 'clone'] as const) {
      both({ nr: nr(name), args: [CLONE_NEWUSER | 0x11n] }, EPERM)
      both({ nr: nr(name), args: [0x20000n /* CLONE_NEWNS */] }, ALLOW)
    }
    both({ nr: nr('clone'), args: [0x3d0f00n /* pthread_create's flags */] }, ALLOW)
  })

  test('keyrings, bpf, perf events, userfaultfd, io_uring, modules and kexec are refused', () => {
    const names = [
      'keyctl',
      'add_key',
      'request_key',
      'bpf',
      'perf_event_open',
      'userfaultfd',
      'io_uring_setup',
      'io_uring_enter',
      'io_uring_register',
      'init_module',
      'finit_module',
      'delete_module',
      'kexec_load',
      'kexec_file_load',
    ] as const
    for (const name of names) both({ nr: nr(name) }, EPERM)
  })

  test('a call of another ABI kills the process', () => {
    for (const filter of ['baseline', 'strict'] as const) expect(decide(programs[filter], { arch: FOREIGN[arch], nr: 15 })).toBe(KILL_PROCESS)
    if (table.x32Bit) both({ nr: table.x32Bit | 90 }, EPERM)
  })

  test('strict adds ptrace, process_vm_* and Unix-domain sockets; the baseline allows them', () => {
    for (const name of ['ptrace', 'process_vm_readv', 'process_vm_writev'] as const) {
      expect(decide(programs.strict, { arch: table.audit, nr: nr(name) })).toBe(EPERM)
      expect(decide(programs.baseline, { arch: table.audit, nr: nr(name) })).toBe(ALLOW)
    }
    for (const name of ['socket', 'socketpair'] as const) {
      expect(decide(programs.strict, { arch: table.audit, nr: nr(name), args: [1n] })).toBe(EAFNOSUPPORT)
      expect(decide(programs.baseline, { arch: table.audit, nr: nr(name), args: [1n] })).toBe(ALLOW)
      // AF_PACKET (17) has the AF_UNIX bit set: only the family itself is refused.
      for (const family of [2n, 10n, 16n, 17n]) expect(decide(programs.strict, { arch: table.audit, nr: nr(name), args: [family] })).toBe(ALLOW)
    }
  })

  test("the call numbers are the kernel headers' (asm-generic for arm64; fchmodat2 and setxattrat, newer than the headers, are the same on every architecture)", () => {
    const header = arch === 'x64' ? '/usr/include/x86_64-linux-gnu/asm/unistd_64.h' : '/usr/include/asm-generic/unistd.h'
    if (!existsSync(header)) throw new Error(`${header} is missing: install the kernel headers (Debian: apt-get install linux-libc-dev)`)
    const text = readFileSync(header, 'utf8')
    const fromHeader = (name: string) => {
      const match = new RegExp(`#define __NR(?:3264)?_${name}\\s+(\\d+)`).exec(text)
      return match ? Number(match[1]) : undefined
    }
    for (const [name, number] of Object.entries(table.calls)) {
      const expected = fromHeader(name) ?? ({ fchmodat2: 452, setxattrat: 463 } as Record<string, number>)[name]
      expect(number, name).toBe(expected)
    }
  })
})
