"""Python apps in slices: `run_pcap(slices=...)`, `python -m nexthop.sdf run
--slice` and `nexthop sdf run --slice NAME:APP.py:...` run a Python app in
each slice that names one, next to the built-in l2switch, each slice's
frames decided by its own app (compared with that app alone in the
in-process switch); bad slices are clear errors."""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import nexthop.apps.l2switch as l2
from conftest import ROOT
from nexthop.apps.l2switch import L2Switch
from nexthop.sdf import Switch, run_pcap

# A Python app of its own for slice c: every frame goes to the other port
# of the pair, the decision marking only the ingress port.
PAIR_APP = '''
class Pair:
    def __init__(self):
        self.calls = 0

    def on_packet(self, pkt, ctl):
        self.calls += 1
        port = pkt.mark_ingress()
        out = pkt.new_out_pkt()
        out.add_destination(6 if port == 5 else 5)
        pkt.send(out)


def make_app():
    return Pair()
'''

SLICES = ["a:{l2}:ports=1,2", "b:l2switch:ports=3,4", "c:{pair}:ports=5,6:share=64"]


def mac(n: int) -> bytes:
    return bytes([0x02, 0, 0, 0, 0, n])


def eth(dst: bytes, src: bytes, seq: int) -> bytes:
    return dst + src + b"\x88\xb5" + bytes([seq & 0xFF]) * 46


