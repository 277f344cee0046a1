#!/bin/sh
# Runs the web UI end-to-end test (e2e.test.mjs): installs playwright-core
# from package-lock.json into tests/web/node_modules when it is missing
# (npm ci; the npm registry is reachable at setup time), then runs the test.
# Usage: run_e2e.sh --tesserad PATH --agent PATH --web-dir DIR --worker PATH --artifacts DIR
#                   [--worker-binary PATH]  (all flags: see e2e.test.mjs)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null 2>&1 || { echo "FAIL node is not installed (run scripts/setup.sh)"; exit 1; }
if [ ! -f "$here/node_modules/playwright-core/package.json" ]; then
  command -v npm >/dev/null 2>&1 || { echo "FAIL npm is not installed (run scripts/setup.sh)"; exit 1; }
  echo "installing playwright-core into $here/node_modules (npm ci)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
exec node "$here/e2e.test.mjs" "$@"
