import { join } from 'node:path'
import type { Task, TendClient } from '../../client/index.js'

/** Default byte budget for output handed to the model. */
export const DEFAULT_OUTPUT_BUDGET_BYTES = 30_000
/** Share of the budget kept from the start; the rest is kept from the end, where errors are. */
const HEAD_SHARE = 0.4

export interface ModelOutput {
  text: string
  /** Byte offset the text starts at, and the offset just past its end. */
  from: number
  next: number
  /** Bytes left out of the middle (0 when everything fit). */
  omittedBytes: number
}

/** Where a task's whole output is, for the model to be told when a result leaves some out. */
export function outputPathOf(task: Pick<Task, 'spool'>): string {
  return join(task.spool, 'output.log')
}

/**
 * Reads output bytes [from, end) for the model within a byte budget: all of it when it fits,
 * else its head and its tail with a marker saying how much was left out and where the whole
 * output is — so the error at the end is never what gets cut.
 */
export async function readForModel(client: TendClient, taskId: string, from: number, end: number, budgetBytes: number, fullOutputPath: string): Promise<ModelOutput> {
  const length = Math.max(0, end - from)
  if (length <= budgetBytes) {
    const all = await readBytes(client, taskId, from, length)
    return { text: all.toString('utf8'), from, next: from + all.length, omittedBytes: 0 }
  }
  const headBytes = Math.floor(budgetBytes * HEAD_SHARE)
  const tailBytes = budgetBytes - headBytes
  const head = cutAtLineEnd(await readBytes(client, taskId, from, headBytes))
  const tail = cutAtLineStart(await readBytes(client, taskId, end - tailBytes, tailBytes))
  return { ...joinHeadAndTail(head, tail, from, end, fullOutputPath), from, next: end }
}

/** Head and tail of text already in memory (a filtered read), shaped the same way. */
export function shapeText(text: string, budgetBytes: number, fullOutputPath: string): { text: string; omittedBytes: number } {
  const bytes = Buffer.from(text)
  if (bytes.length <= budgetBytes) return { text, omittedBytes: 0 }
  const headBytes = Math.floor(budgetBytes * HEAD_SHARE)
  const head = cutAtLineEnd(bytes.subarray(0, headBytes))
  const tail = cutAtLineStart(bytes.subarray(bytes.length - (budgetBytes - headBytes)))
  return joinHeadAndTail(head, tail, null, bytes.length, fullOutputPath)
}

function joinHeadAndTail(head: Buffer, tail: Buffer, from: number | null, end: number, fullOutputPath: string): { text: string; omittedBytes: number } {
  const omittedBytes = end - (from ?? 0) - head.length - tail.length
  const where = from === null ? '' : ` (bytes ${from + head.length}–${end - tail.length})`
  const marker = `[… ${omittedBytes} bytes omitted${where}; full output: ${fullOutputPath} …]`
  const separator = head.length > 0 && head[head.length - 1] !== 0x0a ? '\n' : ''
  return { text: `${head.toString('utf8')}${separator}${marker}\n${tail.toString('utf8')}`, omittedBytes }
}

/** Bytes [from, from+length) of a task's output, in as many reads as it takes. */
export async function readBytes(client: TendClient, taskId: string, from: number, length: number): Promise<Buffer> {
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
