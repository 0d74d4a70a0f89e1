/** What the first bytes a task sent on a connection are. */
export type FirstBytes =
  | { kind: 'more' }
  | { kind: 'tls'; serverName: string | null }
  | { kind: 'bad-tls'; problem: string }
  | { kind: 'http' }
  | { kind: 'bad-http'; problem: string }
  | { kind: 'other' }

/** encrypted_client_hello (ECH) and the draft encrypted_server_name (ESNI). */
const ENCRYPTED_NAME_EXTENSIONS = new Set([0xfe0d, 0xffce])

/** A ClientHello larger than this is refused: no client sends one, and the engine buffers it. */
export const MAX_CLIENT_HELLO_BYTES = 64 * 1024

/**
 * Classifies the start of a connection: a TLS ClientHello (with the server name it carries), an
 * HTTP/1 request line, or anything else (ssh, git://, a database's protocol), piped as it is.
 */
export function classifyFirstBytes(bytes: Buffer): FirstBytes {
  if (bytes.length === 0) return { kind: 'more' }
  if (bytes[0] === 0x16) return classifyTls(bytes)
  // Any other TLS record first (alert, ChangeCipherSpec, application data, heartbeat): a server
  // may pass over it and read the ClientHello after, so it is refused rather than piped unread.
  if (bytes[0]! >= 0x14 && bytes[0]! <= 0x18) {
    if (bytes.length < 2) return { kind: 'more' }
    if (bytes[1] === 0x03) return { kind: 'bad-tls', problem: 'a TLS record before the ClientHello' }
  }
  return classifyHttp(bytes)
}

/**
 * Anything a server might take for an HTTP request is HTTP here, and goes to the HTTP handling
 * (whose parser refuses what it does not strictly read: an extension or lower-case method, odd
 * spacing, HTTP/0.9, HTTP/2 without TLS). Lenient servers (Python's http.server, and others for
 * HTTP/0.9) skip white space of many kinds before the first line and split it on any: so after
 * such white space, a first line naming `HTTP/` anywhere, or of a token and a target (a path, an
 * absolute URI, `*`), is HTTP. Until the first line is whole it may still be one; a first line
 * that is neither (an ssh banner, a Redis command) is piped as it is, and so is binary data.
 */
