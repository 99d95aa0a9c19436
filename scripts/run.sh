#!/usr/bin/env bash
# Set up, build, install and run nexthop's main job on its built-in default
# dataset. Extra arguments go to `nexthop lab` (try --help). As root it builds
# a network-namespace topology; otherwise it runs the offline pcap variant.
# The `nexthop` command is installed into ~/.cargo/bin (cargo install, reusing
# this checkout's target/ build), so the README's `nexthop ...` examples work
# afterwards. DPDK is not installed: only the lpm crate's DPDK baseline needs
# it (scripts/test.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
user_path=$PATH
bash scripts/setup.sh --no-dpdk
export PATH="$HOME/.cargo/bin:$PATH"
cargo install --quiet --locked --force --path crates/cli --target-dir target
bin="$HOME/.cargo/bin/nexthop"
echo "run: installed $("$bin" --version) at $bin"
case ":$user_path:" in
    *":$HOME/.cargo/bin:"*) ;;
    *) echo "run: $HOME/.cargo/bin is not on your PATH; add it to use \`nexthop\`: export PATH=\"\$HOME/.cargo/bin:\$PATH\"" ;;
esac
exec "$bin" lab "$@"
