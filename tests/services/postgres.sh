#!/usr/bin/env bash
# A throwaway PostgreSQL 15 on 127.0.0.1 with logical replication on, for tests.
#
#   postgres.sh start DIR [PORT]   create (once) and start a cluster in DIR; prints
#                                  "host=127.0.0.1 port=PORT user=postgres dbname=postgres dir=DIR"
#   postgres.sh stop DIR [MODE]    stop it (MODE: fast, the default, or immediate); no-op when
#                                  not running
#   postgres.sh status DIR         exit 0 when running
#
# With PG_TLS=1 at creation the cluster serves TLS with a certificate for 127.0.0.1/localhost
# signed by a throwaway CA (DIR/tls/ca.crt) and refuses unencrypted TCP connections.
# PG_TLS=cert does the same and adds a superuser 'sluice' (with REPLICATION) that may connect
# over TCP only with a client certificate (pg_hba 'cert', sessions and replication alike):
# DIR/tls/client.crt (CN=sluice, signed by the same CA) and DIR/tls/client.key (PEM PKCS#8).
#
# Idempotent: starting a running cluster only prints its connection info. Postgres refuses to
# run as root, so as root initdb/pg_ctl run as the 'postgres' OS user (created when missing).
# Authentication is trust on loopback (also for replication connections). fsync is off: do not
# use this for tests that crash Postgres itself.
set -euo pipefail
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}; dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|status DIR [PORT]" >&2; exit 2; }
[[ -x "$PGBIN/initdb" ]] || { echo "postgres binaries not found in $PGBIN (apt-get install postgresql-15)" >&2; exit 1; }

as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

running() { [[ -f "$dir/data/postmaster.pid" ]] && as_owner "$PGBIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; }

info() {
  local port; port=$(sed -n 4p "$dir/data/postmaster.pid")
  echo "host=127.0.0.1 port=$port user=postgres dbname=postgres dir=$dir"
}

case "$cmd" in
  start)
    port=${3:-54320}
    if running; then info; exit 0; fi
    mkdir -p "$dir"
    if [[ $(id -u) -eq 0 ]]; then
      id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
      chown postgres:postgres "$dir"
    fi
    chmod 700 "$dir"
    if [[ ! -f "$dir/data/PG_VERSION" ]]; then
      as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
      if [[ "${PG_TLS:-0}" == 1 || "${PG_TLS:-0}" == cert ]]; then
        mkdir -p "$dir/tls"
        (
          cd "$dir/tls"
          openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3 -subj "/CN=sluice test CA" 2>/dev/null
          openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
          printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >server.ext
          openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 3 -extfile server.ext 2>/dev/null
        )
        hba='hostnossl all all 127.0.0.1/32 reject\nhostnossl replication all 127.0.0.1/32 reject\n'
        if [[ "$PG_TLS" == cert ]]; then
          (
            cd "$dir/tls"
            openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "/CN=sluice" 2>/dev/null
            printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n' >client.ext
            openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 3 -extfile client.ext 2>/dev/null
          )
          hba+='hostssl all sluice 127.0.0.1/32 cert\nhostssl replication sluice 127.0.0.1/32 cert\n'
          printf "ssl_ca_file = '%s'\n" "$dir/tls/ca.crt" | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
        fi
        chmod 600 "$dir/tls/server.key"
        [[ $(id -u) -eq 0 ]] && chown -R postgres:postgres "$dir/tls"
        chmod 755 "$dir/tls"; chmod 644 "$dir/tls/ca.crt"
        { printf "$hba"; cat "$dir/data/pg_hba.conf"; } >"$dir/hba.tmp"
        as_owner cp "$dir/hba.tmp" "$dir/data/pg_hba.conf"; rm -f "$dir/hba.tmp"
        printf "ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\n" "$dir/tls/server.crt" "$dir/tls/server.key" | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
        if [[ "$PG_TLS" == cert ]]; then new_cert_user=sluice; fi
      fi
    fi
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $port -k $dir \
      -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 \
      -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null \
      || { tail -20 "$dir/server.log" >&2; exit 1; }
    if [[ -n "${new_cert_user:-}" ]]; then
      as_owner "$PGBIN/psql" -h "$dir" -p "$port" -U postgres -d postgres -X -q -v ON_ERROR_STOP=1 \
        -c "CREATE ROLE $new_cert_user LOGIN SUPERUSER REPLICATION" >/dev/null
    fi
    info
    ;;
  stop)
    if running; then as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m "${3:-fast}" -w stop >/dev/null; fi
    ;;
  status)
    running
    ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
