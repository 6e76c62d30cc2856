#!/usr/bin/env bash
# Python tools the tests check the worker with (no server of their own):
#   tools.sh install   create the venv (once): prometheus-client, Prometheus' own parser of
#                      its text format, which reads the worker's /metrics page
#   tools.sh python    print the venv's interpreter
# The venv lives in ${TOOLS_VENV:-$HOME/.cache/sluice-test/tools-venv}; installing is skipped
# when it holds exactly the pinned packages.
set -euo pipefail
VENV=${TOOLS_VENV:-$HOME/.cache/sluice-test/tools-venv}
PACKAGES=('prometheus-client==0.26.0')

install() {
  if [[ -x "$VENV/bin/python" && "$(cat "$VENV/.complete" 2>/dev/null)" == "${PACKAGES[*]}" ]]; then return 0; fi
  mkdir -p "$(dirname "$VENV")"
  # Parallel tests install once.
  exec 9>"$VENV.lock"
  flock 9
  if [[ -x "$VENV/bin/python" && "$(cat "$VENV/.complete" 2>/dev/null)" == "${PACKAGES[*]}" ]]; then return 0; fi
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PACKAGES[@]}" >&2
  "$VENV/bin/python" -I -c 'import prometheus_client.parser' \
    || { echo "the tools venv $VENV does not import prometheus_client" >&2; exit 1; }
  echo "${PACKAGES[*]}" >"$VENV/.complete"
}

case "${1:-}" in
  install) install ;;
  python)
    install
    echo "$VENV/bin/python"
    ;;
  *) echo "usage: tools.sh install|python" >&2; exit 2 ;;
esac
