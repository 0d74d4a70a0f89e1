#!/usr/bin/env bash
# tend's tests on another Node line than the machine's: installs Node 22, 24 and 26 (the `node`
# package from the npm registry, under the aliases node22, node24 and node26) in this folder, and runs the
# files below under the one asked for, with tend as built by the machine's Node (`npm test` builds
# it first, as .ci/run does). The whole suite runs on the machine's Node; here runs what can differ
# between lines (test/README.md says why each is here), within about two minutes a line.
#
#   bash integration/node-lines/run.sh 22|24|26 [JSON_REPORT]
#
# With JSON_REPORT, vitest also writes its JSON report there (for a caller that adds up counts);
# with SKIP_REPORT_FILE in the environment, the reasons of skipped tests go there.
# Exits with vitest's status; 1 when the install fails or a listed file is missing.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
line="${1:-}"
case "$line" in
  22 | 24 | 26) ;;
  *) echo "usage: bash integration/node-lines/run.sh 22|24|26 [JSON_REPORT]" >&2; exit 1 ;;
esac

files=(
  # The package as a user installs it: engines, and (when present) the installed-package test.
  test/packaging/*.test.ts
  # The N-API addon and the spawner helper built once, then loaded by this Node.
  test/daemon/native/native-build.test.ts
  test/daemon/spawn/spawners.test.ts
  test/daemon/spawn/native-helper.test.ts
  # The CLI and the daemon end to end: start, read, kill, restart, events, the HTTP API.
  test/e2e/lifecycle.test.ts
  test/e2e/tasks.test.ts
  test/e2e/kill.test.ts
  test/e2e/output.test.ts
  test/e2e/events.test.ts
  test/e2e/restart.test.ts
  test/e2e/http-api.test.ts
  test/client/cli.test.ts
  # The spool's records and reads, the routes through fastify's inject (light-my-request).
  test/spool/*.test.ts
  test/daemon/http/routes-inject.test.ts
  # The agent tools and the MCP server with the SDK's client.
  test/tools/mcp.test.ts
  test/tools/plugin.test.ts
)
for file in "${files[@]}"; do
  [ -f "$root/$file" ] || { echo "integration/node-lines: $file is listed but missing" >&2; exit 1; }
done

cd "$here" || exit 1
npm ci --no-audit --no-fund || { echo "integration/node-lines: npm ci failed" >&2; exit 1; }
# The platform package's own bin/, not the alias's copy of its binary: Node's headers are in
# ../include/node beside it, where daemon/native/build.mjs looks for them (as in an official build).
bin=$(echo "$here/node_modules/node$line/node_modules/node-linux-"*/bin)
"$bin/node" -e "if (process.versions.node.split('.')[0] !== '$line') { console.error('expected Node $line, got ' + process.version); process.exit(1) }" || exit 1

reporters=(--reporter=default)
if [ "$#" -ge 2 ]; then reporters+=(--reporter=json --outputFile="$2"); fi
if [ -n "${SKIP_REPORT_FILE:-}" ]; then reporters+=(--reporter="$root/test/support/skip-reporter.ts"); fi
# On PATH first, so that what the tests start through `node` (tend's bin, npm) is this line too.
cd "$root" && PATH="$bin:$PATH" "$bin/node" node_modules/vitest/vitest.mjs run "${files[@]}" "${reporters[@]}"
