"""nexthop.Lpm against a per-length prefix dict, the CLI's table files, bad input and threads."""

import gzip
import ipaddress
import random
import threading

import numpy as np
import pytest

import nexthop
from conftest import PrefixOracle, data_file, read_asn_routes


def random_routes(rng, n4, n6):
    routes = {}
    for _ in range(n4):
        length = rng.choice([8, 12, 16, 19, 20, 22, 23, 24, 24, 24, 28, 32])
        a = rng.getrandbits(32) & (((1 << length) - 1) << (32 - length))
        routes[f"{ipaddress.IPv4Address(a)}/{length}"] = rng.randrange(1, 1000)
    for _ in range(n6):
        length = rng.choice([16, 29, 32, 40, 44, 48, 48, 56, 64, 128])
        a = rng.getrandbits(128) & (((1 << length) - 1) << (128 - length))
        routes[f"{ipaddress.IPv6Address(a)}/{length}"] = rng.randrange(1, 1000)
    # Nested prefixes: a shorter cover for some of them.
    for p in list(routes)[: n4 // 4]:
        n = ipaddress.ip_network(p)
        if n.prefixlen > 4:
            routes[str(n.supernet(new_prefix=n.prefixlen - 4))] = rng.randrange(1, 1000)
    return list(routes.items())


def addrs_near(rng, routes, n):
    """Addresses inside the prefixes (v4 and v6) plus uniformly random ones."""
    out4, out6 = [], []
    nets = [ipaddress.ip_network(p) for p, _ in routes]
    for _ in range(n):
        net = rng.choice(nets)
        host = rng.getrandbits(net.max_prefixlen - net.prefixlen) if net.prefixlen < net.max_prefixlen else 0
        a = int(net.network_address) | host
        (out4 if net.version == 4 else out6).append(a)
    out4 += [rng.getrandbits(32) for _ in range(n // 4)]
    out6 += [rng.getrandbits(128) for _ in range(n // 8)]
    return out4, out6


def v6_rows(addrs):
    return np.frombuffer(b"".join(a.to_bytes(16, "big") for a in addrs), dtype=np.uint8).reshape(-1, 16)


def check_against(lpm, oracle, a4, a6):
    got4 = lpm.lookup_many(np.array(a4, dtype=np.uint32))
    got6 = lpm.lookup_many(v6_rows(a6)) if a6 else np.zeros(0, dtype=np.uint32)
    assert got4.dtype == np.uint32 and got6.dtype == np.uint32
    for a, g in zip(a4, got4.tolist()):
        want = oracle.lookup(ipaddress.IPv4Address(a))
        assert g == (nexthop.NO_ROUTE if want is None else want), ipaddress.IPv4Address(a)
    for a, g in zip(a6, got6.tolist()):
        want = oracle.lookup(ipaddress.IPv6Address(a))
        assert g == (nexthop.NO_ROUTE if want is None else want), ipaddress.IPv6Address(a)
    # Single lookups agree with the batch.
    for a, g in list(zip(a4, got4.tolist()))[:500]:
        s = lpm.lookup(str(ipaddress.IPv4Address(a)))
        assert (nexthop.NO_ROUTE if s is None else s) == g
    for a, g in list(zip(a6, got6.tolist()))[:500]:
        s = lpm.lookup(str(ipaddress.IPv6Address(a)))
        assert (nexthop.NO_ROUTE if s is None else s) == g


def test_random_tables_match_the_oracle():
    for seed in range(3):
        rng = random.Random(seed)
        routes = random_routes(rng, 3000, 600)
        lpm = nexthop.Lpm.from_routes(routes)
        oracle = PrefixOracle(routes)
        assert len(lpm) == len(routes)
        assert sorted(lpm.routes()) == sorted(
            (str(ipaddress.ip_network(p)), nh) for p, nh in routes
        )
        a4, a6 = addrs_near(rng, routes, 8000)
        check_against(lpm, oracle, a4, a6)


def test_dict_input_and_later_pair_replaces():
    lpm = nexthop.Lpm.from_routes({"10.0.0.0/8": 1, "2001:db8::/32": 5})
    assert lpm.lookup("10.1.2.3") == 1 and lpm.lookup("2001:db8::7") == 5
    lpm = nexthop.Lpm.from_routes([("10.0.0.0/8", 1), ("10.0.0.0/8", 2)])
    assert lpm.lookup("10.9.9.9") == 2 and len(lpm) == 1
    assert nexthop.Lpm.from_routes([]).lookup("1.2.3.4") is None


def test_announce_and_withdraw_follow_the_oracle():
    rng = random.Random(7)
    routes = random_routes(rng, 2000, 300)
    lpm = nexthop.Lpm.from_routes(routes)
    oracle = PrefixOracle(routes)
    extra = random_routes(random.Random(8), 500, 100)
    for i, (p, nh) in enumerate(extra):
        assert lpm.announce(p, nh)
        oracle.announce(p, nh)
        if i % 3 == 0:
            q = routes[i][0]
            assert lpm.withdraw(q) == oracle.withdraw(q)
    assert lpm.withdraw("203.0.113.0/24") is (oracle.withdraw("203.0.113.0/24"))
    a4, a6 = addrs_near(rng, routes + extra, 6000)
    check_against(lpm, oracle, a4, a6)


def test_routeviews_ipv4_and_ipv6(tmp_path):
    p4 = data_file("routeviews-20151101-ipv4.txt.gz")
    p6 = data_file("routeviews-20151101-ipv6.txt.gz")
    routes = read_asn_routes(p4) + read_asn_routes(p6)
    lpm4 = nexthop.Lpm.from_file(p4, asn=True)
    assert len(lpm4) == 606138
    lpm = nexthop.Lpm.from_routes(routes)
    oracle = PrefixOracle(routes)
    rng = random.Random(2015)
    a4, a6 = addrs_near(rng, rng.sample(routes, 20000), 20000)
    check_against(lpm, oracle, a4, a6)
    got = lpm4.lookup_many(np.array(a4, dtype=np.uint32))
    assert np.array_equal(got, lpm.lookup_many(np.array(a4, dtype=np.uint32)))


def test_linx_update_stream_matches_the_oracle():
    rng = random.Random(14)
    routes = read_asn_routes(data_file("routeviews-20151101-ipv4.txt.gz"))
    lpm = nexthop.Lpm.from_routes(routes)
    oracle = PrefixOracle(routes)
    path = data_file("linx-bgp-updates-20141217-ipv4.txt.gz")
    counts = lpm.apply_updates(path)
    ann = wd = absent = 0
    with gzip.open(path, "rt") as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            if t[1] in "aA":
                nh = int(ipaddress.IPv4Address(t[3])) if "." in t[3] else int(t[3])
                oracle.announce(t[2], nh)
                ann += 1
            elif oracle.withdraw(t[2]):
                wd += 1
            else:
                absent += 1
    assert counts == {"announces": ann, "withdraws": wd, "absent": absent}
    a4, _ = addrs_near(rng, rng.sample(routes, 5000), 10000)
    check_against(lpm, oracle, a4, [])


def test_cli_table_files_round_trip(tmp_path, cli):
    rng = random.Random(3)
    routes = random_routes(rng, 1500, 300)
    rfile = tmp_path / "routes.txt"
    rfile.write_text("".join(f"{p} {nh}\n" for p, nh in routes))
    table = tmp_path / "t.lpm"
    cli("lpm", "build", "--routes", rfile, "--out", table)
    from_cli = nexthop.Lpm.load(table)
    ours = nexthop.Lpm.from_file(rfile)
    a4, a6 = addrs_near(rng, routes, 3000)
    arr = np.array(a4, dtype=np.uint32)
    assert np.array_equal(from_cli.lookup_many(arr), ours.lookup_many(arr))
    # Python writes, the CLI reads.
    ours.announce("198.51.100.0/24", 77)
    saved = tmp_path / "py.lpm"
    ours.save(saved)
    sample = [str(ipaddress.IPv4Address(a)) for a in a4[:300]] + ["198.51.100.9"]
    out = cli("lpm", "lookup", "--table", saved, *sample).split()
    want = [ours.lookup(s) for s in sample]
    assert out == ["-" if w is None else str(w) for w in want]
    assert out[-1] == "77"
    # The ASN route files of pyasn.
    asn = tmp_path / "asn.txt"
    asn.write_text("192.0.2.0/24\t64500\n2001:db8::/32\t13335\n")
    lpm = nexthop.Lpm.from_file(asn, asn=True)
    assert lpm.lookup("192.0.2.1") == 64500 % 250 + 1
    assert lpm.lookup("2001:db8::1") == 13335 % 250 + 1
    s = lpm.stats(samples=1000)
    assert s["ipv4"]["prefixes"] == 1 and s["ipv6"]["prefixes"] == 1
    assert s["ipv4"]["lookup_bytes"] > 0 and isinstance(s["ipv4"]["groups"], list)


def test_non_contiguous_input_is_read_correctly():
    lpm = nexthop.Lpm.from_routes([("10.0.0.0/8", 1), ("2001:db8::/32", 2)])
    a = np.array([int(ipaddress.IPv4Address("10.1.1.1")), 5] * 10, dtype=np.uint32)[::2]
    assert lpm.lookup_many(a).tolist() == [1] * 10
    rows = v6_rows([int(ipaddress.IPv6Address("2001:db8::1")), 1] * 3)[::2]
    assert lpm.lookup_many(rows).tolist() == [2] * 3
    assert lpm.lookup_many(np.zeros(0, dtype=np.uint32)).tolist() == []


@pytest.mark.parametrize(
    "pairs, message",
    [
        ([("10.0.0.0", 1)], 'pair 0: prefix "10.0.0.0" has no /length'),
        ([("10.0.0.0/8", 1), ("10.0.0.1/8", 1)], 'pair 1: prefix "10.0.0.1/8" has bits set after its length'),
        ([("10.0.0.0/33", 1)], 'pair 0: bad prefix length "33"'),
        ([("fish/8", 1)], 'pair 0: bad address "fish"'),
        ([("2001:db8::/129", 1)], 'pair 0: bad prefix length "129"'),
        ([("10.0.0.0/8", 4294967295)], 'pair 0: bad next hop "4294967295"'),
        ([("10.0.0.0/8", -1)], 'pair 0: bad next hop "-1"'),
    ],
)
def test_bad_routes_raise_value_error(pairs, message):
    with pytest.raises(ValueError) as e:
        nexthop.Lpm.from_routes(pairs)
    assert str(e.value).startswith(message)


def test_bad_input_types_and_shapes():
    lpm = nexthop.Lpm.from_routes([("10.0.0.0/8", 1)])
    with pytest.raises(TypeError, match="pair 0"):
        nexthop.Lpm.from_routes([("10.0.0.0/8",)])
    with pytest.raises(TypeError, match="pair 0"):
        nexthop.Lpm.from_routes([(10, 1)])
    with pytest.raises(TypeError):
        nexthop.Lpm.from_routes(5)
    with pytest.raises(ValueError, match='bad address "10.0.0"'):
        lpm.lookup("10.0.0")
    with pytest.raises(ValueError, match="bad address"):
        lpm.lookup("")
    with pytest.raises(TypeError, match="int64"):
        lpm.lookup_many(np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="float"):
        lpm.lookup_many(np.zeros(3, dtype=np.float64))
    with pytest.raises(TypeError, match="list"):
        lpm.lookup_many([1, 2, 3])
    with pytest.raises(TypeError, match="2-dimensional uint32"):
        lpm.lookup_many(np.zeros((3, 4), dtype=np.uint32))
    with pytest.raises(ValueError, match=r"\(n, 16\) uint8 array, got shape \(3, 4\)"):
        lpm.lookup_many(np.zeros((3, 4), dtype=np.uint8))
    with pytest.raises(ValueError, match="bits set after its length"):
        lpm.announce("10.0.0.1/8", 3)
    with pytest.raises(ValueError, match="bad next hop"):
        lpm.announce("10.0.0.0/8", 2**32)
    with pytest.raises(ValueError, match="has no /length"):
        lpm.withdraw("10.0.0.0")
    with pytest.raises(ValueError, match="v6_levels"):
        nexthop.Lpm.from_routes([], v6_levels=0)
    assert lpm.lookup("10.0.0.1") == 1 and len(lpm) == 1


def test_bad_files(tmp_path):
    with pytest.raises(OSError, match="nope.lpm"):
        nexthop.Lpm.load(tmp_path / "nope.lpm")
    junk = tmp_path / "junk.lpm"
    junk.write_bytes(b"this is not a table file at all" * 4)
    with pytest.raises(nexthop.FormatError, match="junk.lpm"):
        nexthop.Lpm.load(junk)
    lpm = nexthop.Lpm.from_routes([("10.0.0.0/8", 1), ("2001:db8::/32", 2)])
    good = tmp_path / "good.lpm"
    lpm.save(good)
    raw = bytearray(good.read_bytes())
    for cut in (len(raw) // 2, len(raw) - 1, 8):
        bad = tmp_path / f"cut{cut}.lpm"
        bad.write_bytes(raw[:cut])
        with pytest.raises(nexthop.FormatError):
            nexthop.Lpm.load(bad)
    flipped = bytearray(raw)
    flipped[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "flipped.lpm"
    bad.write_bytes(flipped)
    with pytest.raises(nexthop.FormatError):
        nexthop.Lpm.load(bad)
    assert issubclass(nexthop.FormatError, nexthop.Error)
    routes = tmp_path / "r.txt"
    routes.write_text("10.0.0.0/8 1\n10.0.0.0/33 2\n")
    with pytest.raises(ValueError, match=r"r.txt:2: bad prefix length \"33\""):
        nexthop.Lpm.from_file(routes)
    with pytest.raises(OSError, match="absent.txt"):
        nexthop.Lpm.from_file(tmp_path / "absent.txt")
    # A malformed update stream changes nothing.
    updates = tmp_path / "u.txt"
    updates.write_text("1 a 192.0.2.0/24 7\n2 w 10.0.0.0/8\n3 x 10.0.0.0/8\n")
    with pytest.raises(ValueError, match=r"u.txt:3: bad action \"x\""):
        lpm.apply_updates(updates)
    assert lpm.lookup("10.0.0.1") == 1 and lpm.lookup("192.0.2.1") is None


def test_batches_from_threads_while_another_updates():
    rng = random.Random(11)
    routes = [r for r in random_routes(rng, 4000, 0) if not r[0].startswith("203.0.113.")]
    lpm = nexthop.Lpm.from_routes(routes)
    stable = [("203.0.113.0/24", 9)]
    for p, nh in stable:
        lpm.announce(p, nh)
    probe = np.array([int(ipaddress.IPv4Address("203.0.113.5"))] * 4096, dtype=np.uint32)
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                out = lpm.lookup_many(probe)
                if not (out == 9).all():
                    errors.append(out[:4])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def writer():
        try:
            churn = random_routes(random.Random(12), 800, 0)
            for _ in range(3):
                for p, nh in churn:
                    if not p.startswith("203.0.113."):
                        lpm.announce(p, nh)
                for p, _ in churn:
                    if not p.startswith("203.0.113."):
                        lpm.withdraw(p)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    readers = [threading.Thread(target=reader) for _ in range(4)]
    w = threading.Thread(target=writer)
    for t in readers:
        t.start()
    w.start()
    w.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
