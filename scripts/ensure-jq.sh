#!/usr/bin/env bash
# Makes sure jq is installed (the conformance suite's `jobq work` worker,
# sdk/conformance/testdata/exec_worker.sh, reads params with jq): Debian's
# jq package, installed as root with apt-get when missing.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
ensure_tool ensure-jq jq jq
