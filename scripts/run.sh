#!/usr/bin/env bash
# Set up, build, and run nexthop's main job on its built-in default dataset.
# Extra arguments go to `nexthop lab` (try --help). As root it builds a
# network-namespace topology; otherwise it runs the offline pcap variant.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -p nexthop-cli
exec ./target/release/nexthop lab "$@"
