#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon; every other command is the client CLI.
const args = process.argv.slice(2)
const command = args.find((arg) => !arg.startsWith('-'))
const daemonFlagsOnly = args.every((arg) => arg === 'daemon' || arg === '--json')
if (command === 'daemon' && daemonFlagsOnly) {
  const { runDaemonForeground } = await import('../dist/daemon/index.js')
  process.exitCode = await runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`))
} else if (command === 'mcp') {
  const { runMcp } = await import('../dist/tools/mcp/main.js')
  process.exitCode = await runMcp(args.slice(args.indexOf('mcp') + 1))
} else {
  const { main } = await import('../dist/client/cli/main.js')
  await main(process.argv)
}
