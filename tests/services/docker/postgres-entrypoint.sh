#!/bin/bash
# The part of the official postgres image's entrypoint the tests and docker/compose.yaml use:
# first start initialises $PGDATA as POSTGRES_USER (default postgres) with POSTGRES_PASSWORD,
# creates POSTGRES_DB, runs /docker-entrypoint-initdb.d/*.sql and *.sh, then runs the server
# as the postgres user, listening on every address (password auth from other hosts, or
# POSTGRES_HOST_AUTH_METHOD).
set -euo pipefail
if [[ "${1:0:1}" == - ]]; then set -- postgres "$@"; fi
if [[ "$1" != postgres ]]; then exec "$@"; fi
if [[ $(id -u) -eq 0 ]]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
  if [[ -z "${POSTGRES_PASSWORD:-}" && "$auth" != trust ]]; then
    echo "Database is uninitialized and superuser password is not specified: set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host="$auth" -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
  if [[ "$db" != postgres ]]; then psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -qc "CREATE DATABASE \"$db\""; fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sql) psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d "$db" -qf "$f" ;;
      *.sh) PGHOST=/var/run/postgresql PGUSER="$user" PGDATABASE="$db" . "$f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql
