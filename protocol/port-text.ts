import type { TaskPort } from './ports.js'

/**
 * A task's ports as people read them, e.g. `127.0.0.1:3000, *:8080, [::1]:5353/udp`: a socket on
 * every address (`0.0.0.0`, `::`) reads `*`; UDP says so. Empty for none.
 */
export function describePorts(ports: readonly TaskPort[] | undefined): string {
  return (ports ?? []).map(describePort).join(', ')
}

export function describePort(port: TaskPort): string {
  const host = port.address === '0.0.0.0' || port.address === '::' ? '*' : port.address.includes(':') ? `[${port.address}]` : port.address
  return `${host}:${port.port}${port.proto === 'udp' ? '/udp' : ''}`
}
