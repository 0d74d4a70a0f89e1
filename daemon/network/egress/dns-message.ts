/** DNS over the wire (RFC 1035 4.1), as much as a stub answering one question needs. */

export const DNS_TYPE = { A: 1, AAAA: 28, ANY: 255 } as const
export const DNS_RCODE = { noError: 0, formErr: 1, servFail: 2, nxDomain: 3, notImp: 4, refused: 5 } as const

/** One question of a query, with the bytes to echo in the answer (the name as the task cased it). */
export interface DnsQuery {
  id: number
  /** The header's flags as the query set them (opcode, RD are echoed). */
  flags: number
  name: string
  type: number
  class: number
  questionBytes: Buffer
}

/** A query, or what to answer a message that is none (null: drop it, too short to answer). */
export function parseQuery(message: Buffer): DnsQuery | { rcode: number; id: number; flags: number } | null {
  if (message.length < 12) return null
  const id = message.readUInt16BE(0)
  const flags = message.readUInt16BE(2)
  if (flags & 0x8000) return null
  const formErr = { rcode: DNS_RCODE.formErr, id, flags }
  if (((flags >> 11) & 0xf) !== 0) return { rcode: DNS_RCODE.notImp, id, flags }
  if (message.readUInt16BE(4) !== 1 || message.readUInt16BE(6) !== 0 || message.readUInt16BE(8) !== 0) return formErr
  const labels: string[] = []
  let offset = 12
  for (;;) {
    if (offset >= message.length) return formErr
    const length = message[offset]!
    offset += 1
    if (length === 0) break
    if (length > 63 || offset + length > message.length) return formErr
    // A dot inside a label is escaped, as DNS writes it: the name is then no domain name the
    // proxy acts on (allowlist.ts, isDomainName), never another name than the one asked.
    labels.push(
      message
        .subarray(offset, offset + length)
        .toString('latin1')
        .replaceAll('\\', '\\\\')
        .replaceAll('.', '\\.'),
    )
    offset += length
  }
  if (offset + 4 > message.length || offset - 12 > 255) return formErr
  const type = message.readUInt16BE(offset)
  const klass = message.readUInt16BE(offset + 2)
  offset += 4
  // Additional records (an EDNS OPT) may follow; nothing of them is needed.
  return { id, flags, name: labels.join('.'), type, class: klass, questionBytes: message.subarray(12, offset) }
}

/** An answer to `query`: `addresses` as A records with `ttlSeconds`, or none, with `rcode`. */
export function buildAnswer(query: DnsQuery, rcode: number, addresses: readonly string[], ttlSeconds: number): Buffer {
  const header = Buffer.alloc(12)
  header.writeUInt16BE(query.id, 0)
  header.writeUInt16BE(answerFlags(query.flags, rcode), 2)
  header.writeUInt16BE(1, 4)
  header.writeUInt16BE(addresses.length, 6)
  const records = addresses.map((address) => {
    const record = Buffer.alloc(16)
    record.writeUInt16BE(0xc00c, 0)
    record.writeUInt16BE(DNS_TYPE.A, 2)
    record.writeUInt16BE(1, 4)
    record.writeUInt32BE(ttlSeconds, 6)
    record.writeUInt16BE(4, 10)
    address.split('.').forEach((part, index) => record.writeUInt8(Number(part), 12 + index))
    return record
  })
  return Buffer.concat([header, query.questionBytes, ...records])
}

/** A header-only answer (no question echoed) for a message that could not be read. */
export function buildError(id: number, flags: number, rcode: number): Buffer {
  const header = Buffer.alloc(12)
  header.writeUInt16BE(id, 0)
  header.writeUInt16BE(answerFlags(flags, rcode), 2)
  return header
}

/** QR set, the query's opcode and RD kept, RA set (the stub answers as a resolver would), the rcode. */
function answerFlags(queryFlags: number, rcode: number): number {
  return 0x8000 | (queryFlags & 0x7900) | 0x0080 | rcode
}
