import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { ResultSchema, RootsListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { pathOfFileUri, type FolderCandidate } from '../core/index.js'

/** How long a roots/list request may take before the calls run without the client's roots. */
const LIST_ROOTS_TIMEOUT_MS = 5000

/**
 * The MCP client's roots (the protocol's `roots` capability) as folder candidates, in the client's
 * order: its `file://` roots only. Asked at the first call that needs them and again after the
 * client says the list changed; a client without the capability, or one that fails to answer
 * (within LIST_ROOTS_TIMEOUT_MS), has none.
 */
export class ClientRoots {
  private listed: Promise<FolderCandidate[]> | undefined

  constructor(private readonly server: Server) {
    server.setNotificationHandler(RootsListChangedNotificationSchema, () => {
      this.listed = undefined
    })
  }

  folders(): Promise<FolderCandidate[]> {
    this.listed ??= this.list()
    return this.listed
  }

  private async list(): Promise<FolderCandidate[]> {
    if (!this.server.getClientCapabilities()?.roots) return []
    try {
      // Read loosely (listRoots would refuse the whole list for one root that is not file://): each root is checked on its own.
      const { roots } = await this.server.request({ method: 'roots/list' }, ResultSchema, { timeout: LIST_ROOTS_TIMEOUT_MS })
      return (Array.isArray(roots) ? roots : []).flatMap((root: unknown) => {
        const uri = (root as { uri?: unknown } | null)?.uri
        const path = typeof uri === 'string' ? pathOfFileUri(uri) : undefined
        return path === undefined ? [] : [{ path, source: `the MCP client's root ${uri}` }]
      })
    } catch {
      // Not asked again until the client says its roots changed: a client that does not answer
      // would otherwise hold every call for the whole timeout.
      return []
    }
  }
}
