"""The SEATTLE app (nexthop.apps.seattle): Ethernet over a DHT among
several SDF switches joined by tunnel ports, with the DHT miss cached as a
drop tied to the pending lookup's state id."""

import random
import struct

import pytest

from nexthop.apps.seattle import ETHERTYPE, OP_LOOKUP, Fabric, message, owner_of


def host(s: int, p: int) -> bytes:
    """The MAC of the host on port ``p`` of switch ``s``."""
    return bytes([0x02, 0xAA, 0, s, 0, p])


def frame(dst: bytes, src: bytes, seq: int = 0) -> bytes:
    return dst + src + struct.pack("!H", 0x0800) + seq.to_bytes(4, "big") + b"\0" * 42


def where(d):
    return [(x.switch, x.port) for x in d]


def announce(f: Fabric) -> None:
    """Every host sends one broadcast: its switch learns it and publishes it."""
    for s in range(f.switches):
        for p in range(f.hosts_per_switch):
            f.send(s, p, frame(b"\xff" * 6, host(s, p)))


def test_locations_live_at_their_owners_and_frames_cross_one_tunnel():
    f = Fabric(switches=4, hosts_per_switch=3)
    announce(f)
    macs = [host(s, p) for s in range(4) for p in range(3)]
    for m in macs:
        owner = owner_of(m, 4)
        assert f.apps[owner].directory[m] == m[3]
        for s in range(4):
            if s != owner:
                assert m not in f.apps[s].directory
    # Every switch owns a share (12 MACs over 4 switches).
    assert sum(len(a.directory) for a in f.apps) == 12
    # Unicast between hosts on different switches: delivered to exactly the
    # destination's port, one tunnel hop for the data.
    # The first frame to a MAC switch 0 has not resolved is the miss: it is
    # dropped and sends the lookup, answered at once here (nothing held).
    f.tunnel_frames = f.dht_frames = 0
    assert f.send(0, 1, frame(host(3, 2), host(0, 1))) == []
    asked = 0 if owner_of(host(3, 2), 4) == 0 else 2  # lookup + resolve
    assert (f.tunnel_frames, f.dht_frames) == (asked, asked)
    for i in range(1, 4):
        got = f.send(0, 1, frame(host(3, 2), host(0, 1), i))
        assert where(got) == [(3, 2)]
    # One tunnel hop per frame, no more DHT traffic.
    assert (f.tunnel_frames, f.dht_frames) == (asked + 3, asked)
    # Same switch: no tunnel.
    f.tunnel_frames = 0
    assert where(f.send(2, 0, frame(host(2, 1), host(2, 0)))) == [(2, 1)]
    assert f.tunnel_frames == 0


def test_a_dht_miss_is_a_cached_drop_until_the_lookup_answers():
    f = Fabric(switches=4, hosts_per_switch=2, hold_dht=True)
    # Publications held too: release them so the owners know everyone.
    announce(f)
    f.release()
    # A destination whose owner is not switch 0: the lookup must travel.
    dst = next(host(s, p) for s in (1, 2, 3) for p in (0, 1) if owner_of(host(s, p), 4) != 0)
    src = host(0, 0)
    c0 = f.nodes[0].counters()
    assert f.send(0, 0, frame(dst, src, 0)) == []  # the miss: lookup sent, dropped
    assert len(f.held) == 1 and f.held[0][2][14] == OP_LOOKUP
    app = f.apps[0]
    assert dst in app.pending
    for i in range(1, 6):
        assert f.send(0, 0, frame(dst, src, i)) == []
    c1 = f.nodes[0].counters()
    # One app call for the lookup, one that installed the drop; the other 4
    # frames hit the cached drop without reaching the app.
    assert app.counters.lookups == 1
    assert app.counters.pending_drops == 2
    assert c1["app_calls"] - c0["app_calls"] == 2
    assert c1["hits"] - c0["hits"] == 4
    # The answer arrives: the pending state is removed, the drop revoked.
    f.release()
    assert dst not in app.pending
    got = f.send(0, 0, frame(dst, src, 9))
    assert where(got) == [(dst[3], dst[5])]
    assert got[0].frame == frame(dst, src, 9)


