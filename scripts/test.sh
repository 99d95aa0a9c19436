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
echo "== cargo test (nexthop-lpm with DPDK rte_lpm/rte_lpm6 against the trie oracle)"
cargo test -p nexthop-lpm --release --features dpdk --lib dpdk::
cargo test -p nexthop-lpm --release --features dpdk --test dpdk
