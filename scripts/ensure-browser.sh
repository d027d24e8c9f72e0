#!/usr/bin/env bash
# Makes sure the console's browser test (console/e2e_test.go) can run:
# Debian's chromium at /usr/bin/chromium, node and npm (Debian packages,
# installed as root with apt-get when missing), and the pinned
# playwright-core in console/e2e/node_modules (npm ci from
# console/e2e/package-lock.json when missing or when the lockfile changed).
# JOBQ_SKIP_BROWSER=1 (local development only) skips all of it; the test
# then skips too and says so. CI never sets it: there a missing browser
# fails.
set -euo pipefail
here=$(dirname "$0")
. "$here/lib/apt.sh"
if [ "${JOBQ_SKIP_BROWSER:-}" = "1" ]; then
  echo "ensure-browser: JOBQ_SKIP_BROWSER=1: not installing; the console's browser test will skip"
  exit 0
fi
ensure_tool ensure-browser chromium /usr/bin/chromium
ensure_tool ensure-browser nodejs node
ensure_tool ensure-browser npm npm
dir="$here/../console/e2e"
stamp="$dir/node_modules/.lock-sha256"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "ensure-browser: npm ci in console/e2e (playwright-core, pinned in package-lock.json)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$want" >"$stamp"
fi
echo "ensure-browser: $(/usr/bin/chromium --version 2>/dev/null | head -1); playwright-core $(cd "$dir" && node -p "require('playwright-core/package.json').version")"
