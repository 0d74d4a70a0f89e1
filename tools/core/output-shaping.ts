import { join } from 'node:path'
import { incompleteUtf8Tail, plainTextChunk, type Task } from '../../client/index.js'
import type { TaskService } from '../../client/task-service.js'

/** Default byte budget for output handed to the model. */
export const DEFAULT_OUTPUT_BUDGET_BYTES = 30_000
/** Largest byte budget one task_output result may ask for (max_bytes). */
export const MAX_RESULT_BYTES = 1024 * 1024
/** Share of the budget kept from the start; the rest is kept from the end, where errors are. */
const HEAD_SHARE = 0.4

export interface ModelOutput {
  text: string
  /** Byte offset the text starts at, and the offset just past its end. */
  from: number
  next: number
  /** Bytes left out of the middle (0 when everything fit). */
  omittedBytes: number
  /**
   * Bytes at the end, from `next` on, that are not in the text yet (a character, or on a terminal
   * a control sequence, still being written); the next read starts with them.
   */
  heldBackBytes?: number
}

/**
 * How bytes are made text. `plain`: as plain text (control sequences removed, lines as a terminal
 * would leave them), else as they are (text that is plain already). `final`: the task has ended,
 * nothing more will be written; otherwise a character (or control sequence) that the end of the
 * output stops inside is held back, not passed in pieces.
 */
interface OutputRead {
  plain: boolean
  final: boolean
}

/**
 * Where a task's whole output is on the host, for the operator and for a host's values (the
 * published harness's `outputPath`). Never part of the model's text: the spool is hidden inside
 * the agent's own sandboxed tasks, so the agent is told to read the rest with task_output instead.
 */
export function outputPathOf(task: Pick<Task, 'spool'>): string {
  return join(task.spool, 'output.log')
}

/**
 * Reads output bytes [from, end) for the model within a byte budget: all of it when it fits,
 * else its head and its tail with a marker saying how much was left out and the task_output call
 * that reads it (from the first byte left out) — so the error at the end is never what gets cut.
 * It is read as plain text, on a terminal or not: colour codes and `\r` progress lines are noise a
 * model pays for, and programs write them to pipes too (FORCE_COLOR, a CI's settings, a tool that
 * never asks); output.log keeps them. `final`: the task has ended (OutputRead).
 */
export async function readForModel(client: TaskService, taskId: string, from: number, end: number, budgetBytes: number, final = true): Promise<ModelOutput> {
  const read: OutputRead = { plain: true, final }
  const length = Math.max(0, end - from)
  if (length <= budgetBytes) {
    const all = textOf(await readBytes(client, taskId, from, length), read)
    return { text: all.text, from, next: from + all.bytes, omittedBytes: 0, ...held(all) }
  }
  const headBytes = Math.floor(budgetBytes * HEAD_SHARE)
  const tailBytes = budgetBytes - headBytes
  // What the head cuts off in a sequence lies in the omitted middle: nothing is held for it.
  const head = textOf(cutAtLineEnd(await readBytes(client, taskId, from, headBytes)), { ...read, final: true })
  const tail = textOf(cutAtLineStart(await readBytes(client, taskId, end - tailBytes, tailBytes)), read)
  const shownEnd = end - tail.heldBackBytes
  const omittedFrom = from + head.bytes
  const marker = `bytes omitted (bytes ${omittedFrom}–${shownEnd - tail.bytes}); read them with task_output (task_id: "${taskId}", from: ${omittedFrom})`
  return { ...joinHeadAndTail(head, tail, shownEnd - from, marker), from, next: shownEnd, ...held(tail) }
}

interface ShownText {
  text: string
  /** Bytes the text covers. */
  bytes: number
  heldBackBytes: number
}

/** Output bytes as the model reads them: as plain text, or as they are. */
function textOf(raw: Buffer, read: OutputRead): ShownText {
  if (!read.plain) {
    const held = read.final ? 0 : incompleteUtf8Tail(raw)
    return { text: raw.subarray(0, raw.length - held).toString('utf8'), bytes: raw.length - held, heldBackBytes: held }
  }
  const plain = plainTextChunk(raw, read)
  return { text: plain.text, bytes: raw.length - plain.heldBackBytes, heldBackBytes: plain.heldBackBytes }
}

const held = (shown: ShownText): Pick<ModelOutput, 'heldBackBytes'> => (shown.heldBackBytes > 0 ? { heldBackBytes: shown.heldBackBytes } : {})

/**
 * Head and tail of text already in memory (a filtered read), shaped the same way. What is left
 * out has no offsets of its own in output.log, so the marker says how to see it instead.
 */
export function shapeText(text: string, budgetBytes: number): { text: string; omittedBytes: number } {
  const bytes = Buffer.from(text)
  if (bytes.length <= budgetBytes) return { text, omittedBytes: 0 }
  const headBytes = Math.floor(budgetBytes * HEAD_SHARE)
  const whole = { plain: false, final: true }
  const head = textOf(cutAtLineEnd(bytes.subarray(0, headBytes)), whole)
  const tail = textOf(cutAtLineStart(bytes.subarray(bytes.length - (budgetBytes - headBytes))), whole)
  return joinHeadAndTail(
    head,
    tail,
    bytes.length,
    `bytes of matching lines omitted; a narrower filter, or a larger max_bytes (at most ${MAX_RESULT_BYTES}), shows them`,
  )
}

/** `length` bytes shown as head and tail, with a marker for the middle: `[… N <what> …]`. */
function joinHeadAndTail(head: ShownText, tail: ShownText, length: number, what: string): { text: string; omittedBytes: number } {
  const omittedBytes = length - head.bytes - tail.bytes
  const marker = `[… ${omittedBytes} ${what} …]`
  const separator = head.text !== '' && !head.text.endsWith('\n') ? '\n' : ''
  return { text: `${head.text}${separator}${marker}\n${tail.text}`, omittedBytes }
}

/** Bytes [from, from+length) of a task's output, in as many reads as it takes. */
export async function readBytes(client: TaskService, taskId: string, from: number, length: number): Promise<Buffer> {
  const parts: Buffer[] = []
  let cursor = from
  while (cursor < from + length) {
    const chunk = await client.read(taskId, { from: cursor, maxBytes: Math.min(from + length - cursor, 16 * 1024 * 1024), encoding: 'base64' })
    const bytes = Buffer.from(chunk.data, 'base64')
    if (bytes.length === 0) break
    parts.push(bytes)
    cursor += bytes.length
  }
  return Buffer.concat(parts)
}

/** Drops a partial last line unless that would drop most of the head. */
function cutAtLineEnd(head: Buffer): Buffer {
  const newline = head.lastIndexOf(0x0a)
  if (newline >= head.length / 2) return head.subarray(0, newline + 1)
  let end = head.length
  while (end > 0 && (head[end - 1]! & 0xc0) === 0x80) end -= 1
  return end > 0 && head[end - 1]! >= 0xc0 ? head.subarray(0, end - 1) : head
}

/** Drops a partial first line unless that would drop most of the tail. */
function cutAtLineStart(tail: Buffer): Buffer {
  const newline = tail.indexOf(0x0a)
  if (newline !== -1 && newline < tail.length / 2) return tail.subarray(newline + 1)
  let start = 0
  while (start < tail.length && (tail[start]! & 0xc0) === 0x80) start += 1
  return tail.subarray(start)
}
