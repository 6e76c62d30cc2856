#!/usr/bin/env bash
# Python tools the tests check the worker with (no server of their own):
#   tools.sh install   create the venv (once): prometheus-client, Prometheus' own parser of
#                      its text format, which reads the worker's /metrics page; schemathesis,
#                      which checks the REST API against docs/openapi.yaml
#   tools.sh python    print the venv's interpreter
# The venv lives in ${TOOLS_VENV:-$HOME/.cache/sluice-test/tools-venv}; installing is skipped
# when it holds exactly the pinned packages.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv.sh"
VENV=${TOOLS_VENV:-$HOME/.cache/sluice-test/tools-venv}
PACKAGES=('prometheus-client==0.26.0' 'schemathesis==4.32.5')

install() {
  venv_install "$VENV" python 'import prometheus_client.parser, schemathesis' \
    "the tools venv $VENV does not import prometheus_client and schemathesis" "${PACKAGES[@]}"
}

case "${1:-}" in
  install) install ;;
  python)
    install
    echo "$VENV/bin/python"
    ;;
  *) echo "usage: tools.sh install|python" >&2; exit 2 ;;
esac
