#!/usr/bin/env bash
# Makes sure node is installed (loadtest's TestK6Scripts parses the k6
# scripts with node --check): Debian's nodejs package, installed as root
# with apt-get when missing.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
ensure_tool ensure-node nodejs node nodejs
