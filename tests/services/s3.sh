#!/usr/bin/env bash
# An S3-compatible server (moto 5.2.5) on 127.0.0.1 for tests.
#
#   s3.sh install             create the venv (once): moto[server], boto3, pyarrow, duckdb
#                             (pinned in PACKAGES below)
#   s3.sh start PORT [LOG]    start moto on 127.0.0.1:PORT; prints its PID once it accepts
#                             connections (exit 1 when it does not come up)
#   s3.sh stop PID            stop that server (by PID only)
#
# Endpoint http://127.0.0.1:PORT, region us-east-1, path-style addressing. Authentication is
# off unless INITIAL_NO_AUTH_ACTION_COUNT is set in the environment (then SigV4 is checked
# after that many requests, against IAM users created through moto).
# The venv lives in ${S3_VENV:-$HOME/.cache/sluice-test/moto-5.2.5}; installing is skipped when
# it is complete. moto 5.2.5, not 5.2.1: 5.2.1's CompleteMultipartUpload reply breaks
# aws-sdk-s3. pyarrow and duckdb let tests read Parquet files back with two other
# implementations; both must import, or installing fails.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
VENV=${S3_VENV:-$HOME/.cache/sluice-test/moto-5.2.5}
cmd=${1:-}
PACKAGES=('moto[server]==5.2.5' 'boto3==1.44.8' 'pyarrow==26.0.1' 'duckdb==2.0.1')

install() {
  venv_install "$VENV" moto_server 'import moto, boto3, pyarrow.parquet, duckdb' \
    "the S3 test venv $VENV does not import moto, boto3, pyarrow and duckdb" "${PACKAGES[@]}"
}

case "$cmd" in
  install)
    install
    echo "$VENV"
    ;;
  start)
    port=${2:?usage: $0 start PORT [LOG]}
    log=${3:-/tmp/moto-$port.log}
    install
    "$VENV/bin/moto_server" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$pid"; exit 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    echo "moto did not start on port $port; see $log" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
    ;;
  stop)
    pid=${2:?usage: $0 stop PID}
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    ;;
  *)
    echo "usage: $0 install | start PORT [LOG] | stop PID" >&2
    exit 2
    ;;
esac
