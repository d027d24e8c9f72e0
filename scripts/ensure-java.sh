#!/usr/bin/env bash
# Makes sure the Java worker library (sdk/java) can be built and tested with no network: a JDK 17
# (javac) and Debian's packaged Gson and JUnit 5 jars in /usr/share/java, which sdk/java/build.sh
# compiles against. Installed as root with apt-get when missing.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
ensure_tool ensure-java openjdk-17-jdk-headless javac
missing=()
[ -f /usr/share/java/gson.jar ] || missing+=(libgoogle-gson-java)
[ -f /usr/share/java/junit-platform-console-standalone.jar ] || missing+=(junit5)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install ensure-java "${missing[@]}"
  echo "ensure-java: installed Debian package(s) ${missing[*]}"
else
  echo "ensure-java: found /usr/share/java/gson.jar and /usr/share/java/junit-platform-console-standalone.jar"
fi
