"""Miss path of a Python SDF app: decisions per second.

The shipped Python L2 learning switch (nexthop.apps.l2switch) in an
in-process ``nexthop.sdf.Switch``: hosts are learned on 4 ports first, then
every frame is a new (source, destination) pair, so each one misses the
cache and is decided by the Python app (call, marks, registrations, install).
Also the same frames through the built-in Rust L2 switch in the same run.
Times are the process's CPU time; the figure is the median over rounds.

    python python/examples/sdf_miss_bench.py [--hosts 1024] [--flows 100000] [--rounds 5]
"""

import argparse
import statistics
import struct
import time

from nexthop.apps.l2switch import L2Switch
from nexthop.sdf import Switch


def mac(i: int) -> bytes:
    return b"\x02\x00" + struct.pack("!I", i)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    port = {h: 1 + h % 4 for h in range(a.hosts)}
    pad = b"\0" * 46
    pairs = []
    for i in range(a.flows):
        s, d = i % a.hosts, (i // a.hosts + 1 + i) % a.hosts
        pairs.append((port[s], mac(d) + mac(s) + b"\x88\xb5" + pad))
    learn = [(port[h], b"\xff" * 6 + mac(h) + b"\x88\xb5" + pad) for h in range(a.hosts)]
    rates = {"python": [], "rust": []}
    for _ in range(a.rounds):
        for kind in ("python", "rust"):
            sw = Switch(L2Switch(), ports=[1, 2, 3, 4], capacity=1 << 18) if kind == "python" \
                else Switch.rust_l2([1, 2, 3, 4])
            for p, f in learn:
                sw.process(p, f)
            before = sw.counters()["app_calls"]
            t = time.process_time()
            for p, f in pairs:
                sw.process(p, f)
            dt = time.process_time() - t
            calls = sw.counters()["app_calls"] - before
            rates[kind].append(calls / dt)
    for kind, r in rates.items():
        print(f"{kind} L2 app, in-process Switch: {statistics.median(r) / 1e3:.1f} k decisions/s "
              f"(min {min(r) / 1e3:.1f}, max {max(r) / 1e3:.1f}, {a.rounds} rounds of {a.flows} flows)")
    print(f"python / rust: {statistics.median(rates['python']) / statistics.median(rates['rust']):.3f}")


if __name__ == "__main__":
    main()
