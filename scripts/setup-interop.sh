#!/usr/bin/env bash
# Install the NDN interoperability peers that crates/wire's ndn_interop tests
# run against: python-ndn 0.5.2 (PyPI, into a venv under target/interop-venv)
# with ndn-python-repo 0.3 beside it (its clients drive crates/cli's ndn_repo
# tests), and NDNts @ndn/{packet,tlv,lp} 0.0.20250307 (npm, into
# crates/wire/tests/interop/node_modules), with @ndn/{node-transport,endpoint,
# fw,nfdmgmt,keychain} for crates/cli's ndn_ndnts tests (NDNts peers of
# `nexthop ndn run`). Idempotent: skips what is there.
# Run as root or with sudo available.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/target/interop-venv"
NODE_DIR="$ROOT/crates/wire/tests/interop"
PY_NDN_VERSION="0.5.2"
PY_REPO_VERSION="0.3"
NDNTS_VERSION="0.0.20250307"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
APT="$SUDO apt-get -o DPkg::Lock::Timeout=600"

need_pkgs=()
command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_pkgs+=(python3-venv)
command -v node >/dev/null 2>&1 || need_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || need_pkgs+=(npm)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    echo "setup-interop: installing ${need_pkgs[*]}"
    $APT update -qq
    DEBIAN_FRONTEND=noninteractive $APT install -y -qq "${need_pkgs[@]}"
fi

if ! "$VENV/bin/python" -c "import ndn, importlib.metadata as m; assert m.version('python-ndn') == '$PY_NDN_VERSION'" >/dev/null 2>&1; then
    echo "setup-interop: installing python-ndn $PY_NDN_VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "python-ndn==$PY_NDN_VERSION"
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m; assert m.version('ndn-python-repo') == '$PY_REPO_VERSION'" >/dev/null 2>&1; then
    echo "setup-interop: installing ndn-python-repo $PY_REPO_VERSION into $VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "python-ndn==$PY_NDN_VERSION" "ndn-python-repo==$PY_REPO_VERSION"
fi

ndnts_ok() {
    for p in packet tlv lp node-transport endpoint fw nfdmgmt keychain; do
        local f="$NODE_DIR/node_modules/@ndn/$p/package.json"
        [ -f "$f" ] || return 1
        grep -q "\"version\": \"$NDNTS_VERSION\"" "$f" || return 1
    done
}
if ! ndnts_ok; then
    echo "setup-interop: installing NDNts @ndn/{packet,tlv,lp,node-transport,endpoint,fw,nfdmgmt,keychain} $NDNTS_VERSION into $NODE_DIR"
    # package.json pins the @ndn packages; package-lock.json pins the rest.
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup-interop: python-ndn $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("python-ndn"))'), ndn-python-repo $PY_REPO_VERSION, NDNts $NDNTS_VERSION, node $(node --version)"
