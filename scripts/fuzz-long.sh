#!/usr/bin/env bash
# Long fuzzing runs (not in CI): scripts/fuzz-long.sh TARGET|all SECONDS
# Runs one cargo-fuzz target, or every target in turn, for SECONDS each from
# its seed corpus, with libFuzzer's memory limit at 2 GiB (-rss_limit_mb=2048,
# -malloc_limit_mb=2048): an input that makes a loader allocate beyond that is
# reported as a crash. Findings land in fuzz/artifacts/TARGET/; record the
# time run and what was found in docs/fuzzing.md.
# Needs a nightly toolchain and cargo-fuzz; installs them as fuzz-smoke.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
    echo "usage: $0 TARGET|all SECONDS" >&2
    exit 2
fi
which_target="$1"
secs="$2"
case "$secs" in
    '' | *[!0-9]*) echo "fuzz-long: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;;
esac
export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz-long: installing a nightly toolchain for cargo-fuzz"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-long: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
all=$(cargo +nightly fuzz list --fuzz-dir fuzz)
if [ "$which_target" = all ]; then
    targets="$all"
elif printf '%s\n' $all | grep -qx -- "$which_target"; then
    targets="$which_target"
else
    echo "fuzz-long: no target '$which_target'; targets: $(echo $all)" >&2
    exit 2
fi
for t in $targets; do
    corpus="fuzz/corpus/$t"
    mkdir -p "$corpus"
    cp -n fuzz/seeds/"$t"/* "$corpus"/ 2>/dev/null || true
    start=$(date -u +%FT%TZ)
    echo "== fuzz $t for ${secs}s from $start"
    cargo +nightly fuzz run --release --fuzz-dir fuzz "$t" "$corpus" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=2048 2>&1 | tail -n 5
    echo "== $t done at $(date -u +%FT%TZ); corpus $(ls "$corpus" | wc -l) inputs"
done
