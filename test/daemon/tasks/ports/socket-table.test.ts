import { describe, expect, test } from 'vitest'
import { createServer } from 'node:net'
import { createSocket } from 'node:dgram'
import { endianness } from 'node:os'
import { parseSocketTable, readSocketTables } from '../../../../daemon/tasks/ports/socket-table.js'

const HEADER = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n'
const le = endianness() === 'LE'

describe('socket tables', () => {
  test('a listening TCP socket is read with its address, port and inode; other states are not', () => {
    const loopback = le ? '0100007F' : '7F000001'
    const text =
      HEADER +
      `   0: ${loopback}:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n` +
      `   1: ${loopback}:9C40 ${loopback}:0BB8 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1\n`
    expect(parseSocketTable(text, 'tcp', false)).toEqual([{ proto: 'tcp', address: '127.0.0.1', port: 3000, inode: '4242' }])
  })

  test('IPv6 addresses are written in their shortest form, and a UDP socket counts while unconnected', () => {
    const one = le ? '00000000000000000000000001000000' : '00000000000000000000000000000001'
    const text =
      HEADER +
      `  10: ${one}:14E9 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 77 2 0000000000000000 0\n` +
      `  11: 00000000000000000000000000000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000  1000        0 78 2 0000000000000000 0\n` +
      `  12: ${one}:14EA ${one}:0035 01 00000000:00000000 00:00000000 00000000  1000        0 79 2 0000000000000000 0\n`
    expect(parseSocketTable(text, 'udp', true)).toEqual([
      { proto: 'udp', address: '::1', port: 5353, inode: '77' },
      { proto: 'udp', address: '::', port: 53, inode: '78' },
    ])
  })

  test('malformed lines are skipped', () => {
    const text = HEADER + '   0: nothex:0BB8 00000000:0000 0A 0 0 0 0 0 1\n   1: 0100007F:0BB8 00000000:0000 0A 0 0 0 0 0 notanumber\n   2: short\n'
    expect(parseSocketTable(text, 'tcp', false)).toEqual([])
  })

  test("the daemon's own tables list a server it listens with, TCP and UDP", async () => {
    const server = createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const udp = createSocket('udp6')
    await new Promise<void>((resolve) => udp.bind(0, '::1', resolve))
    try {
      const tcpPort = (server.address() as { port: number }).port
      const udpPort = udp.address().port
      const sockets = await readSocketTables('self')
      expect(sockets).toContainEqual(expect.objectContaining({ proto: 'tcp', address: '127.0.0.1', port: tcpPort }))
      expect(sockets).toContainEqual(expect.objectContaining({ proto: 'udp', address: '::1', port: udpPort }))
    } finally {
      server.close()
      udp.close()
    }
  })
})
