"""nexthop.Controller against a running `nexthop controller` (and a forwarder following it)."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

import nexthop
from conftest import ROOT

# Port 1 only: the forwarder of the last test maps just ports 0 and 1.
ROUTES = "".join(f"02:00:00:00:00:{i:02x} {('1', 'drop')[i % 2]}\n" for i in range(1, 21))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exe() -> str:
    return str(os.environ.get("NEXTHOP_BIN", ROOT / "target" / "release" / "nexthop"))


def wait_for(pred, what: str, timeout: float = 20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            v = pred()
            if v:
                return v
        except (ConnectionError, OSError):
            pass
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def controller(cli, tmp_path):
    """A `nexthop controller` on loopback serving a 20-name MAC FIB: (addr, key file, process)."""
    (tmp_path / "routes.txt").write_text(ROUTES)
    cli("fib", "build", "--key-type", "mac", "--routes", tmp_path / "routes.txt", "--out", tmp_path / "fib")
    key = tmp_path / "key"
    key.write_text("python-admin-test-secret-0123456789\n")
    key.chmod(0o600)
    addr = f"127.0.0.1:{free_port()}"
    p = subprocess.Popen(
        [exe(), "--log-level", "warn", "controller", "--fib", str(tmp_path / "fib"),
         "--key-file", str(key), "--listen", addr],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(lambda: nexthop.Controller(addr, key, timeout=2).stats(), "the controller")
        yield addr, key, p
    finally:
        p.terminate()
        p.wait(10)


def test_changes_are_applied_and_counted(controller, cli):
    addr, key, _ = controller
    with nexthop.Controller(addr, key) as c:
        assert repr(c) == f'nexthop.Controller("{addr}")' and c.addr == addr
        r = c.add("02:00:00:00:01:00", "1+3")
        assert (r["changes"], r["version"], r["names"]) == (1, 1, 21)
        assert c.change("02:00:00:00:01:00", "drop")["version"] == 2
        assert c.delete("02:00:00:00:00:01")["names"] == 20
        r = c.push([("add", "02:00:00:00:02:00", "controller"), ("-", "02:00:00:00:00:02"),
                    ("=", "02:00:00:00:00:03", "7")])
        assert (r["changes"], r["version"], r["names"]) == (3, 6, 20)
        r = c.push("# a changes file\n+ 02:00:00:00:03:00 2\n- 02:00:00:00:00:04\n")
        assert (r["changes"], r["version"]) == (2, 8)
        assert c.push([])["changes"] == 0
        s = c.stats()
        assert s["version"] == 8 and s["names"] == 20
        assert s["pushes"] == 6 and s["pushes_refused"] == 0
        assert all(isinstance(v, int) for v in s.values())
    # The CLI reads the same counters.
    theirs = json.loads(cli("controller", "stats", "--connect", addr, "--key-file", key, "--json"))
    assert theirs["version"] == 8 and theirs["pushes"] == 6
    out = cli("controller", "push", "--connect", addr, "--key-file", key, "-",
              stdin="+ 02:00:00:00:04:00 1\n")
    assert out.startswith("pushed 1 changes: version 9")


def test_refused_changes_leave_the_fib_unchanged(controller):
    addr, key, _ = controller
    c = nexthop.Controller(addr, key)
    with pytest.raises(nexthop.UpdateError, match="^line 1: .*02:00:00:00:00:01"):
        c.add("02:00:00:00:00:01", "2")
    with pytest.raises(nexthop.UpdateError, match="^line 2:"):
        c.push([("+", "02:00:00:00:05:00", "1"), ("-", "02:00:00:00:05:01")])
    with pytest.raises(nexthop.UpdateError, match="^line 3:"):
        c.push("+ 02:00:00:00:05:00 1\n# comment\n+ not-a-mac 1\n")
    assert isinstance(nexthop.UpdateError("x"), nexthop.Error)
    s = c.stats()
    assert (s["version"], s["names"], s["pushes"], s["pushes_refused"]) == (0, 20, 0, 3)
    # Bad input is refused before anything is sent.
    with pytest.raises(ValueError, match="change 0: unknown operation"):
        c.push([("insert", "02:00:00:00:05:00", "1")])
    with pytest.raises(ValueError, match="change 1: name"):
        c.push([("+", "02:00:00:00:05:00", "1"), ("+", "a b", "1")])
    with pytest.raises(ValueError, match="action"):
        c.add("02:00:00:00:05:00", "1\n- 02:00:00:00:00:01")
    with pytest.raises(ValueError, match="delete takes only a name"):
        c.push([("-", "02:00:00:00:00:01", "1")])
    with pytest.raises(TypeError, match="change 0: expected a tuple"):
        c.push([["+", "02:00:00:00:05:00", "1"]])
    with pytest.raises(TypeError):
        c.push(5)
    assert c.stats()["version"] == 0
    c.close()
    assert c.stats()["version"] == 0  # reconnects


def test_connection_errors(controller, tmp_path):
    addr, key, _ = controller
    other = tmp_path / "other"
    other.write_text("another-secret-of-the-test-0123456789\n")
    other.chmod(0o600)
    with pytest.raises(nexthop.ControlError, match="key file"):
        nexthop.Controller(addr, other)
    short = tmp_path / "short"
    short.write_text("short\n")
    short.chmod(0o600)
    with pytest.raises(ValueError, match="too short"):
        nexthop.Controller(addr, short)
    with pytest.raises(OSError, match="nokey"):
        nexthop.Controller(addr, tmp_path / "nokey")
    with pytest.raises(ConnectionError):
        nexthop.Controller(f"127.0.0.1:{free_port()}", key, timeout=2)
    with pytest.raises(ValueError, match="timeout"):
        nexthop.Controller(addr, key, timeout=0)
    assert nexthop.Controller(addr, key).stats()["rejects"] == 1


def can_make_veth() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


@pytest.fixture
def veth_ports():
    """Two veth pairs (the forwarder's ports 0 and 1); needs root and `ip`."""
    if not can_make_veth():
        pytest.skip("needs root and ip(8) for the forwarder's veth ports")
    tag = os.getpid() % 100000
    names = [f"nhpy{tag}a", f"nhpy{tag}b"]
    try:
        for n in names:
            subprocess.run(["ip", "link", "add", n, "type", "veth", "peer", "name", n + "p"], check=True)
            subprocess.run(["ip", "link", "set", n, "up"], check=True)
            subprocess.run(["ip", "link", "set", n + "p", "up"], check=True)
        yield names
    finally:
        for n in names:
            subprocess.run(["ip", "link", "del", n], capture_output=True)


def extra(stats: dict, name: str):
    """A follower counter of `nexthop run --controller` (None before its first report)."""
    return next((e["value"] for e in stats["extra"] if e["name"] == name), None)


def test_push_reaches_a_following_forwarder(controller, veth_ports):
    addr, key, _ = controller
    metrics = f"127.0.0.1:{free_port()}"
    fwd = subprocess.Popen(
        [exe(), "--log-level", "warn", "run", "--controller", addr, "--key-file", str(key),
         "--key-type", "mac", "--port", f"0={veth_ports[0]}", "--port", f"1={veth_ports[1]}",
         "--metrics", metrics, "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(lambda: extra(nexthop.forwarder_stats(metrics, timeout=1), "fib_snapshots_total") == 1,
                 "the forwarder's first snapshot")
        c = nexthop.Controller(addr, key)
        assert extra(nexthop.forwarder_stats(metrics), "fib_deltas_total") == 0
        r = c.push([("+", "02:00:00:00:06:00", "1"), ("=", "02:00:00:00:00:05", "drop")])
        assert (r["changes"], r["followers"], r["deltas"]) == (2, 1, 1)
        wait_for(lambda: extra(nexthop.forwarder_stats(metrics, timeout=1), "fib_deltas_total") == 1,
                 "the forwarder to apply the pushed delta")
        c.delete("02:00:00:00:06:00")
        wait_for(lambda: extra(nexthop.forwarder_stats(metrics, timeout=1), "fib_deltas_total") == 2,
                 "the forwarder to apply the second delta")
        # The forwarder acknowledged both deltas to the controller.
        wait_for(lambda: c.stats()["propagation_samples"] == 3, "the forwarder's acks")
        assert c.stats()["active"] == 1
    finally:
        fwd.terminate()
        _, err = fwd.communicate(timeout=10)
        print(err)