function classifyHttp(bytes: Buffer): FirstBytes {
  let start = 0
  while (start < bytes.length && LENIENT_SPACE.has(bytes[start]!)) start++
  if (start === bytes.length) return bytes.length > MAX_REQUEST_LINE_BYTES ? { kind: 'bad-http', problem: 'nothing but white space' } : { kind: 'more' }
  const newline = bytes.indexOf(0x0a, start)
  const line = bytes.subarray(start, newline === -1 ? Math.min(bytes.length, start + MAX_REQUEST_LINE_BYTES + 1) : newline).toString('latin1')
  if (/HTTP\//i.test(line)) return { kind: 'http' }
  if (!looksTextual(line)) return { kind: 'other' }
  if (newline === -1) return bytes.length - start <= MAX_REQUEST_LINE_BYTES ? { kind: 'more' } : { kind: 'bad-http', problem: 'a first line too long to check' }
  const words = line.split(LENIENT_SPACES).filter(Boolean)
  const request =
    words.length >= 2 && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(words[0]!) && (words[1]!.startsWith('/') || words[1]!.includes('://') || words[1] === '*')
  return request ? { kind: 'http' } : { kind: 'other' }
}

/** What lenient servers take for white space (Python's str.split on latin-1 text). */
const LENIENT_SPACE = new Set([0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0])
const LENIENT_SPACES = /[\t\n\v\f\r\x1c-\x1f \x85\xa0]+/

/** Printable text and white space so far (a request line may still come whole): binary protocols are not waited on. */
function looksTextual(line: string): boolean {
  return /^[\t\v\f\r\x1c-\x1f\x20-\x7e\x85\xa0]*$/.test(line)
}

/** The longest first line waited for: the most a lenient server reads as one (Python's is 64 KiB). */
const MAX_REQUEST_LINE_BYTES = 64 * 1024 + 2

/** The handshake bytes of TLS records (content type 22) at the start of `bytes`, as far as they go. */
function handshakeBytes(bytes: Buffer): { data: Buffer } | { problem: string } {
  const parts: Buffer[] = []
  let offset = 0
  while (offset + 5 <= bytes.length) {
    if (bytes[offset] !== 0x16) return { problem: 'a TLS record that is no handshake before the ClientHello ended' }
    if (bytes[offset + 1] !== 0x03) return { problem: 'an unknown TLS record version' }
    const length = bytes.readUInt16BE(offset + 3)
    if (offset + 5 + length > bytes.length) break
    parts.push(bytes.subarray(offset + 5, offset + 5 + length))
    offset += 5 + length
  }
  return { data: Buffer.concat(parts) }
}

function classifyTls(bytes: Buffer): FirstBytes {
  // Whatever its record version says (some servers accept any first version): a record that
  // claims to be a handshake is read as one, or refused; never piped unread.
  const handshake = handshakeBytes(bytes)
  if ('problem' in handshake) return { kind: 'bad-tls', problem: handshake.problem }
  const data = handshake.data
  if (data.length >= 1 && data[0] !== 0x01) return { kind: 'bad-tls', problem: 'a TLS handshake that does not start with a ClientHello' }
  if (data.length < 4) return bytes.length > MAX_CLIENT_HELLO_BYTES ? { kind: 'bad-tls', problem: 'a ClientHello too large' } : { kind: 'more' }
  const length = data.readUIntBE(1, 3)
  if (length > MAX_CLIENT_HELLO_BYTES) return { kind: 'bad-tls', problem: 'a ClientHello too large' }
  if (data.length < 4 + length) return { kind: 'more' }
  const serverName = readServerName(data.subarray(4, 4 + length))
  return typeof serverName === 'object' && serverName !== null ? { kind: 'bad-tls', problem: serverName.problem } : { kind: 'tls', serverName }
}

/**
 * The host_name of a ClientHello's server_name extension (RFC 6066), null without one. Anything
 * a server might read differently (two extensions, two names, lengths that do not add up) is a
 * problem, so that no name hides behind a parse this engine does not share.
 */
function readServerName(hello: Buffer): string | null | { problem: string } {
  const malformed = { problem: 'a malformed TLS ClientHello' }
  let offset = 2 + 32
  if (offset + 1 > hello.length) return malformed
  offset += 1 + hello[offset]!
  if (offset + 2 > hello.length) return malformed
  offset += 2 + hello.readUInt16BE(offset)
  if (offset + 1 > hello.length) return malformed
  offset += 1 + hello[offset]!
  if (offset === hello.length) return null
  if (offset + 2 > hello.length) return malformed
  const end = offset + 2 + hello.readUInt16BE(offset)
  if (end !== hello.length) return malformed
  offset += 2
  let found: string | null = null
  while (offset < end) {
    if (offset + 4 > end) return malformed
    const type = hello.readUInt16BE(offset)
    const length = hello.readUInt16BE(offset + 2)
    const body = hello.subarray(offset + 4, offset + 4 + length)
    if (body.length !== length) return malformed
    offset += 4 + length
    // The name a server acts on would be inside, encrypted: nothing here could check it.
    if (ENCRYPTED_NAME_EXTENSIONS.has(type)) return { problem: 'a TLS ClientHello that hides its server name (encrypted ClientHello)' }
    if (type !== 0) continue
    if (found !== null) return { problem: 'a TLS ClientHello with two server names' }
    if (body.length < 2 || body.readUInt16BE(0) !== body.length - 2) return malformed
    if (body.length < 5 || body[2] !== 0 || body.readUInt16BE(3) !== body.length - 5)
      return { problem: 'a TLS ClientHello with two server names or none readable' }
    found = body.subarray(5).toString('latin1')
  }
  return found
}
