#!/usr/bin/env bash
# The reproduction report: builds the release binaries it needs, runs the
# seed papers' experiments and writes docs/reproduction.md (or DIR/).
#   scripts/repro.sh [--quick] [--only NAME[,NAME]] [--out DIR]
# Sets up a virtual environment with matplotlib (from PyPI) in
# target/repro-venv on the first run. Where pkg-config finds libdpdk
# (libdpdk-dev), the lpm bench is built with `--features dpdk` and DPDK's
# rte_lpm / rte_lpm6 join the MIHT / DIR-24-8 comparison; otherwise, or
# with NEXTHOP_REPRO_DPDK=off, that section says "skipped: no DPDK" and why.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
venv=target/repro-venv
if ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    echo "repro: setting up $venv (matplotlib)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet matplotlib
fi
exec "$venv/bin/python" scripts/repro/repro.py "$@"
