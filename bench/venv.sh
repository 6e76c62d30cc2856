#!/usr/bin/env bash
# Python packages the benchmark scripts draw with (no test needs them):
#   bench/venv.sh install   create the venv (once): matplotlib, for bench/soak.py --plot
#   bench/venv.sh python    print the venv's interpreter
# The venv lives in ${BENCH_VENV:-$HOME/.cache/sluice-test/bench-venv}; installing is skipped
# when it holds exactly the pinned packages (tests/services/venv.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../tests/services/venv.sh"
VENV=${BENCH_VENV:-$HOME/.cache/sluice-test/bench-venv}
PACKAGES=('matplotlib==3.10.8')

install() {
  venv_install "$VENV" python 'import matplotlib.pyplot' \
    "the bench venv $VENV does not import matplotlib" "${PACKAGES[@]}"
}

case "${1:-}" in
  install) install ;;
  python)
    install
    echo "$VENV/bin/python"
    ;;
  *) echo "usage: bench/venv.sh install|python" >&2; exit 2 ;;
esac
