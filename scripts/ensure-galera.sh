#!/usr/bin/env bash
# Makes sure `jobq chaos --topology galera3` (make chaos-galera and the
# chaos package's Galera test) can start a Galera cluster: Debian's galera-4
# library at /usr/lib/galera/libgalera_smm.so and rsync (the state transfer
# method); mariadbd itself comes from ensure-db.sh. Installs what is missing
# as root with apt-get.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
provider=/usr/lib/galera/libgalera_smm.so
if [ -e "$provider" ]; then
  echo "ensure-galera: found $provider"
else
  apt_install ensure-galera galera-4
  [ -e "$provider" ] || { echo "ensure-galera: installed galera-4 but $provider is missing" >&2; exit 1; }
  echo "ensure-galera: installed Debian package galera-4: $provider"
fi
ensure_tool ensure-galera rsync rsync
