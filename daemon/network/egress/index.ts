export { EgressProxy } from './proxy.js'
export { DnsStub, SYNTHETIC_TTL_SECONDS, type DnsStubOptions } from './dns-stub.js'
export { SyntheticAddresses } from './synthetic-addresses.js'
export type { Decision, EgressOptions, EgressTask, LocalAddress, Peer, Via } from './types.js'
