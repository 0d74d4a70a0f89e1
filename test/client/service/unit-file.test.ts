import { describe, expect, test } from 'vitest'
import { createUnitFile, quoteUnitWord, type UnitFileOptions } from '../../../client/service/unit-file.js'

const USER: UnitFileOptions = {
  scope: 'user',
  nodePath: '/usr/bin/node',
  tendBin: '/usr/lib/node_modules/tend/bin/tend.js',
  home: '/home/ada/.local/state/tend',
  path: '/home/ada/.local/bin:/usr/local/bin:/usr/bin:/bin',
  notify: true,
  docs: '/usr/lib/node_modules/tend/docs/service.md',
}

/** The unit's `Key=value` lines of one section, in order. */
function section(unit: string, name: string): string[] {
  const lines = unit.split('\n')
  const start = lines.indexOf(`[${name}]`)
  expect(start, `[${name}] in\n${unit}`).toBeGreaterThanOrEqual(0)
  const rest = lines.slice(start + 1)
  const end = rest.findIndex((line) => line.startsWith('['))
  return rest.slice(0, end === -1 ? undefined : end).filter((line) => line !== '' && !line.startsWith('#'))
}

describe('the unit a user service gets', () => {
  const unit = createUnitFile(USER)

  test('runs `tend daemon` with the absolute node and tend of this copy, as Type=notify heard from the main pid only', () => {
    expect(section(unit, 'Service')).toEqual(
      expect.arrayContaining([
        'Type=notify',
        'NotifyAccess=main',
        'ExecStart=/usr/bin/node /usr/lib/node_modules/tend/bin/tend.js daemon',
        'Environment="TEND_HOME=/home/ada/.local/state/tend"',
        'Environment="PATH=/home/ada/.local/bin:/usr/local/bin:/usr/bin:/bin"',
      ]),
    )
  })

  test('delegates its cgroup to the daemon, which makes its cgroup v2 task groups in it', () => {
    expect(section(unit, 'Service')).toEqual(expect.arrayContaining(['Delegate=yes', 'Environment="TEND_CGROUP_ROOT=own"']))
  })

  test('delegates its cgroup, leaves keepers and tasks alone when the daemon goes, and restarts a daemon that failed', () => {
    expect(section(unit, 'Service')).toEqual(
      expect.arrayContaining([
        'Delegate=yes',
        'KillMode=process',
        'Restart=on-failure',
        'RestartSec=2s',
        'RestartPreventExitStatus=2',
        'TimeoutStopSec=60s',
        'OOMPolicy=continue',
        'TasksMax=infinity',
      ]),
    )
  })

  test('starts with the user session, and names its docs', () => {
    expect(section(unit, 'Install')).toEqual(['WantedBy=default.target'])
    expect(section(unit, 'Unit')).toEqual(
      expect.arrayContaining(['Documentation=file:///usr/lib/node_modules/tend/docs/service.md', expect.stringMatching(/^Description=tend/)]),
    )
    expect(section(unit, 'Service').some((line) => line.startsWith('User='))).toBe(false)
  })

  test('has none of the hardening that would change what tasks see or keep bubblewrap from its namespaces', () => {
    for (const option of ['ProtectSystem', 'ProtectHome', 'PrivateTmp', 'NoNewPrivileges', 'PrivateDevices', 'RestrictNamespaces', 'SystemCallFilter'])
      expect(unit).not.toMatch(new RegExp(`^${option}=`, 'm'))
  })
})

describe('the unit a system service gets', () => {
  const unit = createUnitFile({ ...USER, scope: 'system', user: 'root', home: '/root/.local/state/tend' })

  test('runs as the user named, after the network, wanted by multi-user.target', () => {
    expect(section(unit, 'Service')).toContain('User=root')
    expect(section(unit, 'Unit')).toEqual(expect.arrayContaining(['After=network.target']))
    expect(section(unit, 'Install')).toEqual(['WantedBy=multi-user.target'])
  })
})

test('without the service-notify addon the unit is Type=exec, and says why', () => {
  const unit = createUnitFile({ ...USER, notify: false })
  expect(section(unit, 'Service')).toContain('Type=exec')
  expect(section(unit, 'Service')).not.toContain('NotifyAccess=main')
  expect(unit).toMatch(/^# .*service-notify addon/m)
})

test('paths with spaces, quotes, % and $ are quoted and escaped as systemd reads them', () => {
  expect(quoteUnitWord('/usr/bin/node')).toBe('/usr/bin/node')
  expect(quoteUnitWord('/opt/my tools/node')).toBe('"/opt/my tools/node"')
  expect(quoteUnitWord('/a/100%/$HOME/"x"\\y')).toBe('"/a/100%%/$$HOME/\\"x\\"\\\\y"')
  const unit = createUnitFile({ ...USER, home: '/home/a b/100%', nodePath: '/opt/my tools/node' })
  expect(section(unit, 'Service')).toEqual(
    expect.arrayContaining(['Environment="TEND_HOME=/home/a b/100%%"', 'ExecStart="/opt/my tools/node" /usr/lib/node_modules/tend/bin/tend.js daemon']),
  )
})

test('a value with a line break, or a relative path, is refused naming it', () => {
  expect(() => createUnitFile({ ...USER, home: '/home/a\nExecStartPre=/bin/evil' })).toThrow(/home.*line break/)
  expect(() => createUnitFile({ ...USER, nodePath: 'node' })).toThrow(/nodePath.*absolute path.*"node"/)
  expect(() => createUnitFile({ ...USER, scope: 'system', user: 'root; rm' })).toThrow(/user is not a user name/)
})

test('a system unit takes a uid where the user has no name', () => {
  expect(section(createUnitFile({ ...USER, scope: 'system', user: '1000' }), 'Service')).toContain('User=1000')
})