def test_a_host_that_moves_is_reached_at_its_new_switch_only():
    f = Fabric(switches=4, hosts_per_switch=2)
    announce(f)
    mover = host(1, 0)
    # Switches 0, 2 and 3 learn where it is and cache decisions to it.
    for s in (0, 2, 3):
        f.send(s, 1, frame(mover, host(s, 1)))  # the miss, unless s owns it
        assert where(f.send(s, 1, frame(mover, host(s, 1), 1))) == [(1, 0)]
        assert where(f.send(s, 1, frame(mover, host(s, 1), 2))) == [(1, 0)]
    # It moves to port 1 of switch 3 and speaks (a broadcast).
    f.send(3, 1, frame(b"\xff" * 6, mover, 2))
    assert f.apps[owner_of(mover, 4)].directory[mover] == 3
    assert mover not in f.apps[1].local
    assert f.apps[1].counters.moves == 1
    # Every cached decision toward switch 1 was revoked: frames now go to 3.
    for s in (0, 2):
        assert where(f.send(s, 1, frame(mover, host(s, 1), 3))) == [(3, 1)]
    assert where(f.send(3, 0, frame(mover, host(3, 0), 4))) == [(3, 1)]
    # A frame still tunnelled to switch 1 (in flight before the move) is
    # dropped there, not delivered to the old port.
    stale = frame(mover, host(0, 1), 5)
    assert f.nodes[1].process(f.apps[1].tunnel_to[0], stale) == []
    assert f.apps[1].counters.unknown_drops == 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cached_fabric_matches_the_uncached_oracle(seed):
    rng = random.Random(seed)
    cached = Fabric(switches=4, hosts_per_switch=3)
    oracle = Fabric(switches=4, hosts_per_switch=3, caching=False)
    hosts = [(s, p) for s in range(4) for p in range(3)]
    # Hosts (on 9 of the 12 ports) are where they are until a random move.
    at = {host(s, p): (s, p) for s, p in rng.sample(hosts, 9)}
    for i in range(1500):
        r = rng.random()
        src = rng.choice(list(at))
        s, p = at[src]
        if r < 0.02:
            # Move: a free port elsewhere.
            taken = set(at.values())
            free = [h for h in hosts if h not in taken]
            if free:
                at[src] = rng.choice(free)
                s, p = at[src]
            dst = b"\xff" * 6
        elif r < 0.1:
            dst = b"\xff" * 6
        else:
            dst = rng.choice(list(at))
        fr = frame(dst, src, i)
        a = cached.send(s, p, fr)
        b = oracle.send(s, p, fr)
        assert where(a) == where(b), f"frame {i}"
        assert [x.frame for x in a] == [x.frame for x in b]
        if rng.random() < 0.01:
            now = i / 100
            cached.tick(now)
            oracle.tick(now)
    c = [n.counters() for n in cached.nodes]
    assert sum(x["hits"] for x in c) > 500, c
    # Once every location is known, unicast is delivered where the host is.
    for dst, (ds, dp) in at.items():
        src = next(h for h in at if at[h][0] != ds)
        s, p = at[src]
        cached.send(s, p, frame(dst, src))
        assert where(cached.send(s, p, frame(dst, src))) == [(ds, dp)]


def test_bad_dht_messages_are_counted_and_change_nothing():
    f = Fabric(switches=3, hosts_per_switch=2)
    announce(f)
    before = [dict(a.directory) for a in f.apps]
    t = f.apps[0].tunnel_to[1]
    bad = [
        message(1, 0, 9, host(1, 0), 1),  # unknown op
        message(1, 0, 1, host(1, 0), 1)[:20],  # truncated
        message(1, 0, 3, host(1, 0), 77),  # a switch that does not exist
    ]
    # A publish to a switch that does not own the MAC, and one claiming a
    # location other than its sender.
    m = next(host(s, p) for s in range(3) for p in range(2) if owner_of(host(s, p), 3) != 0)
    bad.append(message(1, 0, 1, m, 1))
    m0 = next(host(s, p) for s in range(3) for p in range(2) if owner_of(host(s, p), 3) == 0)
    bad.append(message(1, 0, 1, m0, 2))
    for b in bad:
        assert f.nodes[0].process(t, b) == []
    assert f.apps[0].counters.bad_messages == len(bad)
    assert [dict(a.directory) for a in f.apps] == before
    assert int.from_bytes(bad[0][12:14], "big") == ETHERTYPE


