"""Python SDF apps on live ports: `nexthop sdf run --app APP.py --port N=IFACE`
between network namespaces (veth pairs), real frames through AF_PACKET.

Three hosts h1..h3, each in its own namespace, joined by a veth pair to
port N (interface spN) of the switch namespace. Each host runs a capture
helper (an AF_PACKET socket that appends every frame carrying the test's
magic that the host received, not sent, to a file as it arrives) and sends
frames with a short-lived sender helper. Needs root (skipped otherwise).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="network namespaces need root and iproute2",
)

MAGIC = b"NHPY"

CAPTURE = r"""
import os, socket, sys
iface, out, stop = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((iface, 0))
s.settimeout(0.02)
open(out + ".ready", "w").write("ready\n")
with open(out, "w") as f:
    while not os.path.exists(stop):
        try:
            frame, addr = s.recvfrom(4096)
        except socket.timeout:
            continue
        # The socket also sees the host's own frames leave.
        if addr[2] != socket.PACKET_OUTGOING and MAGIC in frame:
            f.write(frame.hex() + "\n")
            f.flush()
""".replace("MAGIC", repr(MAGIC))

SEND = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for line in sys.argv[2:]:
    s.send(bytes.fromhex(line))
"""


def host_mac(i: int) -> bytes:
    """Documentation MAC (RFC 7042) of host ``i``."""
    return bytes([0x00, 0x00, 0x5E, 0x00, 0x53, i])


def frame(src: bytes, dst: bytes, seq: int, ethertype: int = 0x88B5) -> bytes:
    """A frame of a local experimental EtherType carrying the magic and ``seq``."""
    return dst + src + ethertype.to_bytes(2, "big") + MAGIC + seq.to_bytes(2, "big") + bytes(44)


