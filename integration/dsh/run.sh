#!/usr/bin/env bash
# The DeepSeek Harness integration suite: installs the pinned harness packages and Node 22 (the
# `node` package from the npm registry) in this folder, builds tend, and runs the suite under that
# Node 22. tend itself stays on Node >= 20; only the published harness needs 22.
#
#   bash integration/dsh/run.sh [JSON_REPORT]
#
# With JSON_REPORT, vitest also writes its JSON report there (for a caller that adds up counts);
# with SKIP_REPORT_FILE in the environment, the reasons of skipped tests go there.
# Exits with vitest's status; 1 when the install or the build fails.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

cd "$here" || exit 1
npm ci --no-audit --no-fund || { echo "integration/dsh: npm ci failed" >&2; exit 1; }
node22="$here/node_modules/.bin/node"
"$node22" -e 'if (+process.versions.node.split(".")[0] !== 22) { console.error(`expected Node 22, got ${process.version}`); process.exit(1) }' || exit 1

# The suite loads tend's built plugin (dist/tools/dsh), as a harness user would. The second tsc
# checks the suite, and tend's declarations of the harness surface against the real packages.
(cd "$root" && npx tsc -p tsconfig.json) || { echo "integration/dsh: building tend failed" >&2; exit 1; }
(cd "$root" && npx tsc -p integration/dsh/tsconfig.json) || { echo "integration/dsh: type check failed" >&2; exit 1; }

reporters=(--reporter=default)
if [ "$#" -ge 1 ]; then reporters+=(--reporter=json --outputFile="$1"); fi
# With SKIP_REPORT_FILE set (as .ci/run does), skipped tests are recorded with their reasons.
if [ -n "${SKIP_REPORT_FILE:-}" ]; then reporters+=(--reporter="$root/test/support/skip-reporter.ts"); fi
"$node22" "$here/node_modules/vitest/vitest.mjs" run --root "$here" "${reporters[@]}"
