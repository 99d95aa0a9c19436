"""The benchmark example runs (small sizes; optional baselines may be absent)."""

import subprocess
import sys

from conftest import ROOT, data_file


def test_lpm_bench_runs(tmp_path):
    data_file("routeviews-20151101-ipv4.txt.gz")
    r = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "lpm_bench.py"),
         "--lookups", "20000", "--slow-lookups", "2000", "--out", str(tmp_path / "bench.png")],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "nexthop lookup_many (4096 batches)" in r.stdout
    assert "of the one-call batch rate" in r.stdout
