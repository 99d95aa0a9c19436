"""Shared fixtures: the `nexthop` binary, the real data and plain-Python oracles."""

import gzip
import ipaddress
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


def data_file(name: str) -> Path:
    """A file of ../shared/data (see DATA.md); fails naming it when absent."""
    p = DATA / name
    if not p.exists():
        pytest.fail(f"test data {p} is missing (see ../shared/DATA.md)")
    return p


@pytest.fixture(scope="session")
def cli():
    """Run the workspace's `nexthop` binary (NEXTHOP_BIN or target/release/nexthop)."""
    exe = Path(os.environ.get("NEXTHOP_BIN", ROOT / "target" / "release" / "nexthop"))
    if not exe.exists():
        pytest.fail(f"{exe} is missing: run `cargo build --release -p nexthop-cli` first")

    def run(*args, stdin=None):
        r = subprocess.run(
            [str(exe), *map(str, args)], input=stdin, capture_output=True, text=True
        )
        if r.returncode != 0:
            raise AssertionError(f"nexthop {' '.join(map(str, args))}: {r.stderr}")
        return r.stdout

    return run


class PrefixOracle:
    """Longest-prefix match by a dict per prefix length (the plain oracle)."""

    def __init__(self, routes=()):
        self.by_len = {4: {}, 6: {}}
        for p, nh in routes:
            self.announce(p, nh)

    def announce(self, prefix: str, nh: int) -> None:
        n = ipaddress.ip_network(prefix)
        self.by_len[n.version].setdefault(n.prefixlen, {})[int(n.network_address)] = nh

    def withdraw(self, prefix: str) -> bool:
        n = ipaddress.ip_network(prefix)
        d = self.by_len[n.version].get(n.prefixlen, {})
        return d.pop(int(n.network_address), None) is not None

    def lookup(self, addr) -> "int | None":
        a = ipaddress.ip_address(addr) if isinstance(addr, str) else addr
        width = 32 if a.version == 4 else 128
        v = int(a)
        for length in sorted(self.by_len[a.version], reverse=True):
            mask = ((1 << length) - 1) << (width - length) if length else 0
            nh = self.by_len[a.version][length].get(v & mask)
            if nh is not None:
                return nh
        return None


def read_asn_routes(path: Path):
    """(prefix, asn % 250 + 1) pairs of a RouteViews `prefix/len<TAB>asn` file."""
    out = []
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            p, asn = line.split()
            out.append((p, int(asn) % 250 + 1))
    return out
