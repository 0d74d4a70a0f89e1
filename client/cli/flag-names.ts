import type { TendError } from '../../protocol/index.js'

/**
 * The flag that fills each request field the CLI sends, by the field's path in the request's body
 * or query (its array indexes left out). The daemon names fields as its API has them
 * (`body/memoryBytes`); the person at the terminal typed `--memory`.
 */
const FLAG_OF_FIELD: Readonly<Record<string, string>> = {
  name: '--name',
  cwd: '--cwd',
  env: '--env',
  timeoutMs: '--timeout',
  maxOutputBytes: '--max-output',
  owner: '--owner',
  sandbox: '--sandbox',
  network: '--network',
  allowNet: '--allow-net',
  writablePaths: '--writable',
  memoryBytes: '--memory',
  pidsMax: '--pids',
  lifetime: '--persistent',
  stdin: '--stdin',
  tty: '--tty',
  'tty/cols': '--cols',
  'tty/rows': '--rows',
  port: '--port',
  after: '--after',
  afterAny: '--after-any',
  'ready/pattern': '--ready-pattern',
  'ready/port': '--ready-port',
  'ready/url': '--ready-http',
  'ready/timeoutMs': '--ready-timeout',
  ready: '--ready',
  signal: '--signal',
  graceMs: '--grace',
  from: '--from',
  tail: '--tail',
  limit: '--limit',
  olderThanMs: '--older-than',
  keepTasks: '--keep-tasks',
  host: '--host',
  insecure: '--insecure',
  tlsCert: '--tls-cert',
  tlsKey: '--tls-key',
  // The task a verb names: its <id> argument (a ref in the query, an id in the path).
  ref: 'ID',
  id: 'ID',
}

/**
 * A field as the daemon names it: `body/x/y`, `querystring/x`, `params/id`, or the readiness condition's
 * `ready.pattern`. One followed by ` (` is not the request's own (`writablePaths (daemon setting)`).
 */
const FIELD_REFERENCE = /\b(?:(?:body|querystring|params)\/([A-Za-z][A-Za-z0-9/]*)|ready\.(pattern|url))(?![A-Za-z0-9/]| \()/g

/** The daemon's words for a setting the CLI sets by a flag, as the flag reads. */
const SETTING_WORDS: ReadonlyArray<[RegExp, string]> = [
  [/\ba sandbox \((workspace or strict)\)/g, '--sandbox $1'],
  [/\b(needs?|or) sandbox (workspace or strict|workspace|strict|off)\b/g, '$1 --sandbox $2'],
  [/\bonly network (allow|host|loopback)\b/g, 'only --network $1'],
]

/** The flag a field path stands for (`writablePaths/0` is `--writable`), or undefined when none sets it. */
export function flagOfField(path: string): string | undefined {
  const segments = path.split('/').filter((segment) => !/^\d+$/.test(segment))
  for (let length = segments.length; length > 0; length--) {
    const flag = FLAG_OF_FIELD[segments.slice(0, length).join('/')]
    if (flag !== undefined) return flag
  }
  return undefined
}

/**
 * An error's message in the terms of the command line: each request field it names becomes the
 * flag that set it, with the flags those refusals ask for, and `invalid request: ` goes when every
 * problem it lists is a flag's. `flags` lists the flags named (none: the message is as it came).
 */
export function inFlagTerms(error: TendError): { message: string; flags: string[] } {
  const flags: string[] = []
  const rewrite = (text: string) => {
    let mapped = false
    const replaced = text.replace(FIELD_REFERENCE, (whole, bodyPath: string | undefined, readyField: string | undefined) => {
      const flag = flagOfField(bodyPath ?? `ready/${readyField}`)
      if (flag === undefined) return whole
      mapped = true
      if (!flags.includes(flag)) flags.push(flag)
      return flag
    })
    return { text: mapped ? SETTING_WORDS.reduce((line, [words, flag]) => line.replace(words, flag), replaced) : text, mapped }
  }
  if (error.code !== 'TEND_ERR_VALIDATION' || typeof error.params.detail !== 'string') return { message: rewrite(error.message).text, flags }
  // A problem begins with the field it is about; a `; ` inside one's explanation does not split it.
  const problems = error.params.detail.split(/; (?=(?:body|querystring|params|headers|url)\/|ready\.)/).map(rewrite)
  const detail = problems.map((problem) => problem.text).join('; ')
  return { message: problems.every((problem) => problem.mapped) ? detail : `invalid request: ${detail}`, flags }
}
