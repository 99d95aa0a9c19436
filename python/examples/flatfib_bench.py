"""Lookups per second of nexthop.FlatFib from Python against the Rust batch
rate of the same FIB in the same run, and single lookups against dict.get.

    python python/examples/flatfib_bench.py [--names N] [--lookups N] [--out flatfib_bench.png]

A Concise FIB of key type u64 (`--names` random 64-bit names, 8 value bits,
actions among 16 ports) is built in Rust; `lookup_many_raw` reads a numpy
uint64 array of names in place in batches of 4096 and returns action ids.
`FlatFib._native_batch_rate` (a benchmark hook) runs the same Rust
`Query::lookup_batch` call on the same batches of the same keys, timed in
Rust with the GIL released. Rounds alternate Python and Rust; the ratio is
the median over rounds of the ratio within a round (target >= 0.8). Single
`lookup(name)` calls are compared with `dict.get` on the same name texts.
Draws a bar plot when matplotlib is installed.
"""

import argparse
import random
import statistics
import sys
import time

import numpy as np

import nexthop


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--names", type=int, default=1_000_000, help="names in the FIB")
    ap.add_argument("--lookups", type=int, default=1_000_000, help="names looked up per round")
    ap.add_argument("--slow-lookups", type=int, default=200_000, help="names for the per-call loops")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    ap.add_argument("--out", default="flatfib_bench.png", help="plot file")
    args = ap.parse_args()

    rng = random.Random(1)
    names = list({rng.getrandbits(64) for _ in range(args.names)})
    fib = nexthop.FlatFib.build([(str(k), str(1 + k % 16)) for k in names], "u64", seed=1)
    keys = np.array([names[rng.randrange(len(names))] for _ in range(args.lookups)], dtype=np.uint64)
    batches = [keys[i : i + 4096] for i in range(0, len(keys), 4096)]
    texts = [str(int(k)) for k in keys[: args.slow_lookups]]
    d = {t: str(1 + int(t) % 16) for t in texts}

    # Same answers from both paths before timing them.
    ids = fib.lookup_many_raw(keys[:4096])
    acts = fib.actions()
    assert [acts[i] for i in ids[:100]] == [d.get(t, fib.lookup(t)) for t in [str(int(k)) for k in keys[:100]]]

    py, native, ratio = [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        for b in batches:
            fib.lookup_many_raw(b)
        p = len(keys) / (time.perf_counter() - t)
        r = fib._native_batch_rate(keys, 1, 4096)
        py.append(p)
        native.append(r)
        ratio.append(p / r)
    med = statistics.median

    def per_call(fn):
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
        return best / len(texts) * 1e9

    ns_lookup = per_call(lambda: [fib.lookup(t) for t in texts])
    ns_dict = per_call(lambda: [d.get(t) for t in texts])

    print(f"FlatFib u64, {len(names):,} names, {len(keys):,} lookups per round, {args.rounds} rounds (medians)")
    print(f"{'lookup_many_raw (4096 batches)':40s} {med(py) / 1e6:8.2f} M lookups/s")
    print(f"{'Rust lookup_batch (4096 batches)':40s} {med(native) / 1e6:8.2f} M lookups/s")
    print(f"lookup_many_raw / Rust batch rate: {med(ratio):.2f} (target >= 0.8)")
    print(f"single lookup: {ns_lookup:.0f} ns per call, dict.get {ns_dict:.0f} ns per call")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 3))
    labels = ["lookup_many_raw", "Rust lookup_batch", "lookup (per call)", "dict.get (per call)"]
    values = [med(py) / 1e6, med(native) / 1e6, 1e3 / ns_lookup, 1e3 / ns_dict]
    ax.barh(labels, values)
    ax.set_xscale("log")
    ax.set_xlabel("million lookups per second (log)")
    ax.set_title(f"FlatFib u64, {len(names):,} names")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
