#!/usr/bin/env bash
# Starts the Java conformance worker (docs/workers.md) built by sdk/java/build.sh; exec keeps the
# process id, so SIGTERM reaches the JVM.
set -euo pipefail
dir="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f "$dir/build/jobq-worker.jar" ]; then
  echo "conformance-worker.sh: $dir/build/jobq-worker.jar is missing: run bash sdk/java/build.sh --no-tests" >&2
  exit 2
fi
exec java -cp "$dir/build/test-classes:$dir/build/jobq-worker.jar:/usr/share/java/gson.jar" \
  io.github.jobq.conformance.ConformanceWorker
