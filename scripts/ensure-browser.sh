#!/usr/bin/env bash
# Makes sure the console's browser tests (console/e2e_test.go) can run:
# Debian's chromium at /usr/bin/chromium (apt-get install as root when
# missing) and the pinned playwright-core in console/e2e/node_modules
# (npm ci from console/e2e/package-lock.json when missing or stale).
# Node.js and npm come from Debian's nodejs/npm packages when missing.
# JOBQ_SKIP_BROWSER=1 (local development only) skips all of it; the test
# then skips too, and says so. CI never sets it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${JOBQ_SKIP_BROWSER:-}" = "1" ]; then
  echo "ensure-browser: JOBQ_SKIP_BROWSER=1, not installing (the browser tests will skip)"
  exit 0
fi
need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-browser: missing ${need[*]}; install Debian's packages as root (apt-get install ${need[*]}) or set JOBQ_SKIP_BROWSER=1 to skip the browser tests locally" >&2
    exit 1
  fi
  echo "ensure-browser: installing Debian's ${need[*]} (apt-get install)"
  export DEBIAN_FRONTEND=noninteractive
  # Wait for another apt/dpkg run (up to 10 min) instead of failing.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# playwright-core: exactly the version in package-lock.json; npm ci again
# when the lockfile changed since the last install.
dir=console/e2e
stamp="$dir/node_modules/.lock-sha256"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "ensure-browser: npm ci in $dir (playwright-core, pinned)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
fi
echo "ensure-browser: $(/usr/bin/chromium --version 2>/dev/null | head -1), playwright-core $(node -p "require('./$dir/node_modules/playwright-core/package.json').version")"
