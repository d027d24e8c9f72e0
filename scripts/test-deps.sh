#!/usr/bin/env bash
# Installs or finds everything the tests need by running the
# scripts/ensure-NAME.sh of each dependency below (a script not there yet is
# skipped: ensure-browser.sh comes with the console's browser tests). Each
# says what it found or installed; the first that cannot provide its tool
# stops this script with its one-line reason. make test and .ci/run (through
# make test) run it. ensure-galera.sh is listed because the chaos package's
# TestGaleraNodeKillIsValid starts a 3-node Galera cluster (about 50 s);
# ensure-java.sh because the conformance suite builds sdk/java; ensure-jq.sh
# because its `jobq work` worker script reads params with jq;
# ensure-python.sh for the Python worker library and the README. A
# test that needs a new tool: write its
# ensure-NAME.sh (sourcing lib/apt.sh) and add NAME here.
set -euo pipefail
cd "$(dirname "$0")"
for name in db galera prometheus node python java jq browser; do
  if [ -f "ensure-$name.sh" ]; then
    bash "./ensure-$name.sh"
  fi
done
