import { randomBytes } from 'node:crypto'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { DEFAULT_TOOL_SETTINGS, processFolder, SessionRegistry, type OwnerAgent, type ToolSettings } from '../core/index.js'
import { createTendTools } from '../plugin.js'
import type { AgentLike } from '../harness/index.js'
import { ClientRoots } from './client-roots.js'

export interface McpServerOptions {
  /** tend's state folder (default: TEND_HOME, else the XDG state folder). */
  home?: string
  /** The owner of this session's tasks. Default: `mcp-` and a random suffix, one per server. */
  owner?: string
  /** Stop the session's running tasks when the client disconnects. Default true. */
  stopTasksOnClose?: boolean
  settings?: Partial<ToolSettings>
  version: string
  /** A cluster's Redis: the tasks run on its workers (default TEND_CLUSTER; unset: the local daemon). */
  cluster?: string
  /** The cluster's queue (default TEND_CLUSTER_QUEUE, else the default queue). */
  clusterQueue?: string
}

/**
 * Serves bash, task_output, task_input, task_kill and task_list over MCP: the same tools as the harness
 * plugin, one owner per MCP session. Completion notices go out as logging notifications and also
 * ride on the session's next tool result (most clients do not show log messages to the model).
 */
export async function serveMcp(transport: Transport, options: McpServerOptions): Promise<{ close: () => Promise<void> }> {
  const owner = options.owner ?? `mcp-${randomBytes(6).toString('hex')}`
  const server = new Server({ name: 'tend', version: options.version }, { capabilities: { tools: {}, logging: {} } })
  const sessions = new SessionRegistry({
    client: { home: options.home, cluster: options.cluster, clusterQueue: options.clusterQueue },
    stopTasksOnDispose: false,
    sinkFor: () => (notice) => {
      void server.sendLoggingMessage({ level: 'notice', logger: 'tend', data: notice }).catch(() => undefined)
      return false
    },
  })
  const roots = new ClientRoots(server)
  const agent: AgentLike & OwnerAgent = {
    id: owner,
    inject: () => undefined,
    workingFolders: async () => [...(await roots.folders()), processFolder('the folder tend mcp was started in')],
  }
  const tools = createTendTools({ sessions, settings: { ...DEFAULT_TOOL_SETTINGS, ...options.settings } })

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema as { type: 'object' } })),
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = tools.find((each) => each.name === request.params.name)
    if (!tool)
      return { content: [{ type: 'text', text: `unknown tool: ${request.params.name} (tools: ${tools.map((each) => each.name).join(', ')})` }], isError: true }
    try {
      const result = await tool.execute(request.params.arguments ?? {}, {
        callId: String(extra.requestId),
        name: tool.name,
        arguments: request.params.arguments,
        agent,
        signal: extra.signal,
      })
      return { content: result.content }
    } catch (error) {
      return { content: [{ type: 'text', text: (error as Error).message }], isError: true }
    }
  })

  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    await sessions.closeAll(options.stopTasksOnClose ?? true)
    await server.close().catch(() => undefined)
  }
  server.onclose = () => void close()
  // Make the session exist before the first call so its notices are tracked from the start.
  sessions.sessionFor(agent)
  await server.connect(transport)
  return { close }
}
