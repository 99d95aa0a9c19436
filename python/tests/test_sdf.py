"""nexthop.sdf: every API call of the SDF paper from Python, bad apps, and
the cache oracle for the shipped Python apps."""

import json
import random
import struct

import pytest

from nexthop.apps.l2switch import L2Switch
from nexthop.sdf import OutPkt, StateId, Switch, drop_reasons


def mac(n: int) -> bytes:
    return bytes([0x02, 0, 0, 0, 0, n])


def eth(dst: bytes, src: bytes, ethertype: int = 0x88B5, payload: bytes = b"x" * 46) -> bytes:
    return dst + src + struct.pack("!H", ethertype) + payload


def ipv4(ttl: int) -> bytes:
    h = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20, 0, 0, ttl, 17, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))
    h[10:12] = struct.pack("!H", checksum(bytes(h)))
    return eth(mac(1), mac(2), 0x0800, bytes(h) + b"\0" * 26)


def checksum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class ByDst:
    """Sends to the port in the last byte of the destination MAC, marking only it."""

    def __init__(self):
        self.calls = 0
        self.state = None

    def on_packet(self, pkt, ctl):
        self.calls += 1
        if self.state is None:
            self.state = ctl.new_state_id()
        out = pkt.new_out_pkt()
        out.add_destination(pkt.field(40, 8))
        out.register(self.state)
        pkt.send(out)


def test_mark_caches_exactly_the_marked_bits_and_removed_revokes():
    app = ByDst()
    sw = Switch(app, ports=[1, 2, 3])
    a = eth(mac(2), mac(9))
    assert sw.process(1, a) == [(2, a)]
    b = eth(mac(2), mac(7), payload=b"y" * 46)  # other source, same marked byte
    assert sw.process(3, b) == [(2, b)]
    assert app.calls == 1
    c = sw.counters()
    assert (c["packets"], c["hits"], c["misses"], c["installed"], c["entries"]) == (2, 1, 1, 1, 1)
    assert sw.control(lambda ctl: ctl.removed(app.state)) == 1
    app.state = None
    assert sw.process(1, a) == [(2, a)]
    assert app.calls == 2


def test_inpkt_calls():
    seen = {}

    class App:
        def on_packet(self, pkt, ctl):
            seen["in_port"] = pkt.in_port
            seen["data"] = pkt.data
            seen["len"] = len(pkt)
            seen["field"] = pkt.field(96, 16)
            seen["bytes"] = pkt.bytes(0, 6)
            pkt.mark(0, 48)
            pkt.unmark(0, 48)
            pkt.clear()
            seen["ingress"] = pkt.mark_ingress()
            out = pkt.new_out_pkt()
            out.add_destination(2)
            pkt.send(out, False)
            out2 = pkt.new_out_pkt()
            out2.add_destination(3)
            pkt.send(out2, True)
            with pytest.raises(ValueError, match="final"):
                pkt.send(out2, True)

    f = eth(mac(5), mac(6), 0x1234)
    sw = Switch(App(), ports=[1, 2, 3])
    assert sorted(sw.process(1, f)) == [(2, f), (3, f)]
    assert seen == {"in_port": 1, "data": f, "len": len(f), "field": 0x1234, "bytes": mac(5), "ingress": 1}


def test_outpkt_calls_and_to_controller():
    class App:
        def on_packet(self, pkt, ctl):
            out = pkt.new_out_pkt()
            sid = ctl.new_state_id()
            out.register(sid)
            out.register(sid)
            assert out.states == [sid] and isinstance(sid, StateId) and sid.value > 0
            out.add_destination(3)
            out.clear()
            assert out.destinations == [] and out.states == []
            out.add_destination(2)
            out.to_controller()
            out.set_bytes(0, b"\xaa")
            with pytest.raises(ValueError):
                pkt.new_out_pkt().dec_ttl()  # not IP
            pkt.send(out)

    f = eth(mac(5), mac(6))
    got = Switch(App(), ports=[1, 2]).process(1, f)
    g = b"\xaa" + f[1:]
    assert got == [(2, g), (None, g)]


