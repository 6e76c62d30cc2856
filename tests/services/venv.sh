# A venv of pinned Python packages for a test service, installed once. Sourced by the
# scripts that install one (s3.sh, tools.sh):
#
#   venv_install VENV READY IMPORT FAILURE PACKAGE...
#
# Creates VENV (python3 -m venv) when it has no interpreter, pip-installs the PACKAGEs into
# it, checks that `VENV/bin/python -I -c IMPORT` runs (else prints FAILURE and exits 1) and
# then writes the package list to VENV/.complete. Installing is skipped when VENV/bin/READY
# is executable and VENV/.complete holds exactly the PACKAGEs. Tests start services in
# parallel: the first caller installs under the lock VENV.lock, the others wait for it and
# then find the venv complete.

# venv_complete VENV READY PACKAGES: the venv holds exactly PACKAGES (joined with spaces).
venv_complete() {
  [[ -x "$1/bin/$2" && "$(cat "$1/.complete" 2>/dev/null)" == "$3" ]]
}

venv_install() {
  local venv=$1 ready=$2 import=$3 failure=$4
  shift 4
  local packages="$*"
  if venv_complete "$venv" "$ready" "$packages"; then return 0; fi
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9
  if ! venv_complete "$venv" "$ready" "$packages"; then
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2
    "$venv/bin/python" -I -c "$import" || { echo "$failure" >&2; exit 1; }
    echo "$packages" >"$venv/.complete"
  fi
  # Closed, so that a server started next (s3.sh start) does not hold the lock.
  exec 9>&-
}
