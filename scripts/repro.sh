#!/usr/bin/env bash
# The reproduction report: builds the release binaries it needs, runs the
# seed papers' experiments and writes docs/reproduction.md (or DIR/).
#   scripts/repro.sh [--quick] [--only NAME[,NAME]] [--out DIR]
# Sets up a virtual environment with matplotlib (from PyPI) in
# target/repro-venv on the first run.
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
