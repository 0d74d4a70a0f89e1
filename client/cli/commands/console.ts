import type { Command } from 'commander'
import { spawn } from 'node:child_process'
import { constants, openSync, writeSync, closeSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { InvalidArgumentError } from 'commander'
import { TendError, type ConsoleInfo } from '../../../protocol/index.js'
import { action } from '../command-context.js'
import { EXIT } from '../exit-codes.js'
import { printJson } from '../output.js'

interface ConsoleFlags {
  host?: string
  port?: number
  insecure?: boolean
  tlsCert?: string
  tlsKey?: string
  open: boolean
  stop?: boolean
  revoke?: boolean
  status?: boolean
}

function portOption(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) > 65535) throw new InvalidArgumentError(`expected a TCP port from 0 to 65535, got ${JSON.stringify(text)}`)
  return Number(text)
}

export function registerConsoleCommand(program: Command): void {
  const command = program
    .command('console')
    .summary('serve the operator console (a live web page) and the API over TCP; print its URL with a fresh token')
    .option('--host <address>', 'address to listen on (default: the consoleHost setting, 127.0.0.1); another than loopback needs TLS or --insecure')
    .option('--port <port>', 'TCP port (default: the consolePort setting; 0 takes a free one)', portOption)
    .option('--tls-cert <file>', 'PEM certificate: serve HTTPS (with --tls-key)')
    .option('--tls-key <file>', 'PEM private key of --tls-cert')
    .option('--insecure', 'serve an address other than loopback without TLS')
    .option('--no-open', 'do not open a browser')
    .option('--status', 'say where the console listens, without making a token')
    .option('--stop', 'stop the console (its tokens stay valid for the next start)')
    .option('--revoke', "revoke every token and end every page's session")
  command.action(
    action(command, async ({ client, io }, flags: ConsoleFlags) => {
      if ([flags.stop, flags.revoke, flags.status].filter(Boolean).length > 1) {
        throw new TendError('TEND_ERR_USAGE', { detail: 'choose one of --status, --stop and --revoke' })
      }
      if (flags.stop || flags.revoke || flags.status) {
        const info = flags.stop ? await client.closeConsole() : flags.revoke ? await client.revokeConsoleTokens() : await client.consoleInfo()
        if (io.json) printJson(io, info)
        else io.out(describe(info, flags.revoke ? 'every token revoked; ' : ''))
        return EXIT.ok
      }
      const info = await client.openConsole({ host: flags.host, port: flags.port, insecure: flags.insecure, tlsCert: flags.tlsCert, tlsKey: flags.tlsKey })
      if (io.json) printJson(io, info)
      else {
        io.out(`tend console: ${info.url}`)
        io.out(`  the page, and the API over TCP with Authorization: Bearer ${info.token}`)
        io.out('  the token is shown once; tend console --revoke ends every token and session')
      }
      if (flags.open && info.url && info.token && !io.json) await openBrowser(info.url, info.token, client.options.layout.home, client.options.env)
      return EXIT.ok
    }),
  )
}

function describe(info: ConsoleInfo, prefix: string): string {
  if (!info.listening) return `${prefix}the console is not listening (tend console starts it); ${info.tokens} token(s) valid`
  return `${prefix}the console listens on ${info.origin}; ${info.tokens} token(s) valid`
}

/**
 * Opens the page in the desktop's browser when there is a desktop; a headless machine just prints
 * the URL. The browser is given a file, never the URL: a token in the opener's (and so the
 * browser's) argv is readable by every local user in /proc/PID/cmdline. The file (0600, in the
 * 0700 home) sends the browser on to the URL; the daemon removes it once a page opened with that
 * token, and `tend console --revoke` removes any left.
 */
async function openBrowser(url: string, token: string, home: string, env: Record<string, string | undefined>): Promise<void> {
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return
  // Loaded here: the token's id is a SHA-256, and node:crypto would cost every other command its load.
  const { consoleRedirectFileName, consoleTokenId } = await import('../../../protocol/console-redirect.js')
  const file = join(home, consoleRedirectFileName(consoleTokenId(token)))
  try {
    const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
    try {
      writeSync(fd, redirectPage(url))
    } finally {
      closeSync(fd)
    }
    const child = spawn('xdg-open', [pathToFileURL(file).href], { detached: true, stdio: 'ignore' })
    child.on('error', () => undefined)
    child.unref()
  } catch {
    // No xdg-open, or no file: the URL is printed above.
  }
}

/** A page that goes on to the URL at once (as Jupyter's), with a link for a browser that does not follow. */
function redirectPage(url: string): string {
  const attribute = url.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="0; url=${attribute}">
<title>tend console</title></head>
<body><p>Opening <a href="${attribute}">the tend console</a>.</p></body></html>
`
}