def test_dec_ttl_updates_the_checksum_on_miss_and_hit_and_drops_expired():
    class Router:
        def on_packet(self, pkt, ctl):
            pkt.field(96, 16)  # ethertype
            out = pkt.new_out_pkt()
            out.dec_ttl()
            out.add_destination(2)
            pkt.send(out)

    sw = Switch(Router(), ports=[1, 2])
    for ttl in (64, 9):
        [(port, b)] = sw.process(1, ipv4(ttl))
        ip = b[14:34]
        assert port == 2 and ip[8] == ttl - 1 and checksum(ip) == 0
    assert sw.counters()["hits"] == 1
    assert sw.process(1, ipv4(1)) == []
    assert sw.counters()["hit_drops"] == 1


def test_control_calls_and_proactive_push():
    log = {}

    class App:
        calls = 0

        def on_packet(self, pkt, ctl):
            self.calls += 1
            log["ports"] = ctl.get_ports()
            t = ctl.add_port()
            log["tunnel"] = t
            ctl.set_properties(t, "peer", "10.0.0.9")
            log["props"] = ctl.get_properties(t)
            ctl.del_port(t)
            with pytest.raises(ValueError, match="does not exist"):
                ctl.get_properties(t)
            log["now"] = ctl.now()
            log["stats"] = ctl.get_stats()

    sw = Switch(App(), ports=[1, 2])
    sw.tick(2.5)
    sw.process(1, eth(mac(1), mac(2)))
    assert log["ports"] == [1, 2] and log["tunnel"] == 3
    assert log["props"] == {"peer": "10.0.0.9"} and log["now"] == 2.5
    assert log["stats"]["app_calls"] == 1 and set(log["stats"]["drop_reasons"]) == set(drop_reasons())

    def proactive(ctl):
        p = ctl.new_in_pkt(1, eth(mac(7), mac(0)))
        p.mark(0, 48)
        out = p.new_out_pkt()
        out.add_destination(2)
        p.send(out)
        assert ctl.push(p) is True
        with pytest.raises(RuntimeError, match="pushed"):
            ctl.push(p)
        return ctl.get_stats()["proactive"]

    assert sw.control(proactive) == 1
    f = eth(mac(7), mac(3))
    assert sw.process(2, f) == [(2, f)]
    assert sw.app.calls == 1  # answered by the pushed decision


def test_objects_are_invalid_after_the_call():
    kept = []

    class App:
        def on_packet(self, pkt, ctl):
            kept.append((pkt, ctl))

    sw = Switch(App(), ports=[1])
    sw.process(1, eth(mac(1), mac(2)))
    pkt, ctl = kept[0]
    with pytest.raises(RuntimeError, match="returned"):
        pkt.field(0, 8)
    with pytest.raises(RuntimeError, match="returned"):
        ctl.get_ports()
    with pytest.raises(RuntimeError, match="returned"):
        len(pkt)


def test_bad_apps_are_counted_drops_and_the_switch_keeps_forwarding():
    class Bad:
        mode = "raise"

        def on_packet(self, pkt, ctl):
            if pkt.field(40, 8) == 1:  # a good flow, cached
                out = pkt.new_out_pkt()
                out.add_destination(2)
                pkt.send(out)
                return None
            if self.mode == "raise":
                raise KeyError("boom")
            if self.mode == "return":
                return 42
            if self.mode == "mark":
                pkt.mark(8 * 4000, 8)
            if self.mode == "port":
                out = pkt.new_out_pkt()
                out.add_destination(77)
                pkt.send(out)
            return None

    app = Bad()
    sw = Switch(app, ports=[1, 2])
    good = eth(mac(1), mac(2))
    assert sw.process(1, good) == [(2, good)]
    for mode in ("raise", "return", "mark", "port"):
        app.mode = mode
        assert sw.process(1, eth(mac(9), mac(2))) == []
        assert sw.process(1, good) == [(2, good)]
    r = sw.counters()["drop_reasons"]
    assert r["app_error"] == 2 and r["mark_beyond_header"] == 1 and r["unknown_port"] == 1
    with pytest.raises(ValueError, match="on_packet"):
        Switch(object(), ports=[1])


