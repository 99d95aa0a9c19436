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
    assert "lookup_many / Rust batch rate" in r.stdout
    assert "ns per call, dict.get" in r.stdout


def test_flatfib_bench_runs(tmp_path):
    r = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "flatfib_bench.py"),
         "--names", "20000", "--lookups", "20000", "--slow-lookups", "2000", "--rounds", "2",
         "--out", str(tmp_path / "bench.png")],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "lookup_many_raw / Rust batch rate" in r.stdout
    assert "ns per call, dict.get" in r.stdout


def test_native_batch_rate_hooks():
    import numpy as np
    import pytest

    import nexthop

    lpm = nexthop.Lpm.from_routes([("10.0.0.0/8", 1)])
    addrs = np.arange(10_000, dtype=np.uint32)
    assert lpm._native_batch_rate(addrs, 2, 4096) > 0
    with pytest.raises(ValueError, match="positive"):
        lpm._native_batch_rate(addrs, 0)
    with pytest.raises(ValueError, match="positive"):
        lpm._native_batch_rate(np.zeros(0, dtype=np.uint32))
    with pytest.raises(TypeError):
        lpm._native_batch_rate(addrs.astype(np.uint64))
    fib = nexthop.FlatFib.build([(str(i), "1") for i in range(100)], "u64")
    assert fib._native_batch_rate(np.arange(1000, dtype=np.uint64), 1, 64) > 0
    mac = nexthop.FlatFib.build([("02:00:00:00:00:01", "1")], "mac")
    with pytest.raises(TypeError, match="u64"):
        mac._native_batch_rate(np.arange(10, dtype=np.uint64))


def test_sdf_miss_bench_runs():
    r = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "sdf_miss_bench.py"),
         "--hosts", "64", "--flows", "2000", "--rounds", "1"],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "python L2 app, in-process Switch:" in r.stdout
    assert "python / rust:" in r.stdout
    r = subprocess.run(
        [sys.executable, str(ROOT / "python" / "examples" / "sdf_miss_bench.py"),
         "--hosts", "64", "--flows", "2000", "--rounds", "1", "--pipeline"],
        capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("python L2 app, pipeline (run_frames)")]
    assert len(lines) == 4, r.stdout