class Lab:
    """Namespaces h1..hN and sw, veth hI <-> spI, capture helpers on the hosts."""

    def __init__(self, tmp: Path, hosts: int) -> None:
        self.tmp = tmp
        self.hosts = hosts
        self.tag = f"nhpy{os.getpid() % 100000}"
        self.procs: list = []
        self.ns = [f"{self.tag}h{i}" for i in range(1, hosts + 1)] + [f"{self.tag}sw"]
        try:
            for ns in self.ns:
                self.ip("netns", "add", ns)
                # IPv6 off: no router solicitations or DAD frames next to
                # the test's frames.
                self.sysctl(ns, "all")
                self.sysctl(ns, "default")
            for i in range(1, hosts + 1):
                h, sp = f"{self.tag}h{i}", f"{self.tag}sw"
                self.ip("link", "add", f"h{i}", "netns", h, "type", "veth", "peer", "name", f"sp{i}", "netns", sp)
                for ns, dev in ((h, f"h{i}"), (sp, f"sp{i}")):
                    self.sysctl(ns, dev)
                    self.ip("-n", ns, "link", "set", dev, "up")
            for ns in self.ns:
                self.ip("-n", ns, "link", "set", "lo", "up")
            for i in range(1, hosts + 1):
                cap = tmp / f"h{i}.txt"
                p = self.spawn(f"h{i}", [sys.executable, "-c", CAPTURE, f"h{i}", str(cap), str(tmp / "stop")])
                self.procs.append(p)
                self.wait_file(Path(str(cap) + ".ready"))
        except BaseException:
            self.close()
            raise

    @staticmethod
    def sysctl(ns: str, conf: str) -> None:
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{conf}.disable_ipv6=1"],
                       check=True, capture_output=True)

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def spawn(self, role: str, argv: list, **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", f"{self.tag}{role}", *argv], **kw)

    @staticmethod
    def wait_file(p: Path, limit: float = 10.0) -> None:
        t = time.monotonic()
        while not p.exists():
            assert time.monotonic() - t < limit, f"{p} never appeared"
            time.sleep(0.01)

    def send(self, host: int, frames: list) -> None:
        r = subprocess.run(["ip", "netns", "exec", f"{self.tag}h{host}", sys.executable, "-c", SEND, f"h{host}",
                            *(f.hex() for f in frames)], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr

    def got(self, host: int) -> list:
        p = self.tmp / f"h{host}.txt"
        return [bytes.fromhex(line) for line in p.read_text().splitlines()] if p.exists() else []

    def wait_got(self, host: int, n: int, limit: float = 10.0) -> list:
        """Host ``host``'s frames once it has received ``n``."""
        t = time.monotonic()
        while len(self.got(host)) < n and time.monotonic() - t < limit:
            time.sleep(0.01)
        return self.got(host)

    def close(self) -> None:
        (self.tmp / "stop").write_text("stop\n")
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for ns in self.ns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def lab(tmp_path):
    lab = Lab(tmp_path, 3)
    yield lab
    lab.close()


def nexthop_bin() -> Path:
    exe = Path(os.environ.get("NEXTHOP_BIN", ROOT / "target" / "release" / "nexthop"))
    if not exe.exists():
        pytest.fail(f"{exe} is missing: run `cargo build --release -p nexthop-cli` first")
    return exe


class Switch:
    """`nexthop sdf run --app APP --port I=spI ...` in the switch namespace
    (``app`` None: the slices in ``extra`` instead)."""

    def __init__(self, lab: Lab, app: "str | None", *extra: str) -> None:
        ports = [a for i in range(1, lab.hosts + 1) for a in ("--port", f"{i}=sp{i}")]
        which = ["--app", app] if app is not None else []
        self.err = open(lab.tmp / "sw.err", "w+")
        self.proc = lab.spawn(
            "sw", [str(nexthop_bin()), "sdf", "run", *which, *ports, "--duration", "60", "--quiet", *extra],
            stdout=subprocess.PIPE, stderr=self.err, text=True, env={**os.environ, "NEXTHOP_PYTHON": sys.executable},
        )
        t = time.monotonic()
        while "nexthop sdf run: forwarding" not in (lab.tmp / "sw.err").read_text():
            if self.proc.poll() is not None or time.monotonic() - t > 20:
                self.proc.kill()
                raise AssertionError(f"the switch did not start:\n{(lab.tmp / 'sw.err').read_text()}")
            time.sleep(0.02)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> dict:
        """SIGTERM; the fields of its summary line."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=20)
        self.err.seek(0)
        err = self.err.read()
        assert self.proc.returncode == 0, err
        line = next((l for l in out.splitlines() if l.startswith("frames_in=")), "")
        assert line, f"no summary line in {out!r}\n{err}"
        assert not err.count("Traceback"), err
        return dict(f.split("=", 1) for f in line.split(" "))


@needs_root
def test_python_l2switch_forwards_between_namespaces_caches_and_a_move_revokes(lab):
    import nexthop.apps.l2switch as l2

    sw = Switch(lab, l2.__file__)
    m1, m2 = host_mac(1), host_mac(2)
    # 1. h1 -> h2, unknown: flooded to h2 and h3.
    first = frame(m1, m2, 0)
    lab.send(1, [first])
    assert lab.wait_got(2, 1) == [first]
    assert lab.wait_got(3, 1) == [first]
    # 2. h2 -> h1: h1 was learned, so h1 only.
    reply = frame(m2, m1, 1)
    lab.send(2, [reply])
    assert lab.wait_got(1, 1) == [reply]
    # 3. h1 -> h2 now that both are learned: h2 only; one frame decides the
    # flow, then 20 more are cache hits.
    one = frame(m1, m2, 2)
    lab.send(1, [one])
    assert lab.wait_got(2, 2)[-1] == one
    burst = [frame(m1, m2, s) for s in range(3, 23)]
    lab.send(1, burst)
    assert lab.wait_got(2, 22)[2:] == burst
    # 4. h1's MAC moves to h3's port: h3 sends as m1 (to h2, learned:
    # h2 only). The decisions that used m1's old binding are revoked, so
    # h2 -> m1 now goes to h3, not to h1.
    moved = frame(m1, m2, 23)
    lab.send(3, [moved])
    assert lab.wait_got(2, 23)[-1] == moved
    after = frame(m2, m1, 24)
    lab.send(2, [after])
    got3 = lab.wait_got(3, 2)
    assert got3 == [first, after], "h3 holds m1 now"
    time.sleep(0.2)
    assert lab.got(1) == [reply], "h1 got nothing after the move"
    assert lab.got(2) == [first, one, *burst, moved]
    f = sw.stop()
    assert f["frames_in"] == "25", f
    assert f["stopped_by"] == "signal", f
    assert f["sdf_drops"] == "-" and f["app_drops"] == "-", f
    # Five flows decided (1, 2, 3, the move, the reply after it); the
    # burst's 20 frames are cache hits.
    assert f["app_calls"] == "5", f
    assert f["sdf_hits"] == "20", f
    assert f["sdf_misses"] == "5", f
    assert int(f["revocations"]) >= 1, f
    assert f["out"] == "1:1,2:23,3:2", f


BAD_APP = '''
from nexthop.sdf import ControlFilter

class Bad:
    """Floods, except: seq 1 raises, seq 2 returns a value, seq 3 sends to
    a port that does not exist; frames of EtherType 0x88b6 are control."""

    def __init__(self):
        self.control = 0

    def control_filter(self):
        return ControlFilter(ethertypes=[0x88B6])

    def on_packet(self, pkt, ctl):
        in_port = pkt.mark_ingress()
        seq = pkt.field(18 * 8, 16)
        if pkt.field(12 * 8, 16) == 0x88B6:
            self.control += 1
        if seq == 1:
            raise RuntimeError("the app failed")
        if seq == 2:
            return 42
        out = pkt.new_out_pkt()
        if seq == 3:
            out.add_destination(77)
        else:
            for p in ctl.get_ports():
                if p != in_port:
                    out.add_destination(p)
        pkt.send(out)


def make_app():
    return Bad()
'''


@needs_root
def test_a_bad_python_app_costs_counted_drops_and_the_switch_keeps_forwarding(lab):
    app = lab.tmp / "bad.py"
    app.write_text(BAD_APP)
    sw = Switch(lab, str(app))
    m1, m2 = host_mac(1), host_mac(2)
    good = frame(m1, m2, 0)
    lab.send(1, [good])
    assert lab.wait_got(2, 1) == [good]
    # The three bad decisions (each a flow of its own: seq is marked) drop
    # their frame; the good frame after them still goes through.
    lab.send(1, [frame(m1, m2, 1), frame(m1, m2, 2), frame(m1, m2, 3)])
    later = frame(m1, m2, 4)
    lab.send(1, [later])
    assert lab.wait_got(2, 2) == [good, later]
    # Control traffic of the app's own filter is decided too.
    ctl = frame(m1, m2, 5, ethertype=0x88B6)
    lab.send(1, [ctl])
    assert lab.wait_got(2, 3) == [good, later, ctl]
    # The cached good decision still answers (a hit), and the switch runs.
    lab.send(1, [good])
    assert lab.wait_got(2, 4)[-1] == good
    assert sw.alive()
    f = sw.stop()
    assert f["frames_in"] == "7", f
    drops = dict(d.split(":") for d in f["app_drops"].split(","))
    assert drops == {"app_error": "2", "unknown_port": "1"}, f
    assert f["sdf_hits"] == "1", f
    assert f["app_calls"] == "6", f


@needs_root
def test_a_python_slice_and_a_builtin_slice_forward_live_each_in_its_ports(lab):
    import nexthop.apps.l2switch as l2

    sw = Switch(lab, None, "--slice", f"a:{l2.__file__}:ports=1,2", "--slice", "b:l2switch:ports=3")
    ready = (lab.tmp / "sw.err").read_text()
    assert f"app=a={l2.__file__},b=l2switch" in ready, ready
    m1, m2, m3 = host_mac(1), host_mac(2), host_mac(3)
    # h1 -> h2, unknown to the Python slice: flooded within it (h2), never
    # to h3, whose port is the built-in slice's.
    first = frame(m1, m2, 0)
    lab.send(1, [first])
    assert lab.wait_got(2, 1) == [first]
    # h2 -> h1: learned, h1 only; then a burst of cache hits.
    reply = frame(m2, m1, 1)
    lab.send(2, [reply])
    assert lab.wait_got(1, 1) == [reply]
    burst = [frame(m2, m1, s) for s in range(2, 12)]
    lab.send(2, burst)
    assert lab.wait_got(1, 11)[1:] == burst
    # h3 -> h1: the built-in slice owns only port 3, so its flood reaches
    # nobody (and nothing of it crosses into the Python slice).
    lab.send(3, [frame(m3, m1, 12)])
    time.sleep(0.3)
    assert lab.got(3) == [] and len(lab.got(1)) == 11 and lab.got(2) == [first]
    f = sw.stop()
    assert f["frames_in"] == "13", f
    a = dict(kv.split(":") for kv in f["slice.a"].split(","))
    b = dict(kv.split(":") for kv in f["slice.b"].split(","))
    assert a["app_calls"] == "2" and a["hits"] == "10", f
    assert b["app_calls"] == "1" and b["misses"] == "1" and b["hits"] == "0", f


def test_module_cli_refuses_live_and_offline_together(tmp_path):
    import nexthop.apps.l2switch as l2

    r = subprocess.run([sys.executable, "-m", "nexthop.sdf", "run", "--app", l2.__file__, "--port", "1=lo",
                        "--out-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "excludes --in-pcap and --out-dir" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "nexthop.sdf", "run", "--app", l2.__file__, "--port", "1"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "expected N=IFACE" in r.stderr, r.stderr


SCRAPE = r"""
import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())
"""


@needs_root
def test_a_python_app_on_live_ports_serves_the_sdf_counters_on_metrics(lab):
    import nexthop.apps.l2switch as l2

    sw = Switch(lab, l2.__file__, "--metrics", "127.0.0.1:9464")
    m1, m2 = host_mac(1), host_mac(2)
    lab.send(1, [frame(m1, m2, 0)])
    assert len(lab.wait_got(2, 1)) == 1
    lab.send(2, [frame(m2, m1, 1)])
    assert len(lab.wait_got(1, 1)) == 1
    # Both learned: one frame decides the flow, the burst after it hits.
    lab.send(1, [frame(m1, m2, 2)])
    assert len(lab.wait_got(2, 2)) == 2
    burst = [frame(m1, m2, s) for s in range(3, 13)]
    lab.send(1, burst)
    assert len(lab.wait_got(2, 12)) == 12

    def scrape(path: str) -> str:
        # The endpoint listens on the switch namespace's loopback.
        r = subprocess.run(["ip", "netns", "exec", f"{lab.tag}sw", sys.executable, "-c", SCRAPE,
                            f"http://127.0.0.1:9464{path}"], capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        return r.stdout

    # Published once a second: wait for a snapshot with every frame in it.
    t = time.monotonic()
    while True:
        text = scrape("/metrics")
        if "nexthop_rx_frames_total" in text and 'nexthop_sdf_hits_total{level="front"}' in text:
            counters = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                        if l and not l.startswith("#")}
            # The engine's counters and the stages' SDF counters are
            # published apart: wait for both.
            if counters.get("nexthop_frames_in_total", 0) >= 13 and counters.get(
                    "nexthop_sdf_app_calls_total", 0) >= 3 and sum(
                    v for k, v in counters.items() if k.startswith("nexthop_sdf_hits_total")) >= 10:
                break
        assert time.monotonic() - t < 10, text
        time.sleep(0.2)
    assert counters["nexthop_sdf_misses_total"] >= 3, text
    assert counters["nexthop_sdf_installs_total"] >= 3, text
    assert counters['nexthop_sdf_drops_total{reason="queue_full"}'] == 0, text
    assert 'nexthop_sdf_app_drops_total{reason="app_error"} 0' in text
    assert "sdf_app_calls_total" in scrape("/stats.json")
    assert counters["nexthop_sdf_app_calls_total"] == 3, text
    assert counters["nexthop_frames_in_total"] == 13, text
    f = sw.stop()
    assert f["frames_in"] == "13", f
    assert f["sdf_drops"] == "-", f