def test_on_tick_and_raw_replies_are_not_cached():
    class App:
        ticks = 0

        def on_tick(self, ctl):
            self.ticks += 1

        def on_packet(self, pkt, ctl):
            pkt.field(0, 8)
            o = OutPkt(b"reply")
            o.add_destination(pkt.in_port)
            pkt.send(o)

    sw = Switch(App(), ports=[1, 2])
    sw.tick(1.0)
    for _ in range(2):
        assert sw.process(2, eth(mac(1), mac(2))) == [(2, b"reply")]
    c = sw.counters()
    assert sw.app.ticks == 1 and c["hits"] == 0 and c["uncacheable"] == 2


def l2_traffic(seed: int, n: int):
    """Random frames among 6 hosts on 4 ports; hosts move, time passes."""
    rng = random.Random(seed)
    where = {h: rng.randrange(1, 5) for h in range(1, 7)}
    t = 0.0
    for _ in range(n):
        if rng.random() < 0.05:
            where[rng.randrange(1, 7)] = rng.randrange(1, 5)
        if rng.random() < 0.05:
            t += rng.choice([1.0, 20.0])
            yield ("tick", t)
        s = rng.randrange(1, 7)
        d = rng.choice([rng.randrange(1, 7), 0xFF])
        dst = b"\xff" * 6 if d == 0xFF else mac(d)
        yield (where[s], eth(dst, mac(s), payload=bytes([rng.randrange(256)]) * 46))


def run(sw, traffic):
    out = []
    for port, x in traffic:
        if port == "tick":
            sw.tick(x)
        else:
            out.append(sorted(sw.process(port, x), key=lambda e: (e[0] is None, e[0])))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_l2switch_matches_the_rust_builtin_and_the_uncached_oracle(seed):
    traffic = list(l2_traffic(seed, 1500))
    ports = [1, 2, 3, 4]
    cached = Switch(L2Switch(timeout=30.0), ports=ports)
    got = run(cached, traffic)
    assert got == run(Switch(L2Switch(timeout=30.0), ports=ports, caching=False), traffic)
    assert got == run(Switch.rust_l2(ports, timeout=30.0), traffic)
    c = cached.counters()
    assert c["hits"] > 0 and cached.app.moves > 0 and cached.app.expired > 0


def test_l2switch_move_revokes_only_the_moved_hosts_decisions():
    sw = Switch(L2Switch(), ports=[1, 2, 3])
    a, b, c = mac(1), mac(2), mac(3)
    for src, port in ((a, 1), (b, 2), (c, 3)):
        sw.process(port, eth(b"\xff" * 6, src))
    ab, cb = eth(b, a), eth(b, c)
    assert sw.process(1, ab) == [(2, ab)] and sw.process(3, cb) == [(2, cb)]
    before = sw.counters()["entries"]
    # a moves to port 3: decisions that used a's binding go, c->b stays.
    ba = eth(a, b)
    sw.process(3, eth(c, a))
    assert sw.app.port_of(a) == 3
    hits = sw.counters()["hits"]
    assert sw.process(3, cb) == [(2, cb)] and sw.counters()["hits"] == hits + 1
    assert sw.process(2, ba) == [(3, ba)]
    assert sw.counters()["entries"] <= before + 2


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(fr), len(fr)) + fr)


def read_pcap(path):
    b = path.read_bytes()
    out, at = [], 24
    while at < len(b):
        _, _, n, _ = struct.unpack_from("<IIII", b, at)
        out.append(b[at + 16 : at + 16 + n])
        at += 16 + n
    return out


