"""Lookups per second of nexthop.Lpm against pytricia and pyasn, and against
the Rust batch rate, on the real RouteViews IPv4 table; draws a plot.

    python python/examples/lpm_bench.py [--lookups N] [--out lpm_bench.png]

The Rust batch rate is measured in the same process on the same table and
addresses: `Lpm._native_batch_rate` (a benchmark hook) runs the Rust
`lookup_batch` call that `lookup_many` makes, on the same 4096-address
batches, timed in Rust with the GIL released. Rounds alternate Python and
Rust; the ratio printed is the median over rounds of the ratio within a
round (target >= 0.8). Single `lookup` calls are reported in ns per call
beside `dict.get` on the same address texts.
pytricia and pyasn are optional (`pip install pytricia pyasn`); a missing
one is reported and skipped.
"""

import argparse
import gzip
import ipaddress
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import nexthop

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT.parent / "shared" / "data" / "routeviews-20151101-ipv4.txt.gz"


def load_routes(path):
    routes = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                p, asn = line.split()
                routes.append((p, int(asn)))
    return routes


def rate(fn, n, repeat=3):
    """Best lookups per second of `fn()` doing `n` lookups."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n / best


def alternate(py_pass, native_rate, n, rounds=7):
    """Median Python rate, median Rust rate and median per-round ratio."""
    py, native, ratio = [], [], []
    for _ in range(rounds):
        t = time.perf_counter()
        py_pass()
        p = n / (time.perf_counter() - t)
        r = native_rate()
        py.append(p)
        native.append(r)
        ratio.append(p / r)
    med = statistics.median
    return med(py), med(native), med(ratio)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lookups", type=int, default=1_000_000, help="addresses per run")
    ap.add_argument("--slow-lookups", type=int, default=200_000, help="addresses for the per-call libraries")
    ap.add_argument("--out", default="lpm_bench.png", help="plot file")
    args = ap.parse_args()
    if not TABLE.exists():
        sys.exit(f"{TABLE} is missing (see ../shared/DATA.md)")

    routes = load_routes(TABLE)
    rng = random.Random(1)
    nets = [ipaddress.IPv4Network(p) for p, _ in rng.sample(routes, 100_000)]
    addrs = np.array(
        [int(n.network_address) + rng.randrange(n.num_addresses) for n in rng.choices(nets, k=args.lookups)],
        dtype=np.uint32,
    )
    texts = [str(ipaddress.IPv4Address(int(a))) for a in addrs[: args.slow_lookups]]

    lpm = nexthop.Lpm.from_file(TABLE, asn=True)
    results = {}
    one_call = f"nexthop lookup_many (one call, {len(addrs):,})"
    results[one_call] = rate(lambda: lpm.lookup_many(addrs), len(addrs))
    batches = [addrs[i : i + 4096] for i in range(0, len(addrs), 4096)]
    results["nexthop lookup_many (4096 batches)"] = rate(lambda: [lpm.lookup_many(b) for b in batches], len(addrs))
    results["nexthop lookup (per call)"] = rate(lambda: [lpm.lookup(t) for t in texts], len(texts))
    d = {t: 1 for t in texts}
    results["dict.get (per call, reference)"] = rate(lambda: [d.get(t) for t in texts], len(texts))
    py_rate, rust_rate, ratio = alternate(
        lambda: [lpm.lookup_many(b) for b in batches], lambda: lpm._native_batch_rate(addrs, 1, 4096), len(addrs)
    )
    results["Rust lookup_batch (4096 batches, same run)"] = rust_rate

    try:
        import pytricia

        pt = pytricia.PyTricia(32)
        for p, asn in routes:
            pt[p] = asn
        results["pytricia (per call)"] = rate(lambda: [pt.get(t) for t in texts], len(texts))
    except ImportError:
        print("pytricia is not installed: skipped", file=sys.stderr)
    try:
        import pyasn

        dat = Path(args.out).with_suffix(".pyasn.dat")
        with open(dat, "w") as f:
            f.write("; pyasn IPASN file written by lpm_bench.py\n")
            for p, asn in routes:
                f.write(f"{p}\t{asn}\n")
        asndb = pyasn.pyasn(str(dat))
        results["pyasn (per call)"] = rate(lambda: [asndb.lookup(t) for t in texts], len(texts))
    except ImportError:
        print("pyasn is not installed: skipped", file=sys.stderr)

    base = results["nexthop lookup_many (4096 batches)"]
    for k, v in results.items():
        below = f"  ({base / v:6.1f}x below 4096 batches)" if v < base else ""
        print(f"{k:45s} {v / 1e6:8.2f} M lookups/s{below}")
    print(f"4096-address batches reach {base / results[one_call]:.2f} of the one-call batch rate")
    print(
        f"lookup_many / Rust batch rate (median of per-round ratios, 4096 batches): {ratio:.2f} "
        f"({py_rate / 1e6:.2f} vs {rust_rate / 1e6:.2f} M lookups/s; target >= 0.8)"
    )
    per_call = 1e9 / results["nexthop lookup (per call)"]
    dict_call = 1e9 / results["dict.get (per call, reference)"]
    print(f"single lookup: {per_call:.0f} ns per call, dict.get {dict_call:.0f} ns per call")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    names = list(results)
    ax.barh(names, [results[n] / 1e6 for n in names])
    ax.set_xscale("log")
    ax.set_xlabel("million lookups per second (log)")
    ax.set_title(f"IPv4 LPM, RouteViews 2015-11-01 ({len(routes):,} prefixes)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
