/** A socket a task's process listens on (TCP) or is bound to (UDP), as its network namespace has it. */
export interface TaskPort {
  proto: 'tcp' | 'udp'
  /** The local address, as the kernel has it (`0.0.0.0`, `::`, `127.0.0.1` …). */
  address: string
  port: number
}

/**
 * The most sockets a record lists in `ports` (the lowest ports first); how many more there were is
 * its `portsOmitted`. A task with thousands of sockets would otherwise make a record too large to write.
 */
export const MAX_RECORDED_PORTS = 64

/** The lowest and highest port `--port auto` hands out (the ephemeral range stays the kernel's). */
export const AUTO_PORT_RANGE = { first: 20_000, last: 29_999 } as const
