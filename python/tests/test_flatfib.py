"""nexthop.FlatFib against a dict, the CLI's FIB directories, bad input and threads."""

import random
import threading

import numpy as np
import pytest

import nexthop

ACTIONS = ["1", "2", "3", "1+3", "2+4+7", "drop", "controller"]


def names_of(key_type, rng, n):
    out = set()
    while len(out) < n:
        if key_type == "u64":
            out.add(str(rng.getrandbits(64)))
        elif key_type == "ipv4":
            out.add(".".join(str(rng.randrange(256)) for _ in range(4)))
        elif key_type == "ipv6":
            import ipaddress

            out.add(str(ipaddress.IPv6Address(rng.getrandbits(128))))
        elif key_type == "mac":
            out.add(":".join(f"{rng.randrange(256):02x}" for _ in range(6)))
        else:
            out.add("/".join(f"c{rng.randrange(10**6)}" for _ in range(rng.randrange(1, 5))))
    return sorted(out)


@pytest.mark.parametrize("key_type", ["u64", "ipv4", "ipv6", "mac", "str"])
def test_random_tables_match_a_dict(key_type):
    rng = random.Random(key_type)
    names = names_of(key_type, rng, 3000)
    table = {n: rng.choice(ACTIONS) for n in names}
    fib = nexthop.FlatFib.build(table, key_type)
    assert len(fib) == len(table) and fib.key_type == key_type
    assert fib.lookup_many(names) == [table[n] for n in names]
    assert all(fib.lookup(n) == table[n] for n in names[:300])
    assert dict(fib.items()) == table
    raw = fib.lookup_many_raw(names)
    acts = fib.actions()
    assert [acts[i] for i in raw.tolist()] == [table[n] for n in names]
    # Updates follow the dict.
    fresh = [n for n in names_of(key_type, random.Random(1), 600) if n not in table]
    for i, n in enumerate(fresh):
        a = ACTIONS[i % len(ACTIONS)]
        fib.insert(n, a)
        table[n] = a
    for n in names[:500]:
        fib.delete(n)
        del table[n]
    for n in names[500:900]:
        fib.update(n, "drop")
        table[n] = "drop"
    live = sorted(table)
    assert fib.lookup_many(live) == [table[n] for n in live]
    assert all(n not in fib for n in names[:500]) and all(n in fib for n in live[:100])
    assert fib.get(live[0]) == table[live[0]] and fib.get(names[0]) is None
    assert fib.stats()["names"] == len(table)


def test_u64_numpy_raw_lookups():
    rng = random.Random(5)
    keys = sorted({rng.getrandbits(64) for _ in range(5000)})
    table = {str(k): rng.choice(ACTIONS) for k in keys}
    fib = nexthop.FlatFib.build(table, "u64")
    arr = np.array(keys, dtype=np.uint64)
    raw = fib.lookup_many_raw(arr)
    assert raw.dtype == np.uint64
    acts = fib.actions()
    assert [acts[i] for i in raw.tolist()] == [table[str(k)] for k in keys]
    assert np.array_equal(fib.lookup_many_raw(arr[::3]), raw[::3])
    with pytest.raises(TypeError, match="key type u64"):
        nexthop.FlatFib.build({"1.2.3.4": "1"}, "ipv4").lookup_many_raw(arr)
    with pytest.raises(TypeError):
        fib.lookup_many_raw(np.zeros(3, dtype=np.int32))


def test_check_bits_reject_alien_names():
    rng = random.Random(9)
    names = names_of("u64", rng, 2000)
    fib = nexthop.FlatFib.build({n: "1" for n in names}, "u64", check_bits=16)
    aliens = [n for n in names_of("u64", random.Random(10), 2000) if n not in names]
    got = fib.lookup_many(aliens)
    assert got.count("miss") > len(aliens) * 0.99
    raw = fib.lookup_many_raw(np.array([int(a) for a in aliens], dtype=np.uint64))
    assert (raw == nexthop.MISS).sum() == got.count("miss")
    assert fib.lookup_many(names) == ["1"] * len(names)


def test_cli_fib_directories_round_trip(tmp_path, cli):
    rng = random.Random(4)
    names = names_of("str", rng, 2000)
    table = {n: rng.choice(ACTIONS) for n in names}
    routes = tmp_path / "routes.txt"
    routes.write_text("".join(f"{n} {a}\n" for n, a in table.items()))
    d = tmp_path / "fib"
    cli("fib", "build", "--key-type", "str", "--routes", routes, "--out", d)
    fib = nexthop.FlatFib.open(d)
    assert fib.lookup_many(names) == [table[n] for n in names]
    fib.insert("new/name", "5")
    fib.delete(names[0])
    fib.update(names[1], "controller")
    gen = fib.save(d)
    assert gen == 2
    out = cli("fib", "lookup", "--fib", d, "new/name", names[1], names[2]).split()
    assert out == ["5", "controller", table[names[2]]]
    stats = cli("fib", "stats", "--fib", d, "--json")
    assert '"names": 2000' in stats
    again = nexthop.FlatFib.open(d)
    assert "new/name" in again and names[0] not in again
    # A directory Python builds from nothing opens in the CLI.
    d2 = tmp_path / "py-fib"
    nexthop.FlatFib.build([("aa:bb:cc:dd:ee:ff", "1+2")], "mac").save(d2)
    assert cli("fib", "lookup", "--fib", d2, "AA-BB-CC-DD-EE-FF").split() == ["1+2"]