def traffic(n: int):
    """`(port, frame)`s of three slices, round robin: in each slice two hosts
    on each of its two ports talk and broadcast, the ports alternating (so
    that every frame is a group of its own and the offline run decides it
    before the next, as the in-process switch does)."""
    slices = [(1, 2), (3, 4), (5, 6)]
    out = []
    for i in range(n):
        p, q = slices[i % 3]
        port = p if (i // 3) % 2 == 0 else q
        base = 10 * port
        src = mac(base + (i // 6) % 2)
        other = q if port == p else p
        dst = b"\xff" * 6 if i % 7 == 0 else mac(10 * other + (i // 5) % 2)
        out.append((port, eth(dst, src, i)))
    return out


def write_inputs(tmp_path: Path, frames):
    """One pcap per input port, each frame stamped with its place in
    `frames` (the run merges the files by time)."""
    by_port = {}
    for t, (port, f) in enumerate(frames):
        by_port.setdefault(port, []).append(struct.pack("<IIII", t, 0, len(f), len(f)) + f)
    paths = []
    for port, records in sorted(by_port.items()):
        path = tmp_path / f"in-{port}.pcap"
        path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1) + b"".join(records))
        paths.append((port, str(path)))
    return paths


def read_pcap(path: Path):
    if not path.exists():
        return []
    b = path.read_bytes()
    out, at = [], 24
    while at < len(b):
        _, _, n, _ = struct.unpack_from("<IIII", b, at)
        out.append(b[at + 16 : at + 16 + n])
        at += 16 + n
    return out


def oracle(frames, pair_cls):
    """What each slice's app alone sends, per output port."""
    switches = {
        (1, 2): Switch(L2Switch(), ports=[1, 2]),
        (3, 4): Switch.rust_l2([3, 4]),
        (5, 6): Switch(pair_cls(), ports=[5, 6]),
    }
    want = {p: [] for p in range(1, 7)}
    for port, f in frames:
        sw = next(s for ports, s in switches.items() if port in ports)
        for out, b in sw.process(port, f):
            want[out].append(b)
    return want


def load_pair(path: Path):
    from nexthop.sdf import load_app

    return type(load_app(path))


@pytest.fixture
def setup(tmp_path):
    pair = tmp_path / "pair.py"
    pair.write_text(PAIR_APP)
    frames = traffic(300)
    inputs = write_inputs(tmp_path, frames)
    specs = [s.format(l2=l2.__file__, pair=pair) for s in SLICES]
    return frames, inputs, specs, oracle(frames, load_pair(pair))


def outputs(out_dir: Path):
    return {p: read_pcap(out_dir / f"port-{p}.pcap") for p in range(1, 7)}


def check_summary(s, want):
    assert s["frames_in"] == 300
    names = [x["name"] for x in s["slices"]]
    assert names == ["a", "b", "c"]
    by = {x["name"]: x for x in s["slices"]}
    assert by["b"]["app"] == "l2switch" and by["c"]["app"].endswith("pair.py")
    assert by["c"]["share"] == 64 and by["c"]["owns"] == "ports=5,6"
    for x in s["slices"]:
        assert x["app_calls"] >= 1 and x["pipeline"]["hits"] > 0, x
    # Pair decides on the ingress port alone: two decisions, the rest hits.
    assert by["c"]["app_calls"] == 2
    # Two ports a slice: every frame, known or flooded, leaves by the other.
    assert sum(len(v) for v in want.values()) == 300
    assert s["forwarded"] == 300 and s["dropped"] == 0


def test_run_pcap_runs_a_python_app_per_slice_beside_the_builtin(tmp_path, setup):
    frames, inputs, specs, want = setup
    pair_cls = load_pair(tmp_path / "pair.py")
    slices = [(specs[0], L2Switch()), (specs[1], None), (specs[2], pair_cls())]
    s = run_pcap(None, inputs, str(tmp_path / "out"), ports=[1, 2, 3, 4, 5, 6], slices=slices)
    assert outputs(tmp_path / "out") == want
    check_summary(s, want)
    line = s["summary"]
    assert line.startswith("frames_in=300 ") and " no_slice=0 slice.a=" in line, line
    assert " slice.c=" in line and ",share:64," in line, line


def test_the_module_cli_and_nexthop_sdf_run_load_each_slices_app_file(tmp_path, setup):
    frames, inputs, specs, want = setup
    args = [a for spec in specs for a in ("--slice", spec)]
    args += [a for port, path in inputs for a in ("--in-pcap", f"{port}={path}")]
    args += ["--ports", "1,2,3,4,5,6"]
    r = subprocess.run(
        [sys.executable, "-m", "nexthop.sdf", "run", *args, "--out-dir", str(tmp_path / "m"), "--json"],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    assert outputs(tmp_path / "m") == want
    check_summary(json.loads(r.stdout), want)
    exe = Path(os.environ.get("NEXTHOP_BIN", ROOT / "target" / "release" / "nexthop"))
    if not exe.exists():
        pytest.fail(f"{exe} is missing: run `cargo build --release -p nexthop-cli` first")
    r = subprocess.run([str(exe), "sdf", "run", *args, "--out-dir", str(tmp_path / "n")],
                       capture_output=True, text=True, env={**os.environ, "NEXTHOP_PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr
    assert outputs(tmp_path / "n") == want
    f = dict(kv.split("=", 1) for kv in r.stdout.split())
    assert f["frames_in"] == "300" and f["no_slice"] == "0", r.stdout
    assert f["slice.c"].startswith("hits:98,misses:2,app_calls:2,"), r.stdout


@pytest.mark.parametrize("slice_app,msg", [
    ("{missing}", "slice a: {missing}: no such file"),
    ("{bad}", "slice a: {bad}: RuntimeError: cannot load"),
    ("nope", 'slice a: "nope": no such built-in app'),
])
def test_a_slice_whose_app_does_not_load_is_a_clear_error(tmp_path, slice_app, msg):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('cannot load')\n")
    pair = tmp_path / "pair.py"
    pair.write_text(PAIR_APP)
    names = {"missing": tmp_path / "missing.py", "bad": bad}
    (tmp_path / "in.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    r = subprocess.run(
        [sys.executable, "-m", "nexthop.sdf", "run", "--slice", f"a:{slice_app.format(**names)}:ports=1",
         "--slice", f"b:{pair}:ports=2", "--in-pcap", f"1={tmp_path / 'in.pcap'}",
         "--out-dir", str(tmp_path / "o")],
        capture_output=True, text=True,
    )
    assert r.returncode == 1, r.stderr
    assert msg.format(**names) in r.stderr, r.stderr


def test_run_pcap_takes_an_app_or_slices_and_checks_each_slices_app(tmp_path):
    (tmp_path / "in.pcap").write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    inputs = [(1, str(tmp_path / "in.pcap"))]
    out = str(tmp_path / "o")
    with pytest.raises(ValueError, match="not both"):
        run_pcap(L2Switch(), inputs, out, slices=[("a:l2switch:ports=1", None)])
    with pytest.raises(ValueError, match="give an app or slices"):
        run_pcap(None, inputs, out)
    with pytest.raises(ValueError, match="at least one slice"):
        run_pcap(None, inputs, out, slices=[])
    with pytest.raises(ValueError, match="slice a: an SDF app needs an on_packet"):
        run_pcap(None, inputs, out, slices=[("a:mine:ports=1", object())])
    with pytest.raises(ValueError, match="expected NAME:APP"):
        run_pcap(None, inputs, out, slices=[("a:l2switch", None)])
    with pytest.raises(ValueError, match="port 1 belongs to two slices"):
        run_pcap(None, inputs, out, slices=[("a:l2switch:ports=1", None), ("b:l2switch:ports=1", None)])
    with pytest.raises(ValueError, match="max_macs must be at least 1"):
        run_pcap(None, inputs, out, slices=[("a:l2switch:ports=1", None)], max_macs=0)
    s = run_pcap(None, inputs, out, slices=[("a:l2switch:ports=1", None)])
    assert s["frames_in"] == 0 and [x["name"] for x in s["slices"]] == ["a"]


def test_the_module_cli_refuses_slices_on_ovs_and_slices_with_app():
    r = subprocess.run([sys.executable, "-m", "nexthop.sdf", "run", "--slice", "a:l2switch:ports=1",
                        "--backend", "ovs", "--ovs-ports", "1"], capture_output=True, text=True)
    assert r.returncode == 2 and "slices are not supported on Open vSwitch" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "nexthop.sdf", "run", "--slice", "a:l2switch:ports=1",
                        "--app", l2.__file__], capture_output=True, text=True)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr, r.stderr
