"""Lookups per second of nexthop.Lpm against pytricia and pyasn, and against
the Rust batch rate, on the real RouteViews IPv4 table; draws a plot.

    python python/examples/lpm_bench.py [--lookups N] [--out lpm_bench.png]

The Rust rate is `nexthop lpm`'s own batch path measured from Rust
(`cargo bench -p nexthop-lpm`); here it is approximated by the same
`lookup_many` call on all the addresses at once (1 M by default), where
the Python overhead per address is negligible, and reported beside the
4096-address batches.
pytricia and pyasn are optional (`pip install pytricia pyasn`); a missing
one is reported and skipped.
"""

import argparse
import gzip
import ipaddress
import random
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
