#!/usr/bin/env bash
# Builds the Java worker library without Maven or a network: javac and jar against Debian's
# packaged jars in /usr/share/java (libgoogle-gson-java, junit5; scripts/ensure-java.sh installs
# them), then runs the JUnit 5 tests with the console launcher.
#
#   bash sdk/java/build.sh             build/jobq-worker.jar, build/test-classes, run the tests
#   bash sdk/java/build.sh --no-tests  the same without running the tests
#
# The tests in ReplicaTest run against the replica named by JOBQ_TEST_SERVER (started with
# --remote-type sdk-test) and are skipped when it is unset. An inherited JOBQ_SERVER (a user's
# replica) is not used by the tests. The ResizeWorker example of README.md is compiled too.
set -euo pipefail
cd "$(dirname "$0")"
run_tests=1
case "${1:-}" in
  --no-tests) run_tests=0 ;;
  "") ;;
  *) echo "usage: build.sh [--no-tests]" >&2; exit 2 ;;
esac

JARS=/usr/share/java
GSON=$JARS/gson.jar
JUNIT=$JARS/junit-platform-console-standalone.jar
for jar in "$GSON" "$JUNIT"; do
  if [ ! -f "$jar" ]; then
    echo "build.sh: $jar is missing: run scripts/ensure-java.sh (Debian packages libgoogle-gson-java junit5)" >&2
    exit 1
  fi
done

rm -rf build
mkdir -p build/classes build/test-classes
javac --release 17 -Xlint:all,-serial -Werror -d build/classes -cp "$GSON" \
  $(find src/main/java -name '*.java')
jar --create --file build/jobq-worker.jar -C build/classes .
# The conformance worker uses sun.misc.Signal (exit 0 on SIGTERM): -Werror is off for test sources.
javac --release 17 -nowarn -XDignore.symbol.file -d build/test-classes \
  -cp "build/jobq-worker.jar:$GSON:$JUNIT" $(find src/test/java -name '*.java')
echo "build.sh: built build/jobq-worker.jar"

# The README's example must compile against the library as built.
mkdir -p build/readme build/readme-classes
awk '/^```java$/ {on=1; next} /^```$/ {if (on) exit} on' README.md > build/readme/ResizeWorker.java
javac --release 17 -Xlint:all -Werror -d build/readme-classes -cp "build/jobq-worker.jar:$GSON" \
  build/readme/ResizeWorker.java
echo "build.sh: README.md's ResizeWorker compiles"

if [ "$run_tests" = 1 ]; then
  status=0
  if [ -n "${JOBQ_SERVER:-}" ] && [ -z "${JOBQ_TEST_SERVER:-}" ]; then
    echo "build.sh: JOBQ_SERVER is not used by the tests; set JOBQ_TEST_SERVER to run ReplicaTest against a replica"
  fi
  java -jar "$JUNIT" --disable-banner --disable-ansi-colors --details=tree \
    --class-path "build/test-classes:build/jobq-worker.jar:$GSON" \
    --select-package io.github.jobq.worker | tee build/junit.txt || status=$?
  count() { sed -n "s/^\[ *\([0-9]*\) tests $1 *\]$/\1/p" build/junit.txt; }
  # One plain closing line; aborted tests are the ones skipped for want of JOBQ_SERVER.
  echo "java: $(count successful) passed, $(count failed) failed, $(count aborted) skipped"
  exit "$status"
fi
