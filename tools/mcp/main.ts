import { parseArgs } from 'node:util'
import { readFileSync } from 'node:fs'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { clusterUrlFromArgv, normalizeClusterChoice } from '../../client/cluster/cluster-choice.js'
import { serveMcp } from './server.js'

const USAGE = 'usage: tend mcp [--owner OWNER] [--keep-tasks] [--allow-host-network] [--cluster REDIS_URL | --cluster-url-file FILE [--queue NAME]]'

/** `tend mcp`: an MCP server on stdin/stdout. Answers the exit code when the client goes away. */
export async function runMcp(argv: string[]): Promise<number> {
  let values
  try {
    ;({ values } = parseArgs({
      args: argv,
      options: {
        owner: { type: 'string' },
        'keep-tasks': { type: 'boolean' },
        'allow-host-network': { type: 'boolean' },
        cluster: { type: 'string' },
        'cluster-url-file': { type: 'string' },
        queue: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }))
  } catch (error) {
    process.stderr.write(`tend mcp: ${(error as Error).message}\n${USAGE}\n`)
    return 2
  }
  if (values.help) {
    process.stderr.write(
      `${USAGE}\nServes bash, task_output, task_input, task_kill and task_list over MCP on stdio; one owner per session.\n` +
        `With --cluster (or TEND_CLUSTER), the tasks run on that cluster's workers (docs/cluster.md).\n` +
        `With --allow-host-network, bash offers network "host" (the host's whole network) besides "loopback" and "allow".\n`,
    )
    return 0
  }
  let cluster: string | undefined
  try {
    cluster = clusterUrlFromArgv({ flag: '--cluster', url: values.cluster, file: values['cluster-url-file'], fileFlag: '--cluster-url-file' })
  } catch (error) {
    process.stderr.write(`tend mcp: ${(error as Error).message}\n${USAGE}\n`)
    return 2
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
  if (values.queue !== undefined && normalizeClusterChoice({ cluster }) === undefined) {
    process.stderr.write(`tend mcp: --queue needs --cluster (or TEND_CLUSTER)\n${USAGE}\n`)
    return 2
  }
  const server = await serveMcp(transport, {
    owner: values.owner,
    stopTasksOnClose: !values['keep-tasks'],
    settings: { allowHostNetwork: values['allow-host-network'] === true },
    version,
    cluster,
    clusterQueue: values.queue,
  })
  await closed
  await server.close()
  return 0
}