def test_run_pcap_and_module_cli_match_the_in_process_switch(tmp_path):
    import subprocess
    import sys

    import nexthop.apps.l2switch as l2
    from nexthop.sdf import run_pcap

    traffic = [(p, f) for p, f in l2_traffic(7, 300) if p != "tick"]
    frames = [f for _, f in traffic]
    write_pcap(tmp_path / "in.pcap", frames)
    want = {}
    sw = Switch(L2Switch(), ports=[0, 1, 2, 3])
    for f in frames:
        for port, b in sw.process(0, f):
            want.setdefault(f"port-{port}.pcap", []).append(b)
    s = run_pcap(L2Switch(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "out"))
    assert s["frames_in"] == 300 and s["app_calls"] >= 1 and s["hits"] > 0
    # The same pipeline counters as run_live's (one helper builds both).
    assert s["installs"] >= 1 and s["revocations"] >= 0
    assert set(s["sdf_drops"]) >= {"queue_full", "app_fault", "no_slice"}
    assert sum(s["sdf_drops"].values()) == 0
    assert {k: read_pcap(tmp_path / "out" / k) for k in s["outputs"]} == want
    r = subprocess.run(
        [sys.executable, "-m", "nexthop.sdf", "run", "--app", l2.__file__,
         "--in-pcap", f"0={tmp_path / 'in.pcap'}", "--out-dir", str(tmp_path / "out2"), "--json"],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(r.stdout)["frames_in"] == 300
    assert {k: read_pcap(tmp_path / "out2" / k) for k in s["outputs"]} == want
    bad = subprocess.run(
        [sys.executable, "-m", "nexthop.sdf", "run", "--app", str(tmp_path / "none.py"),
         "--in-pcap", str(tmp_path / "in.pcap"), "--out-dir", str(tmp_path / "o3")],
        capture_output=True, text=True,
    )
    assert bad.returncode == 1 and "error:" in bad.stderr


def bursts(flows: int, per_flow: int) -> "list[bytes]":
    """Hosts 1..flows say hello (a broadcast each), then each sends
    `per_flow` frames in a row to host 0: every burst is a new flow whose
    frames arrive together."""
    hello = [eth(b"\xff" * 6, mac(h)) for h in range(flows + 1)]
    return hello + [eth(mac(0), mac(h)) for h in range(1, flows + 1) for _ in range(per_flow)]


def test_run_pcap_pending_table_and_queue_bounds(tmp_path):
    from nexthop.sdf import run_pcap

    frames = bursts(40, 4)
    write_pcap(tmp_path / "in.pcap", frames)
    on = run_pcap(L2Switch(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "on"))
    off = run_pcap(L2Switch(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "off"),
                   pending_table=False)
    # With the table a burst's later frames wait for its one decision;
    # without it each frame that misses is an app call of its own.
    assert on["pending_waits"] > 0 and off["pending_waits"] == 0
    assert on["app_calls"] <= 41 + 40 < off["app_calls"]
    # The same frames leave either way.
    for k in on["outputs"]:
        assert read_pcap(tmp_path / "on" / k) == read_pcap(tmp_path / "off" / k)
    assert on["outputs"] == off["outputs"]
    for kw in ({"queue": 0}, {"control_queue": 0}, {"control_weight": 0}):
        with pytest.raises(ValueError, match="must be at least 1"):
            run_pcap(L2Switch(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "bad"), **kw)


def test_run_frames_runs_the_pipeline_without_waiting_between_batches():
    from nexthop.sdf import run_frames

    frames = [(1 + i % 2, f) for i, f in enumerate(bursts(40, 4))]
    # Bursts stay on one port (a run of one ingress port is one batch).
    frames = frames[:41] + [(3, f) for _, f in frames[41:]]
    on = run_frames(L2Switch(), frames)
    off = run_frames(L2Switch(), frames, pending_table=False)
    assert on["frames_in"] == off["frames_in"] == len(frames)
    assert on["unanswered"] == off["unanswered"] == 0
    assert on["pending_waits"] > 0 and off["pending_waits"] == 0
    assert on["app_calls"] <= 81 < off["app_calls"]
    # Every frame is decided the same way (flooded or sent to host 0's
    # port) whichever way it was decided.
    assert on["frames_out"] == off["frames_out"] == on["forwarded"] > 0
    assert on["elapsed_s"] > 0
    one = run_frames(L2Switch(), frames, in_flight=1)
    assert one["frames_out"] == on["frames_out"] and one["unanswered"] == 0
    for bad in (0, 4097):
        with pytest.raises(ValueError, match="in_flight"):
            run_frames(L2Switch(), frames, in_flight=bad)


def test_an_apps_thread_keeps_its_python_thread_state_between_calls():
    import threading

    from nexthop.sdf import run_frames

    class Counting:
        """Counts its calls in a threading.local: the count lives in the
        thread's Python thread state, so it only grows if the app thread
        keeps one thread state from call to call (it used to get a new one
        per call, which also cost an munmap each)."""

        def __init__(self):
            self.local = threading.local()
            self.seen = []

        def on_packet(self, pkt, ctl):
            self.local.n = getattr(self.local, "n", 0) + 1
            self.seen.append((threading.get_ident(), self.local.n))

    app = Counting()
    frames = [(1, eth(mac(0), mac(h))) for h in range(1, 200)]
    s = run_frames(app, frames)
    assert s["app_calls"] == len(app.seen) == 199
    assert len({t for t, _ in app.seen}) == 1
    assert [n for _, n in app.seen] == list(range(1, 200))


def test_nexthop_sdf_run_with_a_py_app_runs_it_through_the_package(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import nexthop.apps.l2switch as l2
    from conftest import ROOT

    exe = Path(os.environ.get("NEXTHOP_BIN", ROOT / "target" / "release" / "nexthop"))
    if not exe.exists():
        pytest.fail(f"{exe} is missing: run `cargo build --release -p nexthop-cli` first")
    frames = [f for p, f in l2_traffic(11, 200) if p != "tick"]
    write_pcap(tmp_path / "in.pcap", frames)
    args = [str(exe), "sdf", "run", "--app", l2.__file__, "--in-pcap", str(tmp_path / "in.pcap"),
            "--out-dir", str(tmp_path / "out"), "--json"]
    r = subprocess.run(args, capture_output=True, text=True,
                       env={**os.environ, "NEXTHOP_PYTHON": sys.executable})
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["frames_in"] == len(frames) and s["app_calls"] >= 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(s["outputs"])
    r = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "NEXTHOP_PYTHON": "false"})
    assert r.returncode != 0
    assert "Python apps need the nexthop Python package" in r.stderr
    # The pipeline's flags reach the Python run: the pending-miss table off
    # makes more app calls on bursts; a queue of 0 is refused.
    write_pcap(tmp_path / "bursts.pcap", bursts(40, 4))
    env = {**os.environ, "NEXTHOP_PYTHON": sys.executable}
    calls = {}
    for extra in ([], ["--no-pending-table"]):
        r = subprocess.run([str(exe), "sdf", "run", "--app", l2.__file__, "--in-pcap",
                            str(tmp_path / "bursts.pcap"), "--out-dir", str(tmp_path / "b"),
                            "--json", *extra], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        calls[bool(extra)] = json.loads(r.stdout)["app_calls"]
    assert calls[False] <= 81 < calls[True]
    r = subprocess.run([str(exe), "sdf", "run", "--app", l2.__file__, "--in-pcap",
                        str(tmp_path / "bursts.pcap"), "--out-dir", str(tmp_path / "b"),
                        "--queue", "0"], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "queue" in r.stderr


def test_on_tick_errors_are_reported_not_raised(monkeypatch):
    import sys

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(str(u.exc_value)))

    class App:
        def on_packet(self, pkt, ctl):
            pass

        def on_tick(self, ctl):
            raise ZeroDivisionError("tock")

    sw = Switch(App(), ports=[1])
    sw.tick(1.0)
    assert len(seen) == 1 and "tock" in seen[0]
    assert sw.process(1, eth(mac(1), mac(2))) == []


IFACES = {1: ("02:00:00:00:01:01", "10.1.0.1"), 2: ("02:00:00:00:02:01", "10.2.0.1"), 3: ("02:00:00:00:03:01", "10.3.0.1")}


def ip_frame(dst: str, ttl: int = 64, src: str = "10.9.9.9") -> bytes:
    import ipaddress

    h = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 46, 0, 0, ttl, 17, 0,
                              ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed))
    h[10:12] = struct.pack("!H", checksum(bytes(h)))
    return eth(bytes.fromhex("020000000101"), mac(9), 0x0800, bytes(h) + b"\0" * 26)


