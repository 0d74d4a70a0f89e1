// A task's ports as the page shows them: each a link where the browser can reach it, else text.
// A task's command is untrusted, and a link is a place the operator's browser goes: its address is
// made of one of a few fixed hosts and the record's port number, never of text the record holds.

import { visible } from '../shared/format.js'

/**
 * The host the operator's browser reaches each listening address at. Loopback and wildcard
 * sockets only: a task listening on another address of the machine shows it, unlinked.
 */
const BROWSER_HOSTS = new Map([
  ['127.0.0.1', '127.0.0.1'],
  ['0.0.0.0', '127.0.0.1'],
  ['::', '127.0.0.1'],
  ['::1', '[::1]'],
])

/**
 * Only a task on the host's network shares the browser's loopback: a sandboxed task in its owner's
 * private namespace (network `loopback` or `allow`) listens on a 127.0.0.1 the browser cannot reach.
 */
function sharesHostNetwork(task) {
  return task.sandbox === 'off' || task.network === 'host'
}

function isPortNumber(value) {
  return Number.isInteger(value) && value >= 1 && value <= 65535
}

/** The page a listening TCP port serves (`http://127.0.0.1:PORT/`), or null where there is none to open. */
export function portHref(task, port) {
  if (port?.proto !== 'tcp' || !isPortNumber(port.port) || !sharesHostNetwork(task)) return null
  const host = BROWSER_HOSTS.get(port.address)
  return host ? `http://${host}:${port.port}/` : null
}

/** The ports a running task holds (none once it ended). */
export function portsOf(task) {
  return task.state === 'running' && Array.isArray(task.ports) ? task.ports.filter((port) => isPortNumber(port?.port)) : []
}

/** One line for comparing: the cell is rebuilt only when this changes. */
export function portsKey(task) {
  return portsOf(task)
    .map((port) => `${port.proto} ${port.address} ${port.port} ${portHref(task, port) ?? ''}`)
    .join(',')
}

/** `3000`, `5353/udp`: a port in a cell, its address in its title. */
function portLabel(port) {
  return port.proto === 'tcp' ? String(port.port) : `${port.port}/${port.proto === 'udp' ? 'udp' : '?'}`
}

function portTitle(port, href) {
  const address = visible(port.address)
  const where = address.includes(':') ? `[${address}]:${port.port}` : `${address}:${port.port}`
  return `${port.proto === 'udp' ? 'udp' : 'tcp'} ${where}${href ? ` (opens ${href})` : ''}`
}

/** Fills `container` with the task's ports, in the record's order. */
export function renderPorts(container, task, { empty = '' } = {}) {
  const ports = portsOf(task)
  container.replaceChildren()
  if (ports.length === 0) {
    container.textContent = empty
    return
  }
  ports.forEach((port, index) => {
    if (index > 0) container.append(', ')
    const href = portHref(task, port)
    const item = document.createElement(href ? 'a' : 'span')
    item.className = 'port'
    item.textContent = portLabel(port)
    item.title = portTitle(port, href)
    if (href) {
      item.href = href
      item.target = '_blank'
      item.rel = 'noopener noreferrer'
    }
    container.append(item)
  })
}
