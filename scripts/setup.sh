#!/usr/bin/env bash
# Install what nexthop needs to build and test on a Debian machine.
# Idempotent: skips what is already there. Run as root or with sudo available.
# `--no-dpdk` leaves out libdpdk-dev (about 220 packages), which only the lpm
# crate's DPDK baseline (`--features dpdk`: its bench and tests) needs;
# scripts/run.sh passes it, scripts/test.sh and CI do not.
set -euo pipefail

dpdk=1
for a in "$@"; do
    case $a in
        --no-dpdk) dpdk=0 ;;
        *) echo "setup: unknown option $a (known: --no-dpdk)" >&2; exit 2 ;;
    esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
APT="$SUDO apt-get -o DPkg::Lock::Timeout=600"

need_pkgs=()
# libdpdk-dev (DPDK 22.11): rte_lpm/rte_lpm6 for nexthop-lpm's `dpdk` feature.
# libxdp-dev, libbpf-dev (libxdp 1.3, libbpf 1.1): AF_XDP ports, nexthop-cli's
# default `afxdp` feature.
# redis-server (Redis 7): the Redis bus tests and nexthop-repo's / `nexthop ndn
# repo`'s tests start their own servers (the system service is not used).
# openvswitch-switch (OVS 3.1): `nexthop sdf run --backend ovs` and its tests,
# which start their own ovsdb-server/ovs-vswitchd (userspace datapath).
pkgs=(build-essential pkg-config ca-certificates curl iproute2 procps jq libxdp-dev libbpf-dev redis-server openvswitch-switch)
if [ "$dpdk" = 1 ]; then pkgs+=(libdpdk-dev); fi
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    echo "setup: installing ${need_pkgs[*]}"
    $APT update -qq
    DEBIAN_FRONTEND=noninteractive $APT install -y -qq "${need_pkgs[@]}"
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: installing the Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy,rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
fi
for c in clippy rustfmt; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$c"; then
        rustup component add "$c" 2>/dev/null || echo "setup: could not add $c (continuing)"
    fi
done
echo "setup: $(cargo --version)"
