/**
 * The strict profile's seccomp filter, as the classic-BPF program bubblewrap loads with
 * `--seccomp FD`: it denies ptrace and reading other processes' memory, io_uring, new Unix-domain
 * sockets, kernel keyrings, bpf, userfaultfd and perf events; everything else is allowed.
 */

const LD_W_ABS = 0x20
const JMP_JEQ_K = 0x15
const JMP_JGE_K = 0x35
const RET_K = 0x06
const RET_ALLOW = 0x7fff0000
const RET_KILL_PROCESS = 0x80000000
const retErrno = (errno: number) => 0x00050000 | errno
const EPERM = 1
const EAFNOSUPPORT = 97
const OFFSET_NR = 0
const OFFSET_ARCH = 4
const OFFSET_ARG0 = 16
const AF_UNIX = 1
const X32_SYSCALL_BIT = 0x40000000

interface ArchTable {
  audit: number
  denied: number[]
  socket: number
  socketpair: number
  hasX32: boolean
}

const ARCHES: Record<string, ArchTable> = {
  // ptrace, process_vm_readv, process_vm_writev, io_uring_setup/enter/register, keyctl, add_key, request_key, bpf, userfaultfd, perf_event_open
  x64: { audit: 0xc000003e, denied: [101, 310, 311, 425, 426, 427, 250, 248, 249, 321, 323, 298], socket: 41, socketpair: 53, hasX32: true },
  arm64: { audit: 0xc00000b7, denied: [117, 270, 271, 425, 426, 427, 219, 217, 218, 280, 282, 241], socket: 198, socketpair: 199, hasX32: false },
}

export function seccompSupported(arch: string = process.arch): boolean {
  return arch in ARCHES
}

type Instruction = [code: number, jt: number, jf: number, k: number]

export function strictSeccompProgram(arch: string = process.arch): Buffer {
  const table = ARCHES[arch]
  if (!table) throw new Error(`no seccomp filter for architecture ${arch}`)
  const program: Instruction[] = [
    [LD_W_ABS, 0, 0, OFFSET_ARCH],
    [JMP_JEQ_K, 1, 0, table.audit],
    [RET_K, 0, 0, RET_KILL_PROCESS],
  ]
  if (table.hasX32) program.push([LD_W_ABS, 0, 0, OFFSET_NR], [JMP_JGE_K, 0, 1, X32_SYSCALL_BIT], [RET_K, 0, 0, retErrno(EPERM)])
  for (const nr of table.denied) program.push([LD_W_ABS, 0, 0, OFFSET_NR], [JMP_JEQ_K, 0, 1, nr], [RET_K, 0, 0, retErrno(EPERM)])
  for (const nr of [table.socket, table.socketpair]) {
    program.push([LD_W_ABS, 0, 0, OFFSET_NR], [JMP_JEQ_K, 0, 3, nr], [LD_W_ABS, 0, 0, OFFSET_ARG0], [JMP_JEQ_K, 0, 1, AF_UNIX], [RET_K, 0, 0, retErrno(EAFNOSUPPORT)])
  }
  program.push([RET_K, 0, 0, RET_ALLOW])
  const bytes = Buffer.alloc(program.length * 8)
  program.forEach(([code, jt, jf, k], index) => {
    bytes.writeUInt16LE(code, index * 8)
    bytes.writeUInt8(jt, index * 8 + 2)
    bytes.writeUInt8(jf, index * 8 + 3)
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4)
  })
  return bytes
}
