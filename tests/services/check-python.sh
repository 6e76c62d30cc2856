#!/usr/bin/env bash
# Checks that every Python module the tests use comes from the project's own venvs:
#   - lists the modules imported by the Python the tests run (snippets embedded in the Rust
#     tests, the .py files under tests/services/), leaving out the standard library;
#   - imports each one with `python -I` (no user site, no PYTHONPATH) from the venvs that
#     kafka.sh, s3.sh and tools.sh install, and fails naming any module none of them has;
#   - fails when a test starts a bare `python`/`python3` instead of a venv interpreter.
# setup.sh runs it after installing; run it alone after changing a test's Python.
set -euo pipefail
cd "$(dirname "$0")/../.."
KAFKA_VENV=${KAFKA_VENV:-$HOME/.cache/sluice-test/kafka-venv}
S3_VENV=${S3_VENV:-$HOME/.cache/sluice-test/moto-5.2.5}
TOOLS_VENV=${TOOLS_VENV:-$HOME/.cache/sluice-test/tools-venv}
venvs=("$KAFKA_VENV" "$S3_VENV" "$TOOLS_VENV")
for v in "${venvs[@]}"; do
  [[ -x "$v/bin/python" ]] || { echo "check-python: no venv at $v (run tests/services/setup.sh)" >&2; exit 1; }
done

mapfile -t sources < <(find tests crates -path '*/target' -prune -o \( -path 'tests/*' -o -path 'crates/*/tests/*' \) \( -name '*.rs' -o -name '*.py' \) -print | grep -v '^tests/golden/' | sort)

bad=$(grep -nE 'Command::new\("(python|python3)"\)' "${sources[@]}" || true)
if [[ -n "$bad" ]]; then
  echo "check-python: tests must run a venv interpreter, not the system one:" >&2
  echo "$bad" >&2
  exit 1
fi

# Top-level module names from `import a, b.c` and `from a.b import c` lines (indented or not,
# inside Rust string literals too), minus the standard library of the venvs' interpreter.
mapfile -t modules < <("$KAFKA_VENV/bin/python" -I - "${sources[@]}" <<'PY'
import re, sys
found = set()
line = re.compile(r'(?:^|")\s*(?:import\s+([\w., ]+?)\s*(?:$|;|"|\\)|from\s+([\w.]+)\s+import\s)')
for path in sys.argv[1:]:
    for text in open(path, encoding='utf-8', errors='replace').read().replace('\\n', '\n').splitlines():
        m = line.search(text.split('#')[0])
        if not m:
            continue
        names = m.group(1).split(',') if m.group(1) else [m.group(2)]
        for n in names:
            n = n.strip().split(' as ')[0].split('.')[0]
            if n and n.isidentifier() and n not in sys.stdlib_module_names and n != '__future__':
                found.add(n)
for n in sorted(found):
    print(n)
PY
)

missing=()
for m in "${modules[@]}"; do
  ok=""
  for v in "${venvs[@]}"; do
    if "$v/bin/python" -I -c "import $m" 2>/dev/null; then ok=$v; break; fi
  done
  if [[ -z "$ok" ]]; then missing+=("$m"); else echo "check-python: $m from $ok"; fi
done
if ((${#missing[@]})); then
  echo "check-python: modules the tests import that no project venv installs: ${missing[*]}" >&2
  exit 1
fi
