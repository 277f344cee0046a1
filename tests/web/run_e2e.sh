#!/bin/sh
# Runs the web UI end-to-end test (e2e.test.mjs) with the Playwright that PyPI's
# `playwright` wheel carries (its driver: a Node.js binary and the playwright-core
# package), installed by scripts/setup.sh into the project's virtual environment,
# driving Debian's chromium. Nothing is downloaded.
# TESSERA_PYTHON names that environment's python (default: <repo>/.venv/bin/python).
# Usage: run_e2e.sh --tesserad PATH --agent PATH --web-dir DIR --worker PATH --artifacts DIR
#                   [--worker-binary PATH]  (all flags: see e2e.test.mjs)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python=${TESSERA_PYTHON:-$here/../../.venv/bin/python}
if ! driver=$("$python" -c 'import os, playwright; print(os.path.join(os.path.dirname(playwright.__file__), "driver"))' 2>/dev/null); then
  echo "FAIL the playwright wheel is not installed in $python (run scripts/setup.sh)"
  echo "0 passed, 1 failed"
  exit 1
fi
TESSERA_PLAYWRIGHT_CORE="file://$driver/package/index.mjs"
export TESSERA_PLAYWRIGHT_CORE
exec "$driver/node" "$here/e2e.test.mjs" "$@"
