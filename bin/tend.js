#!/usr/bin/env node
// The composition root: `tend daemon` runs the daemon; every other command is the client CLI.
const [command] = process.argv.slice(2)
if (command === 'daemon' && !process.argv.slice(3).some((arg) => arg === '--help' || arg === '-h')) {
  const { runDaemonForeground } = await import('../dist/daemon/index.js')
  process.exitCode = await runDaemonForeground(process.env, (line) => process.stderr.write(`${line}\n`))
} else {
  const { main } = await import('../dist/client/cli/main.js')
  await main(process.argv)
}
