#!/usr/bin/env bash
# Makes sure prometheus and promtool are installed (the metrics package's
# end-to-end and rule tests run them): Debian's prometheus package, installed
# as root with apt-get when missing.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
ensure_tool ensure-prometheus prometheus promtool
ensure_tool ensure-prometheus prometheus prometheus
