import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { notedCaller } from '../http/audit.js'
import type { TendApp } from '../http/tend-app.js'

/** The page's files, in the package: plain HTML, CSS and ES modules, served as they are (no build step). */
export const PAGE_DIR = fileURLToPath(new URL('../../../daemon/console/page/', import.meta.url))

/** Libraries the page imports, each one file of its package: served from node_modules, never fetched from the internet. */
const VENDOR_FILES: Record<string, { module: string; type: string }> = {
  'ansi_up.js': { module: 'ansi_up/ansi_up.js', type: 'text/javascript; charset=utf-8' },
  'uPlot.esm.js': { module: 'uplot/dist/uPlot.esm.js', type: 'text/javascript; charset=utf-8' },
  'uPlot.min.css': { module: 'uplot/dist/uPlot.min.css', type: 'text/css; charset=utf-8' },
  'xterm.mjs': { module: '@xterm/xterm/lib/xterm.mjs', type: 'text/javascript; charset=utf-8' },
  'xterm.css': { module: '@xterm/xterm/css/xterm.css', type: 'text/css; charset=utf-8' },
  'addon-fit.mjs': { module: '@xterm/addon-fit/lib/addon-fit.mjs', type: 'text/javascript; charset=utf-8' },
}

/**
 * Everything the page may load comes from this listener; nothing inline but its styles' attributes,
 * no frames, no referrer. The token never stays in an address (the guard redirects it away).
 */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
}

/**
 * The page at `/`, its files under `/console/`, its libraries under `/console/vendor/`, and
 * `/console/session.json`: the scope of the session the guard let in, so that a read-only page
 * shows its changes disabled, with the reason, before the operator tries one.
 */
export async function registerPageRoutes(app: TendApp): Promise<void> {
  // Loaded only when a console starts: a daemon without one never compiles it.
  const { default: fastifyStatic } = await import('@fastify/static')
  await app.register(fastifyStatic, {
    root: PAGE_DIR,
    prefix: '/console/',
    index: false,
    wildcard: true,
    cacheControl: false,
    setHeaders: (reply) => void reply.headers(PAGE_HEADERS),
  })
  app.get('/', (_request, reply) => reply.headers(PAGE_HEADERS).sendFile('index.html'))
  app.get('/console/session.json', (request, reply) => {
    const caller = notedCaller(request)
    return reply.headers(PAGE_HEADERS).send({ scope: caller?.via === 'console' && caller.scope === 'read' ? 'read' : 'operator' })
  })
  const require = createRequire(import.meta.url)
  for (const [name, { module, type }] of Object.entries(VENDOR_FILES)) {
    const path = require.resolve(module)
    app.get(`/console/vendor/${name}`, (_request, reply) =>
      reply
        .headers(PAGE_HEADERS)
        .type(type)
        .sendFile(path.slice(dirname(path).length + 1), dirname(path)),
    )
  }
}
