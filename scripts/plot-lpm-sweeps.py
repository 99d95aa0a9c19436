#!/usr/bin/env python3
"""Plot the Bloomfwd paper's Fig. 1 and Fig. 7 sweeps from the LPM bench.

The full bench run (`cargo bench -p nexthop-lpm --bench lpm`, not
`--lookups`) writes every figure to `$TMPDIR/nexthop-lpm-bench.json`; this
script turns its `fig1` and `dpcpe` sections into two SVG plots:

    python3 scripts/plot-lpm-sweeps.py [JSON] [OUT_DIR]

JSON defaults to `${TMPDIR:-/tmp}/nexthop-lpm-bench.json`, OUT_DIR to
`docs/img`. Needs matplotlib (`pip install matplotlib`); the plots are
committed, so readers and CI never need it.

- `lpm-fig1.svg`: IPv4 batched lookup rate against the filters'
  false-positive target, one line per (filter hash + table hash) choice
  and stream (uniform addresses solid, addresses inside table prefixes
  dashed),
  and beside it the measured false-positive rate of the /25../32 group
  against the target (the diagonal is "as designed").
- `lpm-fig7.svg`: DPCPE on the IPv6 table: estimated and actual prefixes
  after expansion (log scale) and batched lookup rate, per number of
  expansion levels.
"""

import json
import os
import sys


def fail(msg):
    print(f"plot-lpm-sweeps: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"{path} is not JSON: {e}")
    for key in ("fig1", "dpcpe"):
        if not report.get(key):
            fail(f"{path} has no '{key}' section: run the full bench, not --lookups or --smoke")
    return report


def fig1(plt, rows, out):
    hashes = []
    for r in rows:
        if r["hash"] not in hashes:
            hashes.append(r["hash"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for n, h in enumerate(hashes):
        pts = sorted((r["fpr_target"], r) for r in rows if r["hash"] == h)
        xs = [p[0] for p in pts]
        color = f"C{n}"
        ax1.plot(xs, [p[1]["mlps"] for p in pts], marker="o", color=color, label=f"{h}, uniform")
        if all("inside_mlps" in p[1] for p in pts):
            ax1.plot(xs, [p[1]["inside_mlps"] for p in pts], marker="s", linestyle="--",
                     color=color, label=f"{h}, inside prefixes")
        # measured_fpr holds one rate per group; the last is /25../32.
        ax2.plot(xs, [p[1]["measured_fpr"][-1] for p in pts], marker="o", color=color, label=h)
    lim = [0, max(r["fpr_target"] for r in rows) * 1.05]
    ax2.plot(lim, lim, color="grey", linestyle=":", label="target")
    label(ax1, "filter false-positive target", "IPv4 batched lookups (M/s)",
          "Fig. 1: lookup rate vs false-positive target",
          legend={"title": "filter + table hash, stream", "fontsize": 7})
    label(ax2, "filter false-positive target", "measured false-positive rate (/25../32 group)",
          "Filters as sized vs measured")
    save(plt, fig, out)


def label(ax, xlabel, ylabel, title, legend=None, grid_which="major"):
    """Axis labels, title, a light grid and the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3, which=grid_which)
    ax.legend(**(legend or {"fontsize": 8}))


def save(plt, fig, out):
    """Write the figure without a date, so reruns on the same data match."""
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    plt.close(fig)


def fig7(plt, rows, out):
    rows = sorted(rows, key=lambda r: r["levels"])
    xs = [r["levels"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot(xs, [r["estimated"] for r in rows], marker="o", label="estimated (DPCPE)")
    ax1.plot(xs, [r["actual"] for r in rows], marker="s", label="actual after capture")
    ax1.set_yscale("log")
    label(ax1, "expansion levels", "IPv6 prefixes after expansion",
          "Fig. 7 / Table 4: prefixes after DPCPE", grid_which="both")
    ax2.plot(xs, [r["uniform_mlps"] for r in rows], marker="o", label="uniform addresses")
    ax2.plot(xs, [r["inside_mlps"] for r in rows], marker="s", label="inside table prefixes")
    label(ax2, "expansion levels", "IPv6 batched lookups (M/s)", "Lookup rate vs expansion levels")
    save(plt, fig, out)


def main():
    tmp = os.environ.get("TMPDIR", "/tmp")
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tmp, "nexthop-lpm-bench.json")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "docs/img"
    report = load(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("needs matplotlib: pip install matplotlib")
    # Reproducible SVGs: fixed ids, no date (savefig's metadata), text as text.
    plt.rcParams["svg.hashsalt"] = "nexthop"
    plt.rcParams["svg.fonttype"] = "none"
    os.makedirs(out_dir, exist_ok=True)
    for name, draw, key in (("lpm-fig1.svg", fig1, "fig1"), ("lpm-fig7.svg", fig7, "dpcpe")):
        out = os.path.join(out_dir, name)
        draw(plt, report[key], out)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