def test_bad_input():
    fib = nexthop.FlatFib.build({"1": "1", "2": "drop"}, "u64")
    with pytest.raises(ValueError, match="invalid name 'x': expected a decimal or 0x-hexadecimal integer"):
        fib.lookup("x")
    with pytest.raises(ValueError, match=r"names\[1\]: invalid name '-3'"):
        fib.lookup_many(["1", "-3"])
    with pytest.raises(ValueError, match="pair 1: invalid name 'zz'"):
        nexthop.FlatFib.build([("1", "1"), ("zz", "2")], "u64")
    with pytest.raises(ValueError, match="pair 0: invalid action 'fly'"):
        nexthop.FlatFib.build([("1", "fly")], "u64")
    with pytest.raises(ValueError):
        nexthop.FlatFib.build([("1", "1"), ("1", "2")], "u64")
    with pytest.raises(ValueError, match="key type"):
        nexthop.FlatFib.build([], "float")
    with pytest.raises(ValueError, match="sizing"):
        nexthop.FlatFib.build([], "u64", sizing="huge")
    with pytest.raises(ValueError, match="invalid configuration"):
        nexthop.FlatFib.build([], "u64", value_bits=0)
    with pytest.raises(TypeError, match="pair 0"):
        nexthop.FlatFib.build([("1", 1)], "u64")
    with pytest.raises(ValueError, match="invalid name 'a b'"):
        nexthop.FlatFib.build([("a b", "1")], "str")
    # Refused updates raise UpdateError and change nothing.
    with pytest.raises(nexthop.UpdateError, match="1"):
        fib.insert("1", "3")
    with pytest.raises(nexthop.UpdateError):
        fib.delete("3")
    with pytest.raises(nexthop.UpdateError):
        fib.update("3", "1")
    with pytest.raises(ValueError, match="invalid action"):
        fib.insert("3", "1+")
    assert issubclass(nexthop.UpdateError, nexthop.Error)
    assert dict(fib.items()) == {"1": "1", "2": "drop"}
    # A full action table (value_bits 1: two ids) refuses a third action.
    small = nexthop.FlatFib.build({"1": "1", "2": "2"}, "u64", value_bits=1)
    with pytest.raises(nexthop.UpdateError):
        small.insert("3", "3")
    assert dict(small.items()) == {"1": "1", "2": "2"}


def test_bad_directories(tmp_path):
    with pytest.raises(OSError):
        nexthop.FlatFib.open(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises((OSError, nexthop.FormatError)):
        nexthop.FlatFib.open(tmp_path / "empty")
    d = tmp_path / "fib"
    nexthop.FlatFib.build({"1": "1"}, "u64").save(d)
    control = d / "current" / "control.bin"
    raw = bytearray(control.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    control.write_bytes(raw)
    with pytest.raises(nexthop.FormatError, match="control.bin"):
        nexthop.FlatFib.open(d)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(OSError, match="other"):
        nexthop.FlatFib.build({"1": "1"}, "u64").save(other)
    assert (other / "notes.txt").read_text() == "mine"


def test_batches_from_threads_while_another_updates():
    rng = random.Random(21)
    names = names_of("u64", rng, 5000)
    fib = nexthop.FlatFib.build({n: "1" for n in names}, "u64")
    stable = names[:4096]
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                if fib.lookup_many(stable) != ["1"] * len(stable):
                    errors.append("wrong answer")
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def writer():
        try:
            extra = [n for n in names_of("u64", random.Random(22), 3000) if n not in names]
            for n in extra:
                fib.insert(n, "2")
            for n in extra:
                fib.delete(n)
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
    assert errors == [] and len(fib) == len(names)


def test_open_while_another_thread_saves_new_generations(tmp_path):
    # Each save commits a new generation and prunes old ones; an open that
    # races it must still load a whole generation (old or new), never fail.
    d = tmp_path / "fib"
    names = names_of("u64", random.Random(23), 2000)
    fibs = [nexthop.FlatFib.build({n: str(a) for n in names}, "u64") for a in (1, 2)]
    fibs[0].save(d)
    stop = threading.Event()
    errors = []

    def saver():
        try:
            i = 0
            while not stop.is_set():
                fibs[i % 2].save(d)
                i += 1
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=saver)
    t.start()
    try:
        for _ in range(200):
            got = nexthop.FlatFib.open(d).lookup(names[0])
            assert got in ("1", "2")
    finally:
        stop.set()
        t.join()
    assert errors == []
