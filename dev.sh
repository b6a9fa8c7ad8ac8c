#!/usr/bin/env bash
# gpudiag's two entry points for a fresh machine; each sets itself up first.
#   ./dev.sh list [ARGS…]   set up .venv, then run `gpudiag list ARGS…`
#   ./dev.sh test [ARGS…]   set up .venv with test tools, then lint, type-check
#                           and run the whole test suite (pytest ARGS…)
# Set-up is idempotent: a second run reinstalls nothing unless pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${GPUDIAG_VENV:-.venv}"
PY="$VENV/bin/python"

setup() {
    local extras="$1"
    if [ ! -x "$PY" ]; then
        python3 -m venv "$VENV"
    fi
    # The CPU build of torch first: `pip install torch` (or our `torch>=` bound)
    # would otherwise pull a multi-GB CUDA build. On these machines 2.13.0 is a
    # local CPU wheel. A torch already present (a user's CUDA build) is kept.
    if ! "$PY" -c "import torch" >/dev/null 2>&1; then
        "$PY" -m pip install -q --disable-pip-version-check torch==2.13.0
    fi
    local stamp="$VENV/.gpudiag-setup-$extras-$(sha256sum pyproject.toml | cut -c1-16)"
    if [ ! -e "$stamp" ]; then
        "$PY" -m pip install -q --disable-pip-version-check -e ".[$extras]"
        rm -f "$VENV"/.gpudiag-setup-"$extras"-*
        touch "$stamp"
    fi
    # MPICH for tests/test_launchers_real.py, in its own directory: its mpiexec would
    # replace Open MPI's (a dev extra) in the venv's bin.
    if [ "$extras" = dev ] && [ ! -x "$VENV/launchers/mpich/bin/mpiexec" ]; then
        "$PY" -m pip install -q --disable-pip-version-check --target "$VENV/launchers/mpich" mpich
    fi
    # Slurm and munge for tests/test_fleet_slurm.py (an emulated two-node cluster, issue 19):
    # Debian's packages, where apt-get can be used as root; the tests skip, saying why,
    # where they cannot be installed.
    if [ "$extras" = dev ] && ! command -v slurmd >/dev/null 2>&1 \
        && ! [ -x /usr/sbin/slurmd ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            --no-install-recommends slurmd slurmctld slurm-client munge >/dev/null; } \
            || echo "dev.sh: could not install slurm-wlm; tests/test_fleet_slurm.py will skip" >&2
    fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
    list)
        setup test
        exec "$VENV/bin/gpudiag" list "$@"
        ;;
    test)
        setup dev
        "$VENV/bin/ruff" check gpudiag tests bench
        "$VENV/bin/ruff" format --check gpudiag tests bench
        "$VENV/bin/mypy" gpudiag
        exec "$PY" -m pytest -q "$@"
        ;;
    *)
        echo "usage: ./dev.sh list [gpudiag list options] | ./dev.sh test [pytest options]" >&2
        exit 2
        ;;
esac
