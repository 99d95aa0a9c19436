#!/usr/bin/env bash
# Run the unit tests of the unsafe modules Miri can interpret (STYLE.md,
# "Unsafe is rare, fenced and proven"): nexthop-mem (HugeBox, two_stage,
# affinity), the Othello query (unchecked slot reads) and the data plane's
# frame-list buffers (framebuf). Tests that need what Miri cannot do
# (partial munmap, madvise, sockets, huge arrays) carry
# `#[cfg_attr(miri, ignore = "...")]`; under Miri, `HugeBox` takes its heap
# path. Installs the pinned nightly with miri and rust-src when missing.
# A few minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# The newest nightly whose miri was checked against these tests here.
toolchain="${MIRI_TOOLCHAIN:-nightly-2026-05-20}"
if ! cargo "+$toolchain" miri --version >/dev/null 2>&1; then
    echo "miri: installing $toolchain with miri and rust-src"
    rustup toolchain install "$toolchain" --profile minimal --component miri,rust-src
fi
cargo "+$toolchain" miri setup
run() {
    echo "== miri: $*"
    local s
    s=$(date +%s)
    cargo "+$toolchain" miri test "$@"
    echo "   ($(($(date +%s) - s)) s)"
}
run -p nexthop-mem --lib
run -p nexthop-othello --lib query::
run -p nexthop-dataplane --lib framebuf::
