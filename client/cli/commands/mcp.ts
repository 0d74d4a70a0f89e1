import type { Command } from 'commander'
import { TendError } from '../../../protocol/index.js'

/** `tend mcp` is dispatched by bin/tend.js to tools/mcp; it is listed here so that help shows it. */
export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .summary('serve the agent tools (bash, task_output, task_input, task_kill, task_list) over MCP on stdio')
    .option('--owner <owner>', "owner of this session's tasks (default: mcp-<random>)")
    .option('--keep-tasks', 'leave running tasks alone when the client disconnects')
    .action(() => {
      throw new TendError('TEND_ERR_USAGE', { detail: 'run it as `tend mcp` through the tend executable' })
    })
}
