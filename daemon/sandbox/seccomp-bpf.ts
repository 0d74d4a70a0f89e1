/**
 * A small assembler for seccomp's classic-BPF programs: a list of rules ("this system call, when
 * these argument bits are set, returns this"), checked in order, after the architecture check. The
 * program is what bubblewrap loads with `--seccomp FD`: `struct sock_filter` entries, 8 bytes each.
 *
 * Arguments are compared as the kernel reads them: the low 32-bit word of the 64-bit slot (a
 * mode_t, an int of flags, clone's flags), so bits a caller sets in the high word change nothing.
 */

const LD_W_ABS = 0x20
const JMP_JEQ_K = 0x15
const JMP_JGE_K = 0x35
const JMP_JSET_K = 0x45
const RET_K = 0x06

/** Offsets into `struct seccomp_data`: nr, arch, then six 64-bit arguments (little-endian: low word first). */
const OFFSET_NR = 0
const OFFSET_ARCH = 4
const argLowWord = (index: number) => 16 + 8 * index

export const RET_ALLOW = 0x7fff0000
export const RET_KILL_PROCESS = 0x80000000
export const retErrno = (errno: number): number => 0x00050000 | (errno & 0xffff)

/** Holds when the argument's low word has any of the bits `anyOf`, or equals `equals`. */
export type ArgCondition = { arg: number; anyOf: number } | { arg: number; equals: number }

export interface Rule {
  nr: number
  /** Every condition must hold for the rule to apply; none: the call always gets `ret`. */
  when?: ArgCondition[]
  ret: number
}

export interface FilterSpec {
  /** AUDIT_ARCH_* of the native ABI: a call entered through any other (ia32 on x86-64) gets `foreignArchRet`. */
  audit: number
  foreignArchRet: number
  /** Calls numbered at or above this (the x32 ABI's bit on x86-64) get `ret`. */
  numbersFrom?: { nr: number; ret: number }
  rules: readonly Rule[]
}

type Instruction = readonly [code: number, jt: number, jf: number, k: number]

const loadNr: Instruction = [LD_W_ABS, 0, 0, OFFSET_NR]
const ret = (value: number): Instruction => [RET_K, 0, 0, value]

/**
 * The program: native architecture or `foreignArchRet`; then each rule in order; then allow. The
 * accumulator holds the call number between rules, so a call no rule names never loads an
 * argument: the kernel's per-call cache then skips the filter for it altogether.
 */
export function assembleFilter(spec: FilterSpec): Buffer {
  const program: Instruction[] = [[LD_W_ABS, 0, 0, OFFSET_ARCH], [JMP_JEQ_K, 1, 0, spec.audit], ret(spec.foreignArchRet), loadNr]
  if (spec.numbersFrom) program.push([JMP_JGE_K, 0, 1, spec.numbersFrom.nr], ret(spec.numbersFrom.ret))
  for (const rule of spec.rules) program.push(...ruleBlock(rule))
  program.push(ret(RET_ALLOW))
  if (program.length > MAX_INSTRUCTIONS) throw new Error(`seccomp program too long: ${program.length} instructions (at most ${MAX_INSTRUCTIONS})`)
  return encode(program)
}

const MAX_INSTRUCTIONS = 4096

/**
 * One rule, entered and left with the call number in the accumulator:
 *   jeq nr ? next : past the block
 *   (ld arg; jset bits or jeq value ? next : reload)   per condition
 *   ret
 *   reload: ld nr
 */
function ruleBlock(rule: Rule): Instruction[] {
  const conditions = rule.when ?? []
  if (conditions.length === 0) return [[JMP_JEQ_K, 0, 1, rule.nr], ret(rule.ret)]
  const body: Instruction[] = []
  // Each condition is a load and a test; a test that fails jumps to the reload, the last instruction.
  conditions.forEach((condition, index) => {
    const { arg } = condition
    if (!Number.isInteger(arg) || arg < 0 || arg > 5) throw new Error(`seccomp rule for call ${rule.nr}: argument ${arg} is not 0..5`)
    const toReload = 2 * (conditions.length - index) - 1
    const test: Instruction = 'anyOf' in condition ? [JMP_JSET_K, 0, toReload, condition.anyOf] : [JMP_JEQ_K, 0, toReload, condition.equals]
    body.push([LD_W_ABS, 0, 0, argLowWord(arg)], test)
  })
  body.push(ret(rule.ret), loadNr)
  return [[JMP_JEQ_K, 0, body.length, rule.nr], ...body]
}

function encode(program: readonly Instruction[]): Buffer {
  const bytes = Buffer.alloc(program.length * 8)
  program.forEach(([code, jt, jf, k], index) => {
    if (jt > 255 || jf > 255) throw new Error(`seccomp jump too far at instruction ${index}`)
    bytes.writeUInt16LE(code, index * 8)
    bytes.writeUInt8(jt, index * 8 + 2)
    bytes.writeUInt8(jf, index * 8 + 3)
    bytes.writeUInt32LE(k >>> 0, index * 8 + 4)
  })
  return bytes
}
