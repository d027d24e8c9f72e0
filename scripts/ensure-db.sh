#!/usr/bin/env bash
# Makes sure the database provider (dbprovider) will find a MySQL-compatible
# server: JOBQ_DSN, a Docker engine, or a local mariadbd/mysqld binary (from
# which it starts a throwaway server per test binary). On a fresh
# Debian/Ubuntu machine with none of them, installs Debian's mariadb-server
# package when running as root with apt-get, and says so.
set -euo pipefail
. "$(dirname "$0")/lib/apt.sh"
if [ -n "${JOBQ_DSN:-}" ]; then
  echo "ensure-db: using JOBQ_DSN"
  exit 0
fi
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  echo "ensure-db: Docker engine available; jobq will start mysql:8.4 with testcontainers"
  exit 0
fi
PATH="$PATH:/usr/sbin"
ensure_tool ensure-db mariadb-server mariadbd mysqld
