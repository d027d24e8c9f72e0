#!/usr/bin/env bash
# Makes sure python3 (≥ 3.9) is installed: the conformance suite runs the
# Python worker library (sdk/python, standard library only) and the docs
# test runs the README's Python worker. Debian's python3 package, installed
# as root with apt-get when missing.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
ensure_tool ensure-python python3 python3
