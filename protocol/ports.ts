/** A socket a task's process listens on (TCP) or is bound to (UDP), as its network namespace has it. */
export interface TaskPort {
  proto: 'tcp' | 'udp'
  /** The local address, as the kernel has it (`0.0.0.0`, `::`, `127.0.0.1` …). */
  address: string
  port: number
}

/** The lowest and highest port `--port auto` hands out (the ephemeral range stays the kernel's). */
export const AUTO_PORT_RANGE = { first: 20_000, last: 29_999 } as const
