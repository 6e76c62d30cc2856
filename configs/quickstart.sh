#!/usr/bin/env bash
# The main job on one machine: a Postgres table mirrored into a warehouse table, live.
#
#   1. installs what is missing (the build packages, PostgreSQL 15) and builds sluice
#      (cargo build --release), unless SLUICE_BIN names a sluice binary to run instead;
#   2. starts a throwaway PostgreSQL 15 with wal_level=logical on 127.0.0.1
#      (tests/services/postgres.sh) with two databases: "shop", holding the table "orders",
#      and "warehouse";
#   3. runs sluice standalone on its embedded log with two connectors:
#      configs/postgres-source.json (Debezium's Postgres source: shop.public.orders into the
#      topic "shop.public.orders") and configs/warehouse-sink.json (the JDBC sink: that topic
#      into the table "orders" of "warehouse", upserts by key, deletes);
#   4. keeps changing shop.orders (inserts, updates, a few deletes, about three a second,
#      through psql) and prints the warehouse table every two seconds.
#
# Ctrl-C stops everything it started: the writer, the watcher, sluice and Postgres.
# Each run starts afresh: the state of the previous run is removed first.
#
# Environment:
#   QUICKSTART_DIR        where the state lives (default ./sluice-quickstart): postgres/ (the
#                         cluster), sluice-data/ (the embedded log), connectors/ (the connector
#                         files as run), sluice.log, writer.log
#   QUICKSTART_PG_PORT    Postgres port (default 55432)
#   QUICKSTART_REST_PORT  sluice's REST port (default 8083)
#   QUICKSTART_CHANGES    stop writing after this many changes (default: never)
#   SLUICE_BIN            a sluice binary to run instead of building one
#   PGBIN                 PostgreSQL 15 binaries (default /usr/lib/postgresql/15/bin)
set -euo pipefail

# Ctrl-C (SIGINT) must reach the traps below. A shell that starts this as a background job
# makes it ignore SIGINT, and bash cannot trap a signal ignored on entry: start over without.
ignored=$(sed -n 's/^SigIgn:[[:space:]]*//p' "/proc/$$/status" 2>/dev/null || true)
if [[ -n "$ignored" ]] && (( 0x$ignored & 2 )) && env --default-signal=INT true 2>/dev/null; then
  exec env --default-signal=INT bash "$0" "$@"
fi

state=$(realpath -m "${QUICKSTART_DIR:-sluice-quickstart}")
cd "$(dirname "$0")/.."
repo=$PWD
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
export PGBIN
pg_port=${QUICKSTART_PG_PORT:-55432}
rest_port=${QUICKSTART_REST_PORT:-8083}
changes=${QUICKSTART_CHANGES:-0}

