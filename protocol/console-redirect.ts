import { createHash } from 'node:crypto'

/** How many hex digits of a token's SHA-256 name it in logs and files: enough to tell tokens apart, useless to guess one. */
export const TOKEN_ID_DIGITS = 12

/** The id a console token is known by (daemon.log, its redirect file): a prefix of its SHA-256, never the token. */
export function consoleTokenId(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, TOKEN_ID_DIGITS)
}

/**
 * The file in TEND_HOME (mode 0600) through which `tend console` opens the browser: a page that
 * sends it on to the console's URL with the token, so that the token is in no argv. The daemon
 * removes it once a page has been opened with that token.
 */
export function consoleRedirectFileName(tokenId: string): string {
  return `console-open-${tokenId}.html`
}
