#!/usr/bin/env bash
# Set up and run nexthop's whole test suite (formatting, lints, all tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The NDN interop peers (python-ndn, NDNts) the wire tests compare against.
bash scripts/setup-interop.sh
# Real name lists for the NDN FIB tests.
bash scripts/setup-data.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "== docs/architecture.md's crate graph against cargo metadata"
bash scripts/check-architecture.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
# nexthop-lpm's optional DPDK baseline (libdpdk-dev, installed by setup.sh).
cargo clippy -p nexthop-lpm --all-targets --release --features dpdk -- -D warnings
echo "== cargo doc (broken intra-doc links and doc-comment HTML fail)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
echo "== cargo test"
cargo test --workspace --release
# The release tests above compile every debug_assert! out, including those
# that guard unchecked indexing, and wrap on overflow. So the tests of the
# crates with unsafe code run once more, optimised but with debug
# assertions and overflow checks on (a profile of their own, "checked",
# in target/checked): the unit tests, Othello's integration tests and the
# lpm differential tests against the trie on random tables, where the
# unchecked batch paths run (the real-table ones, a few minutes, stay
# release-only).
echo "== cargo test, debug assertions and overflow checks on (crates with unsafe code)"
checked() {
    CARGO_PROFILE_CHECKED_INHERITS=release \
        CARGO_PROFILE_CHECKED_DEBUG_ASSERTIONS=true \
        CARGO_PROFILE_CHECKED_OVERFLOW_CHECKS=true \
        cargo test --profile checked "$@"
}
checked -p nexthop-mem -p nexthop-hash -p nexthop-othello -p nexthop-lpm -p nexthop-ndn -p nexthop-ndnd \
    -p nexthop-dataplane -p nexthop-testutil --lib
checked -p nexthop-othello --test '*'
checked -p nexthop-lpm --test differential -- --skip real_ --skip linx_ --skip ipv6_random_ \
    --skip ipv6_dense_slot_ --skip agree_across_hash --skip prop_ipv6
echo "== cargo test (nexthop-lpm with DPDK rte_lpm/rte_lpm6 against the trie oracle)"
cargo test -p nexthop-lpm --release --features dpdk --lib dpdk::
cargo test -p nexthop-lpm --release --features dpdk --test dpdk
echo "== python package (maturin wheel, pytest in a clean virtual environment)"
# target/py-venv holds maturin; target/py-test-venv holds only numpy, pytest
# and python-ndn 0.5.2, and gets the freshly built wheel reinstalled on every run.
cargo build --release -p nexthop-cli
PY_BUILD_VENV="$PWD/target/py-venv"
PY_TEST_VENV="$PWD/target/py-test-venv"
if ! "$PY_BUILD_VENV/bin/maturin" --version >/dev/null 2>&1; then
    rm -rf "$PY_BUILD_VENV"
    python3 -m venv "$PY_BUILD_VENV"
    "$PY_BUILD_VENV/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2"
fi
if ! "$PY_TEST_VENV/bin/python" -c 'import numpy, pytest, ndn' >/dev/null 2>&1; then
    rm -rf "$PY_TEST_VENV"
    python3 -m venv "$PY_TEST_VENV"
    "$PY_TEST_VENV/bin/pip" install --quiet --disable-pip-version-check numpy pytest "python-ndn==0.5.2"
fi
# The package's crate is outside the workspace: its own clippy run.
(cd python && CARGO_TARGET_DIR="$PWD/../target" cargo clippy --all-targets --release -- -D warnings)
rm -rf target/wheels/nexthop-*.whl
(cd python && CARGO_TARGET_DIR="$PWD/../target" "$PY_BUILD_VENV/bin/maturin" build --release \
    -i "$PY_TEST_VENV/bin/python" -o ../target/wheels)
"$PY_TEST_VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps target/wheels/nexthop-*.whl
# From the root, so that python/nexthop (the sources, without the compiled
# module) does not shadow the installed package.
"$PY_TEST_VENV/bin/python" -m pytest -q python/tests
# The CLI tests that drive a Python app through the package (skipped in the
# cargo test run above when no wheel was installed yet); here they must run.
NEXTHOP_TEST_PYTHON="$PY_TEST_VENV/bin/python" cargo test --release -p nexthop-cli --test sdf_ovs seattle
echo "== reproduction report (scripts/repro.sh --quick into a temporary directory, checked)"
bash scripts/repro/test.sh
