export { createPeerCheck, decidePeer, type PeerCheck, type OwnIdentity, type PeerCheckStatus, type PeerVerdict } from './peer-check.js'
export { peerCheckedServerFactory, peerOf } from './checked-server.js'
export {
  CHECKED_NAMESPACES,
  loadPeerAddon,
  type AddonLoad,
  type NamespaceName,
  type Namespaces,
  type PeerCredentialsAddon,
  type PeerInspection,
  type VisibleFacts,
} from './peer-addon.js'
