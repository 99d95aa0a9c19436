"""NDN names and packets: byte-exact round trips with python-ndn 0.5.2."""

import random

import pytest

import nexthop

# python-ndn 0.5.2: scripts/test.sh installs it into the test environment.
import ndn  # noqa: E402,F401
from ndn.encoding import InterestParam, MetaInfo, Name, make_data, make_interest, parse_data, parse_interest  # noqa: E402
from ndn.encoding.ndnlp_v2 import make_network_nack, parse_lp_packet_v2  # noqa: E402
from ndn.security import DigestSha256Signer  # noqa: E402


def random_uri(rng):
    comps = []
    for _ in range(rng.randrange(1, 6)):
        kind = rng.randrange(6)
        if kind == 0:
            comps.append("".join("%%%02X" % rng.randrange(256) for _ in range(rng.randrange(1, 5))))
        elif kind == 1:
            comps.append(f"seg={rng.randrange(1 << 20)}")
        elif kind == 2:
            comps.append(f"v={rng.randrange(1 << 40)}")
        else:
            c = "".join(rng.choice("abcxyz0129-._~") for _ in range(rng.randrange(1, 9)))
            # A component of only periods is written with three extra ones.
            comps.append(c if c.strip(".") else "a" + c)
    return "/" + "/".join(comps)


def test_names_encode_like_python_ndn():
    rng = random.Random(1)
    for _ in range(500):
        uri = random_uri(rng)
        wire = bytes(Name.encode(Name.from_str(uri)))
        assert nexthop.name_to_wire(uri) == wire, uri
        canon = nexthop.name_from_wire(wire)
        assert nexthop.name_to_wire(canon) == wire
        assert nexthop.canonical_uri(uri) == canon
    assert nexthop.canonical_uri("ndn:/a/%41") == "/a/A"


def test_interests_round_trip_byte_exactly():
    rng = random.Random(2)
    for _ in range(300):
        uri = random_uri(rng)
        p = InterestParam(
            can_be_prefix=rng.random() < 0.5,
            must_be_fresh=rng.random() < 0.5,
            nonce=rng.getrandbits(32),
            lifetime=rng.choice([None, 1, 4000, 1 << 20]),
            hop_limit=rng.choice([None, 0, 64, 255]),
            forwarding_hint=rng.choice([[], ["/hint/a"], ["/h1", "/h2/x"]]),
        )
        app = rng.choice([None, b"", bytes(rng.getrandbits(8) for _ in range(20))])
        wire = bytes(make_interest(uri, p, app_param=app))
        ours = nexthop.Interest.decode(wire)
        assert ours.encode() == wire, uri
        assert ours.nonce == p.nonce and ours.can_be_prefix == p.can_be_prefix
        assert ours.must_be_fresh == p.must_be_fresh and ours.lifetime_ms == p.lifetime
        assert ours.hop_limit == p.hop_limit
        assert (ours.app_parameters is None) == (app is None)
        if app is None:
            # Built from the fields, our encoding is python-ndn's.
            built = nexthop.Interest(
                uri, p.can_be_prefix, p.must_be_fresh, p.nonce, p.lifetime, p.hop_limit,
                None, p.forwarding_hint,
            )
            assert built.encode() == wire
            assert built == ours
        name, params, _, _ = parse_interest(ours.encode())
        assert bytes(Name.encode(name)) == nexthop.name_to_wire(ours.name)


def test_data_round_trips_byte_exactly():
    rng = random.Random(3)
    signer = DigestSha256Signer()
    for _ in range(300):
        uri = random_uri(rng)
        # At least one MetaInfo field: an empty MetaInfo is the known
        # difference below.
        meta = MetaInfo(
            content_type=rng.choice([0, 2]),
            freshness_period=rng.choice([None, 0, 1000]),
        )
        content = rng.choice([None, b"", bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300)))])
        wire = bytes(make_data(uri, meta, content, signer=signer))
        ours = nexthop.Data.decode(wire)
        assert ours.encode() == wire, uri
        assert ours.content == (None if content is None else content)
        assert ours.content_type == meta.content_type
        assert ours.freshness_period_ms == meta.freshness_period
        assert ours.signature_type == 0
        built = nexthop.Data(
            uri, content, meta.content_type, meta.freshness_period, 0, ours.signature_value
        )
        assert built.encode() == wire
        name, m, c, sig = parse_data(built.encode())
        assert (bytes(c) if c is not None else None) == content


def test_empty_metainfo_round_trips_byte_exactly():
    # python-ndn writes an empty MetaInfo element (14 00) for MetaInfo(content_type=None).
    for content in (None, b"", b"x"):
        wire = bytes(make_data("/a", MetaInfo(content_type=None), content, signer=DigestSha256Signer()))
        assert b"\x14\x00" in wire
        ours = nexthop.Data.decode(wire)
        assert ours.encode() == wire
        assert ours.content_type is None and ours.freshness_period_ms is None
        name, meta, c, sig = parse_data(ours.encode())
        assert (bytes(c) if c is not None else None) == content
        assert bytes(sig.signature_value_buf) == ours.signature_value


def test_nacks_and_lp_packets():
    interest = bytes(make_interest("/a/b", InterestParam(nonce=7, lifetime=100)))
    for reason in (50, 100, 150):
        wire = bytes(make_network_nack(interest, reason))
        ours = nexthop.LpPacket.decode(wire)
        assert ours.is_nack and ours.nack_reason == reason and ours.fragment == interest
        assert ours.encode() == wire
        assert nexthop.LpPacket(interest, nack_reason=reason).encode() == wire
    lp = nexthop.LpPacket(interest, pit_token=b"\x01\x02\x03\x04")
    parsed = parse_lp_packet_v2(lp.encode())
    assert bytes(parsed.pit_token) == b"\x01\x02\x03\x04" and bytes(parsed.fragment) == interest
    assert nexthop.LpPacket.decode(lp.encode()) == lp


def test_bad_packets_raise_value_error():
    interest = bytes(make_interest("/a/b", InterestParam(nonce=7, lifetime=100)))
    for cut in range(len(interest)):
        with pytest.raises(ValueError, match="invalid Interest"):
            nexthop.Interest.decode(interest[:cut])
    with pytest.raises(ValueError, match="invalid Data"):
        nexthop.Data.decode(interest)
    with pytest.raises(ValueError, match="invalid LpPacket"):
        nexthop.LpPacket.decode(b"\x64\x05\x50")
    with pytest.raises(ValueError, match="invalid name"):
        nexthop.canonical_uri("/a/%zz")
    with pytest.raises(ValueError, match="invalid Name"):
        nexthop.name_from_wire(b"\x07\x05\x08")
    with pytest.raises(ValueError, match="PitToken"):
        nexthop.LpPacket(b"", pit_token=b"")
    rng = random.Random(4)
    for _ in range(2000):
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
        for f in (nexthop.Interest.decode, nexthop.Data.decode, nexthop.LpPacket.decode, nexthop.name_from_wire):
            try:
                f(junk)
            except ValueError:
                pass