def make_router(tmp_path):
    from nexthop.apps.router import Router

    routes = tmp_path / "routes.txt"
    routes.write_text("# prefix port next-hop\n10.0.0.0/8 2 02:00:00:00:00:aa\n192.168.0.0/16 3 02:00:00:00:00:bb\n")
    app = Router(IFACES)
    sw = Switch(app, ports=[1, 2, 3])
    sw.control(lambda ctl: app.load_routes(routes, ctl))
    return app, sw


def test_router_forwards_rewrites_and_decrements_ttl(tmp_path):
    app, sw = make_router(tmp_path)
    for _ in range(2):  # miss, then hit
        [(port, b)] = sw.process(1, ip_frame("10.5.5.5"))
        assert port == 2 and b[0:12] == bytes.fromhex("0200000000aa" "020000000201")
        assert b[14 + 8] == 63 and checksum(b[14:34]) == 0
    assert sw.counters()["hits"] == 1
    assert sw.process(1, ip_frame("10.5.5.6", ttl=1)) == []
    assert sw.process(1, ip_frame("8.8.8.8")) == []  # no route
    assert sw.process(1, ip_frame("10.2.0.1")) == [(None, ip_frame("10.2.0.1"))]  # to the router


def test_router_answers_arp_for_its_addresses_uncached(tmp_path):
    app, sw = make_router(tmp_path)
    req = (b"\xff" * 6 + mac(9) + b"\x08\x06" + b"\x00\x01\x08\x00\x06\x04\x00\x01"
           + mac(9) + bytes([10, 1, 0, 9]) + b"\0" * 6 + bytes([10, 1, 0, 1]))
    for _ in range(2):
        [(port, r)] = sw.process(1, req)
        assert port == 1 and r[0:6] == mac(9) and r[20:22] == b"\x00\x02"
        assert r[22:28] == bytes.fromhex("020000000101") and r[28:32] == bytes([10, 1, 0, 1])
    assert sw.counters()["hits"] == 0
    other = req[:38] + bytes([10, 1, 0, 77])
    assert sw.process(1, other) == []


