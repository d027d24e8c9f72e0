# Shared by scripts/ensure-*.sh (sourced, not run): find a tool, or install
# the Debian package that provides it when running as root with apt-get, and
# say which; otherwise fail with one line that says what to install.

# ensure_tool NAME PACKAGE BINARY... — NAME prefixes the messages.
ensure_tool() {
  local name=$1 pkg=$2
  shift 2
  local b
  for b in "$@"; do
    if command -v "$b" >/dev/null 2>&1; then
      echo "$name: found $(command -v "$b")"
      return 0
    fi
  done
  apt_install "$name" "$pkg"
  for b in "$@"; do
    if command -v "$b" >/dev/null 2>&1; then
      echo "$name: installed Debian package $pkg: $(command -v "$b")"
      return 0
    fi
  done
  echo "$name: installed $pkg but found none of: $*" >&2
  exit 1
}

# apt_install NAME PACKAGE... — installs with apt-get as root, or exits 1
# with one line naming the packages.
apt_install() {
  local name=$1
  shift
  if [ "$(id -u)" != "0" ]; then
    echo "$name: missing; cannot install it (not root): run as root or install Debian package(s) $* yourself" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$name: missing; cannot install it (no apt-get on this machine): install the package(s) $* by other means" >&2
    exit 1
  fi
  echo "$name: installing Debian package(s) $* (apt-get install)"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"; } >/tmp/jobq-apt-$$.log 2>&1; then
    echo "$name: apt-get install $* failed; its output is in /tmp/jobq-apt-$$.log" >&2
    exit 1
  fi
  rm -f /tmp/jobq-apt-$$.log
}