if [[ -t 1 ]]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
say() { printf '%s\n' "${bold}quickstart:${plain} $*"; }
die() { say "$*" >&2; exit 1; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
apt_install() {
  local SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@"
}

# --- 1. what is missing, and the binary ---------------------------------------------------
if [[ ! -x "$PGBIN/postgres" || ! -x "$PGBIN/psql" ]]; then
  say "installing PostgreSQL 15"
  apt_install postgresql-15 postgresql-client-15
fi
if [[ -n "${SLUICE_BIN:-}" ]]; then
  sluice=$SLUICE_BIN
  [[ -x "$sluice" ]] || die "SLUICE_BIN=$sluice is not an executable"
else
  tests/services/setup.sh build
  say "building sluice (cargo build --release -p sluice)"
  cargo build --release -p sluice
  target=$(cargo metadata --no-deps --format-version 1 | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)
  sluice=$target/release/sluice
fi
psql_to() { "$PGBIN/psql" -h 127.0.0.1 -p "$pg_port" -U postgres -d "$1" -X -q -v ON_ERROR_STOP=1 "${@:2}"; }

# --- 2. a fresh state directory and Postgres ----------------------------------------------
pg_dir=$state/postgres
# A cluster left running by a run that was killed outright.
[[ -d "$pg_dir" ]] && tests/services/postgres.sh stop "$pg_dir" immediate >/dev/null 2>&1 || true
port_busy "$pg_port" && die "port $pg_port is taken; set QUICKSTART_PG_PORT to a free one"
port_busy "$rest_port" && die "port $rest_port is taken (another sluice?); set QUICKSTART_REST_PORT to a free one"
rm -rf "$pg_dir" "$state/sluice-data" "$state/connectors" "$state/sluice.log" "$state/writer.log"
mkdir -p "$state/connectors"
# As root, Postgres runs as the 'postgres' user, which must reach its directory, and the
# socket path must stay short; otherwise the cluster lives in /tmp for this run.
if [[ $(id -u) -eq 0 ]] && { ! runuser -u postgres -- test -x "$state" || (( ${#pg_dir} > 80 )); }; then
  pg_dir=$(mktemp -d /tmp/sluice-quickstart-pg.XXXXXX)
  tmp_pg_dir=$pg_dir
fi

sluice_pid="" writer_pid="" watcher_pid="" pg_started=""
cleanup() {
  # Runs once; a second Ctrl-C does not cut it short.
  trap - EXIT
  trap '' INT TERM
  echo
  say "stopping"
  for pid in $watcher_pid $writer_pid; do kill "$pid" 2>/dev/null || true; done
  for pid in $watcher_pid $writer_pid; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "$sluice_pid" ]] && kill -0 "$sluice_pid" 2>/dev/null; then
    kill -TERM "$sluice_pid" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$sluice_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$sluice_pid" 2>/dev/null || true
  fi
  [[ -n "$sluice_pid" ]] && { wait "$sluice_pid" 2>/dev/null || true; }
  [[ -n "$pg_started" ]] && { "$repo/tests/services/postgres.sh" stop "$pg_dir" fast >/dev/null 2>&1 || true; }
  [[ -n "${tmp_pg_dir:-}" ]] && rm -rf "$tmp_pg_dir"
  say "stopped; the state of this run is in $state"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

say "starting PostgreSQL 15 on 127.0.0.1:$pg_port (data in $pg_dir)"
pg_started=1
tests/services/postgres.sh start "$pg_dir" "$pg_port" >/dev/null
psql_to postgres -c "CREATE DATABASE shop" -c "CREATE DATABASE warehouse"
psql_to shop <<'SQL'
CREATE TABLE orders (
  id         serial PRIMARY KEY,
  customer   text NOT NULL,
  item       text NOT NULL,
  qty        int NOT NULL,
  price      numeric(10, 2) NOT NULL,
  status     text NOT NULL DEFAULT 'new',
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO orders (customer, item, qty, price)
SELECT (ARRAY['ada', 'grace', 'edsger', 'barbara', 'ken'])[1 + g % 5],
       (ARRAY['espresso', 'croissant', 'bagel', 'tea', 'muffin'])[1 + (g * 3) % 5],
       1 + g % 3, 2.50 + g
FROM generate_series(1, 10) g;
SQL

# --- 3. sluice ------------------------------------------------------------------------------
# The connector files as committed name port 55432; the copies that run name this run's port.
for f in postgres-source warehouse-sink; do
  sed "s/55432/$pg_port/g" "configs/$f.json" >"$state/connectors/$f.json"
done
say "starting sluice ($sluice), REST on http://127.0.0.1:$rest_port, log in $state/sluice.log"
CONNECT_LISTENERS="http://127.0.0.1:$rest_port" CONNECT_DATA_DIR="$state/sluice-data" \
  "$sluice" standalone configs/quickstart.properties \
  "$state/connectors/postgres-source.json" "$state/connectors/warehouse-sink.json" >"$state/sluice.log" 2>&1 &
sluice_pid=$!
for i in $(seq 600); do
  kill -0 "$sluice_pid" 2>/dev/null || { tail -20 "$state/sluice.log" >&2; die "sluice exited while starting (log above)"; }
  "$sluice" health "http://127.0.0.1:$rest_port" >/dev/null 2>&1 && break
  (( i < 600 )) || die "sluice did not answer /health within 60 s; see $state/sluice.log"
  sleep 0.1
done

# --- 4. the writer and the watcher ----------------------------------------------------------
# Background loops end at SIGTERM without waiting out their sleep.
nap() { sleep "$1" & nap_pid=$!; wait "$nap_pid" || true; }
(
  nap_pid=""
  trap 'kill $nap_pid 2>/dev/null; exit 0' TERM
  n=0
  while (( changes == 0 || n < changes )); do
    n=$((n + 1))
    case $((n % 10)) in
      1 | 4 | 7) sql="INSERT INTO orders (customer, item, qty, price)
                   VALUES ((ARRAY['ada','grace','edsger','barbara','ken'])[1 + floor(random() * 5)::int],
                           (ARRAY['espresso','croissant','bagel','tea','muffin'])[1 + floor(random() * 5)::int],
                           1 + floor(random() * 4)::int, round((2 + random() * 18)::numeric, 2))" ;;
      0) sql="DELETE FROM orders WHERE id = (SELECT id FROM orders ORDER BY random() LIMIT 1)" ;;
      *) sql="UPDATE orders SET status = CASE status WHEN 'new' THEN 'paid' WHEN 'paid' THEN 'shipped' ELSE 'delivered' END,
                   qty = qty + 1, updated_at = now()
              WHERE id = (SELECT id FROM orders WHERE status <> 'delivered' ORDER BY random() LIMIT 1)" ;;
    esac
    psql_to shop -c "$sql" >>"$state/writer.log" 2>&1 || true
    nap 0.3
  done
  say "writer: done after $n changes; change shop.orders yourself and watch the warehouse follow"
) &
writer_pid=$!
(
  nap_pid=""
  trap 'kill $nap_pid 2>/dev/null; exit 0' TERM
  while :; do
    src=$(psql_to shop -At -c "SELECT count(*) FROM orders" 2>/dev/null || echo "?")
    echo
    if dst=$(psql_to warehouse -At -c "SELECT count(*) FROM orders" 2>/dev/null); then
      say "$(date +%T) warehouse.orders: $dst rows (source shop.orders: $src rows); latest changes:"
      psql_to warehouse -P footer=off \
        -c "SELECT id, customer, item, qty, price, status, updated_at FROM orders ORDER BY updated_at DESC, id DESC LIMIT 5" 2>/dev/null || true
    else
      say "$(date +%T) warehouse.orders does not exist yet (source shop.orders: $src rows); sluice is starting"
    fi
    nap 2
  done
) &
watcher_pid=$!

say "running. Source:    $PGBIN/psql -h 127.0.0.1 -p $pg_port -U postgres shop"
say "         Warehouse: $PGBIN/psql -h 127.0.0.1 -p $pg_port -U postgres warehouse"
say "         Status:    curl -s http://127.0.0.1:$rest_port/connectors?expand=status"
say "         Ctrl-C stops everything."
wait "$sluice_pid" || true
say "sluice exited on its own; last lines of $state/sluice.log:"
tail -20 "$state/sluice.log"
exit 1
