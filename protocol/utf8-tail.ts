/**
 * How many bytes at the end of `bytes` begin a UTF-8 character that they stop inside (0: none).
 * Output grows a write at a time, and a writer may cut a character in two: a reader that turns
 * bytes into text stops before these and reads them again with what follows, so that a character
 * is never decoded in halves (two U+FFFD instead of one é). Cursors stay byte offsets.
 */
export function incompleteUtf8Tail(bytes: Uint8Array): number {
  for (let back = 1; back <= Math.min(3, bytes.length); back++) {
    const byte = bytes[bytes.length - back]!
    if ((byte & 0xc0) === 0x80) continue
    const length = byte >= 0xf0 && byte < 0xf8 ? 4 : byte >= 0xe0 && byte < 0xf0 ? 3 : byte >= 0xc0 && byte < 0xe0 ? 2 : 1
    return length > back ? back : 0
  }
  return 0
}
