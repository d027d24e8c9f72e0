#!/usr/bin/env bash
# Makes sure the database provider (dbprovider) will find a MySQL-compatible
# server: JOBQ_DSN, a Docker engine, or a local mariadbd/mysqld binary. On a
# fresh Debian/Ubuntu machine with none of them, installs Debian's
# mariadb-server package when running as root with apt-get, and says so.
set -euo pipefail
if [ -n "${JOBQ_DSN:-}" ]; then
  echo "ensure-db: using JOBQ_DSN"
  exit 0
fi
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  echo "ensure-db: Docker engine available; jobq will start mysql:8.4 with testcontainers"
  exit 0
fi
for b in mariadbd mysqld /usr/sbin/mariadbd /usr/sbin/mysqld; do
  if command -v "$b" >/dev/null 2>&1; then
    echo "ensure-db: found $(command -v "$b"); jobq will start a throwaway server from it"
    exit 0
  fi
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-db: no MySQL-compatible server found; installing Debian's mariadb-server package (apt-get install mariadb-server)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq mariadb-server >/dev/null
  echo "ensure-db: installed $(command -v mariadbd || echo /usr/sbin/mariadbd)"
  exit 0
fi
echo "ensure-db: no MySQL-compatible server: set JOBQ_DSN, start Docker, or install mariadb-server (needs root)" >&2
exit 1