def test_make_app_is_one_switch_that_never_floods_unknown_unicast():
    from nexthop.apps.seattle import make_app
    from nexthop.sdf import Switch

    sw = Switch(make_app(), [0, 1, 2, 3])
    a, b = host(0, 0), host(0, 1)
    sw.process(0, frame(b"\xff" * 6, a))  # a learned on port 0
    # To b, not yet seen: a miss (no flood), then a cached drop.
    assert sw.process(0, frame(b, a, 1)) == []
    assert sw.process(0, frame(b, a, 2)) == []
    sw.process(1, frame(b"\xff" * 6, b))  # b appears: the drop is revoked
    assert [p for p, _ in sw.process(0, frame(b, a, 3))] == [1]
    assert [p for p, _ in sw.process(1, frame(a, b, 4))] == [0]


def test_the_app_file_runs_over_pcap_through_the_pipeline(tmp_path):
    """``python -m nexthop.sdf run --app seattle.py`` (one switch, ports 0-3):
    hosts learned from broadcasts, unicast between them delivered, frames to
    a MAC never seen dropped (no flooding)."""
    import json
    import subprocess
    import sys

    import nexthop.apps.seattle as seattle
    from test_sdf import read_pcap, write_pcap

    a, b, ghost = host(0, 0), host(0, 1), host(9, 9)
    write_pcap(tmp_path / "p0.pcap", [frame(b"\xff" * 6, a, 0), frame(ghost, a, 2), frame(b, a, 3)])
    write_pcap(tmp_path / "p1.pcap", [frame(b"\xff" * 6, b, 1), frame(a, b, 4)])
    r = subprocess.run(
        [sys.executable, "-m", "nexthop.sdf", "run", "--app", seattle.__file__,
         "--in-pcap", f"0={tmp_path / 'p0.pcap'}", "--in-pcap", f"1={tmp_path / 'p1.pcap'}",
         "--out-dir", str(tmp_path / "out"), "--json"],
        capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["frames_in"] == 5
    to0 = read_pcap(tmp_path / "out" / "port-0.pcap")
    to1 = read_pcap(tmp_path / "out" / "port-1.pcap")
    # Port 1 got a's broadcast and a's unicast to b; port 0 b's broadcast
    # and b's unicast to a; the frame to the ghost went nowhere.
    assert frame(b, a, 3) in to1 and frame(b"\xff" * 6, a, 0) in to1
    assert frame(a, b, 4) in to0 and frame(b"\xff" * 6, b, 1) in to0
    assert all(f[:6] != ghost for f in to0 + to1)
    for other in ("port-2.pcap", "port-3.pcap"):
        p = tmp_path / "out" / other
        if p.exists():
            assert all(f[:6] != ghost for f in read_pcap(p))


def test_a_switch_nobody_set_up_adds_its_tunnels_at_its_first_packet():
    """Where no driver calls ``add_tunnels`` (``python -m nexthop.sdf run``,
    the OVS backend), the first packet adds one tunnel port per peer, each
    with its ``peer`` property, and a broadcast goes out of them."""
    from nexthop.apps.seattle import SeattleSwitch
    from nexthop.sdf import Switch

    app = SeattleSwitch(0, 3, [1])
    sw = Switch(app, [1])
    out = sw.process(1, frame(b"\xff" * 6, host(0, 1)))
    assert sorted(app.tunnel_to) == [1, 2]
    ports = sorted(app.peer_of)
    assert ports == [2, 3]  # numbered after the host port
    props = sw.control(lambda ctl: [ctl.get_properties(p) for p in ports])
    assert props == [{"peer": "1"}, {"peer": "2"}]
    assert sorted(p for p, _ in out) == ports
    # Idempotent: a second packet (or a tick) adds none.
    sw.process(1, frame(b"\xff" * 6, host(0, 1), 1))
    sw.tick(1.0)
    assert sorted(app.peer_of) == ports


def test_python_m_nexthop_sdf_refuses_bad_ovs_flags():
    import subprocess
    import sys

    import nexthop.apps.seattle as seattle

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "nexthop.sdf", "run", "--app", seattle.__file__, *args],
            capture_output=True, text=True, timeout=30,
        )

    r = run("--backend", "ovs")
    assert r.returncode == 2 and "--ovs-ports" in r.stderr
    r = run("--backend", "ovs", "--ovs-ports", "1", "--port", "1=lo")
    assert r.returncode == 2 and "excludes" in r.stderr
    r = run("--backend", "ovs", "--ovs-ports", "1", "--ovs-tunnel", "1=t1,patch,peer=x")
    assert r.returncode == 1 and "--ovs-tunnel needs --ovs-bridge" in r.stderr
    r = run("--backend", "ovs", "--ovs-ports", "1", "--ovs-tunnel", "nospec")
    assert r.returncode == 2 and "PEER=NAME,TYPE" in r.stderr
