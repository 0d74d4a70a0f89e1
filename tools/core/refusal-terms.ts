import { isTendError } from '../../client/index.js'
import { ToolFailure } from './tool-failure.js'

/**
 * The tool parameter that sets each field of a request (start, input, kill). A field no tool
 * parameter sets (memoryBytes, writablePaths, sandbox…) comes from the operator's settings: it
 * keeps its name, said to be a setting.
 */
const PARAMETER_OF_FIELD: Readonly<Record<string, string>> = {
  command: 'command',
  cwd: 'cwd',
  name: 'description',
  timeoutMs: 'timeout',
  lifetime: 'persistent',
  stdin: 'stdin',
  tty: 'tty',
  network: 'network',
  port: 'port',
  ready: 'ready',
  after: 'after',
  text: 'text',
  eof: 'eof',
  signal: 'signal',
  reason: 'reason',
}

/** ready's own fields, as bash's ready parameter names them. */
const READY_PARAMETER_OF_FIELD: Readonly<Record<string, string>> = { pattern: 'pattern', port: 'port', url: 'url', timeoutMs: 'timeout_ms' }

/** The daemon's advice for a cwd it will not sandbox names a CLI choice; an agent's is to pass cwd. */
const CLI_CWD_ADVICE = /: choose a project folder, or sandbox off$/

const CWD_ADVICE = 'pass cwd: the absolute path of the project folder you work in'

/** A request field's path (`cwd`, `after/0`, `ready/timeoutMs`) in the tool's terms (`cwd`, `after[0]`, `ready.timeout_ms`). */
export function parameterOfField(path: string): string {
  const [field = '', ...rest] = path.split(/[/.]/)
  const parameter = PARAMETER_OF_FIELD[field]
  if (parameter === undefined) return `${field} (an operator's setting, not a parameter)`
  if (field === 'ready' && rest[0] !== undefined) return `ready.${READY_PARAMETER_OF_FIELD[rest[0]] ?? rest[0]}`
  return parameter + rest.map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`)).join('')
}

/** A refusal's detail with every request field (`body/cwd`, `ready.timeoutMs`) named as the tool's parameter. */
export function detailInToolTerms(detail: string): string {
  const named = detail
    .replace(/\bbody\/([A-Za-z]+(?:\/[A-Za-z0-9]+)*)/g, (_match, path: string) => parameterOfField(path))
    .replace(/\bready\.timeoutMs\b/g, 'ready.timeout_ms')
  return named.startsWith('cwd: ') && CLI_CWD_ADVICE.test(named) ? named.replace(CLI_CWD_ADVICE, `: ${CWD_ADVICE}`) : named
}

/**
 * Runs a request on the agent's behalf; a refusal of its fields (TEND_ERR_VALIDATION) becomes a
 * ToolFailure that begins with `refused` ("the task was refused") and names the tool's parameters,
 * followed by `cwdNote` when it is the cwd that was refused; any other error passes unchanged.
 */
export async function inToolTerms<T>(refused: string, cwdNote: string | undefined, request: () => Promise<T>): Promise<T> {
  try {
    return await request()
  } catch (error) {
    if (!isTendError(error, 'TEND_ERR_VALIDATION') || typeof error.params.detail !== 'string') throw error
    const detail = detailInToolTerms(error.params.detail)
    const note = cwdNote !== undefined && detail.startsWith('cwd: ') ? `. ${cwdNote}` : ''
    throw new ToolFailure(`${refused}: ${detail}${note}`, { cause: error })
  }
}
