#!/usr/bin/env bash
# Makes sure `jobq chaos --topology galera3` can start a Galera cluster:
# mariadbd (scripts/ensure-db.sh), Debian's galera-4 library at
# /usr/lib/galera/libgalera_smm.so and rsync (the state transfer method).
# Installs what is missing with apt-get when running as root, and says so.
set -euo pipefail
provider=/usr/lib/galera/libgalera_smm.so
missing=()
[ -e "$provider" ] || missing+=(galera-4)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
if [ ${#missing[@]} -eq 0 ]; then
  echo "ensure-galera: found $provider, rsync and mariadbd"
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-galera: installing ${missing[*]} (apt-get install)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  echo "ensure-galera: installed ${missing[*]}"
  exit 0
fi
echo "ensure-galera: missing ${missing[*]}: install them (Debian/Ubuntu: apt-get install ${missing[*]}; needs root)" >&2
exit 1
