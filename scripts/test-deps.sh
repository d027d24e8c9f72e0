#!/usr/bin/env bash
# Installs or finds everything the tests need, by running every
# scripts/ensure-*.sh in name order (database server, Prometheus, node, …;
# a new dependency is a new ensure-NAME.sh). Each says what it found or
# installed; the first that cannot provide its tool stops this script with
# its one-line reason. make test and .ci/run both run it.
set -euo pipefail
cd "$(dirname "$0")"
for s in ensure-*.sh; do
  bash "./$s"
done