def test_router_route_change_revokes_only_that_prefix(tmp_path):
    app, sw = make_router(tmp_path)
    for d in ("10.1.1.1", "10.7.7.7", "192.168.1.1", "192.168.2.2"):
        sw.process(1, ip_frame(d))
    assert sw.counters()["entries"] == 4
    # A more specific route inside 10/8 takes over: 10/8's two decisions go.
    assert sw.control(lambda ctl: app.announce(ctl, "10.7.0.0/16", 3, "02:00:00:00:00:cc")) == 2
    hits = sw.counters()["hits"]
    assert sw.process(1, ip_frame("192.168.1.1"))[0][0] == 3 and sw.counters()["hits"] == hits + 1
    assert sw.process(1, ip_frame("10.7.7.7"))[0][0] == 3
    assert sw.process(1, ip_frame("10.1.1.1"))[0][0] == 2
    assert sw.control(lambda ctl: app.withdraw(ctl, "10.7.0.0/16")) == 1
    assert sw.process(1, ip_frame("10.7.7.7"))[0][0] == 2


@pytest.mark.parametrize("seed", [1, 2])
def test_router_cache_oracle_with_route_changes(tmp_path, seed):
    changes = [("announce", "10.7.0.0/16", 3, "02:00:00:00:00:cc"), ("withdraw", "10.0.0.0/8"),
               ("announce", "10.0.0.0/8", 1, "02:00:00:00:00:dd"), ("announce", "0.0.0.0/0", 2, "02:00:00:00:00:ee"),
               ("withdraw", "10.7.0.0/16"), ("announce", "192.168.7.0/24", 1, "02:00:00:00:00:ff")]
    rng = random.Random(seed)
    (app_c, cached), (app_u, _) = make_router(tmp_path), make_router(tmp_path)
    uncached = Switch(app_u, ports=[1, 2, 3], caching=False)
    for i in range(1500):
        if i % 250 == 249:
            op, *args = changes[(i // 250) % len(changes)]
            for a, s in ((app_c, cached), (app_u, uncached)):
                s.control(lambda ctl, a=a: getattr(a, op)(ctl, *args))
        d = rng.choice(["10.1.1.1", "10.7.1.2", "10.7.200.1", "192.168.7.7", "192.168.1.1", "8.8.8.8", "10.2.0.1"])
        f = ip_frame(d, ttl=rng.choice([1, 2, 64]))
        port = rng.randrange(1, 4)
        assert cached.process(port, f) == uncached.process(port, f)
    assert cached.counters()["hits"] > 0


def test_router_app_file_runs_over_pcap(tmp_path):
    import os
    import subprocess
    import sys

    import nexthop.apps.router as router

    (tmp_path / "routes.txt").write_text("10.0.0.0/8 2 02:00:00:00:00:aa\n")
    frames = [ip_frame("10.5.5.5"), ip_frame("10.5.5.5", ttl=9), ip_frame("8.8.8.8")]
    write_pcap(tmp_path / "in.pcap", frames)
    env = {**os.environ, "NEXTHOP_ROUTER_ROUTES": str(tmp_path / "routes.txt"),
           "NEXTHOP_ROUTER_IFACES": ";".join(f"{p}={m},{a}" for p, (m, a) in IFACES.items())}
    r = subprocess.run(
        [sys.executable, "-m", "nexthop.sdf", "run", "--app", router.__file__, "--in-pcap",
         f"1={tmp_path / 'in.pcap'}", "--out-dir", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True, env=env,
    )
    assert r.returncode == 0, r.stderr
    out = read_pcap(tmp_path / "out" / "port-2.pcap")
    assert [b[14 + 8] for b in out] == [63, 8] and all(checksum(b[14:34]) == 0 for b in out)
    assert json.loads(r.stdout)["frames_in"] == 3


class Flood:
    """Floods every frame, marking the ingress port and the EtherType."""

    def on_packet(self, pkt, ctl):
        in_port = pkt.mark_ingress()
        pkt.field(96, 16)
        out = pkt.new_out_pkt()
        for p in ctl.get_ports():
            if p != in_port:
                out.add_destination(p)
        pkt.send(out)


class OwnControl(Flood):
    def control_filter(self):
        from nexthop.sdf import ControlFilter

        return ControlFilter(ethertypes=[0x88B6], dst_macs=[mac(9)])


class NoControl(Flood):
    def control_filter(self):
        from nexthop.sdf import ControlFilter

        return ControlFilter.none()


class DefaultControl(Flood):
    def control_filter(self):
        return None


def test_control_filter_values_and_matches():
    from nexthop.sdf import ControlFilter

    f = ControlFilter()
    assert f.ethertypes == [0x0806] and f.dst_macs == []
    assert f.matches(eth(mac(1), mac(2), 0x0806))
    tagged = mac(1) + mac(2) + struct.pack("!HHH", 0x8100, 7, 0x0806) + b"x" * 42
    assert f.matches(tagged), "ARP under one 802.1Q tag"
    assert not f.matches(eth(mac(1), mac(2), 0x0800))
    assert not f.matches(b"") and not f.matches(b"\x01" * 13)
    own = ControlFilter(ethertypes=[0x88B6], dst_macs=[mac(9)])
    assert own.dst_macs == [mac(9)]
    assert own.matches(eth(mac(9), mac(2), 0x0800)) and own.matches(eth(mac(1), mac(2), 0x88B6))
    assert not own.matches(eth(mac(1), mac(2), 0x0806)), "its own filter replaces ARP"
    assert not ControlFilter.none().matches(eth(mac(1), mac(2), 0x0806))
    assert "0x88b6" in repr(own)
    with pytest.raises(ValueError, match="6 bytes"):
        ControlFilter(dst_macs=[b"\x01\x02"])
    with pytest.raises(OverflowError):
        ControlFilter(ethertypes=[0x10000])


@pytest.mark.parametrize(
    "app,control",
    [
        (Flood, {0x0806}),  # no control_filter: ARP
        (DefaultControl, {0x0806}),  # None: ARP
        (OwnControl, {0x88B6, "to9"}),
        (NoControl, set()),
    ],
)
def test_the_apps_control_filter_decides_which_misses_use_the_control_queue(tmp_path, app, control):
    from nexthop.sdf import run_pcap

    kinds = {
        0x0806: eth(mac(1), mac(2), 0x0806),
        0x88B6: eth(mac(1), mac(3), 0x88B6),
        0x0800: eth(mac(1), mac(4), 0x0800),
        "to9": eth(mac(9), mac(5), 0x0800),
    }
    frames = list(kinds.values())
    write_pcap(tmp_path / "in.pcap", frames)
    s = run_pcap(app(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "out"))
    assert s["frames_in"] == 4 and s["app_calls"] == 4
    assert s["control_requests"] == len(control), s
    assert s["control_calls"] == len(control), s
    assert s["data_calls"] == 4 - len(control), s
    # Control or data, every frame is decided and flooded the same way.
    assert s["forwarded"] == 4


def test_a_control_filter_of_the_wrong_type_is_refused_at_start(tmp_path):
    from nexthop.sdf import run_pcap

    class Wrong(Flood):
        def control_filter(self):
            return [0x0806]

    class Raises(Flood):
        def control_filter(self):
            raise KeyError("no filter")

    write_pcap(tmp_path / "in.pcap", [eth(mac(1), mac(2))])
    with pytest.raises(ValueError, match="expected a nexthop.sdf.ControlFilter or None"):
        run_pcap(Wrong(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "out"))
    with pytest.raises(KeyError, match="no filter"):
        run_pcap(Raises(), [(0, str(tmp_path / "in.pcap"))], str(tmp_path / "out"))
    with pytest.raises(ValueError, match="expected a nexthop.sdf.ControlFilter"):
        Switch(Wrong(), ports=[0, 1])


@pytest.mark.parametrize("args,msg", [
    (["--backend", "ovs", "--ovs-ports", "1,2", "--metrics", "127.0.0.1:9100"],
     "--metrics serves the nexthop backend's counters"),
    (["--backend", "ovs"], "--backend ovs needs --ovs-ports"),
    (["--in-pcap", "0=x.pcap", "--out-dir", "o", "--metrics", "127.0.0.1:9100"], None),
    (["--metrics", "127.0.0.1:9100"], "give --port N=IFACE"),
])
def test_the_module_cli_refuses_flags_that_do_not_fit_the_backend(args, msg):
    import subprocess
    import sys

    import nexthop.apps.l2switch as l2

    r = subprocess.run([sys.executable, "-m", "nexthop.sdf", "run", "--app", l2.__file__, *args],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert (msg or "--metrics serves a live run's counters") in r.stderr, r.stderr
