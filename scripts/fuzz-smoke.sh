#!/usr/bin/env bash
# Run every cargo-fuzz target for N seconds (default 20) from its seed corpus.
# Needs a nightly toolchain and cargo-fuzz; installs cargo-fuzz if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing a nightly toolchain for cargo-fuzz"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
for t in $(cargo +nightly fuzz list --fuzz-dir fuzz); do
    corpus="fuzz/corpus/$t"
    mkdir -p "$corpus"
    cp -n fuzz/seeds/"$t"/* "$corpus"/ 2>/dev/null || true
    echo "== fuzz $t for ${secs}s"
    cargo +nightly fuzz run --fuzz-dir fuzz "$t" "$corpus" -- -max_total_time="$secs" -rss_limit_mb=4096 2>&1 | tail -n 3
    # A crash makes cargo fuzz exit non-zero; pipefail carries it out.
done
