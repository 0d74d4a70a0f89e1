import { parseArgs } from 'node:util'
import { readFileSync } from 'node:fs'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { serveMcp } from './server.js'

const USAGE = 'usage: tend mcp [--owner OWNER] [--keep-tasks]'

/** `tend mcp`: an MCP server on stdin/stdout. Answers the exit code when the client goes away. */
export async function runMcp(argv: string[]): Promise<number> {
  let values
  try {
    ;({ values } = parseArgs({ args: argv, options: { owner: { type: 'string' }, 'keep-tasks': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true }))
  } catch (error) {
    process.stderr.write(`tend mcp: ${(error as Error).message}\n${USAGE}\n`)
    return 2
  }
  if (values.help) {
    process.stderr.write(`${USAGE}\nServes bash, task_output, task_kill and task_list over MCP on stdio; one owner per session.\n`)
    return 0
  }
  const version = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version
  const transport = new StdioServerTransport()
  const closed = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve)
    process.stdin.once('close', resolve)
    // Clients that stop their server with a signal (many do, the SDK after 2 s) still get the
    // session's tasks stopped: the signal ends the session like a closed stdin.
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.once(signal, () => resolve())
  })
  const server = await serveMcp(transport, { owner: values.owner, stopTasksOnClose: !values['keep-tasks'], version })
  await closed
  await server.close()
  return 0
}
