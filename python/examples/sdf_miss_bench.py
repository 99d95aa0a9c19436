"""Miss path of a Python SDF app: decisions per second.

The shipped Python L2 learning switch (nexthop.apps.l2switch) in an
in-process ``nexthop.sdf.Switch``: hosts are learned on 4 ports first, then
every frame is a new (source, destination) pair, so each one misses the
cache and is decided by the Python app (call, marks, registrations, install).
Also the same frames through the built-in Rust L2 switch in the same run.
Times are the process's CPU time; the figure is the median over rounds.

With ``--pipeline`` new flows go through the data plane's SDF pipeline
instead (``nexthop.sdf.run_frames``: a worker's stage, the bounded queue,
the app on its own thread, the pending-miss table, at most 256 flows in
flight, as the Rust miss-path bench ``cargo bench -p nexthop-dataplane
--bench sdf`` drives it), flows of one source in a row (batches of one
ingress port), with 1 frame per flow and with bursts of 4 frames per flow,
the pending-miss table on and off: decisions (app calls) per second of
the run's wall time (the hosts' hellos included).

    python python/examples/sdf_miss_bench.py [--hosts 1024] [--flows 100000] [--rounds 5]
        [--pipeline]
"""

import argparse
import statistics
import struct
import time

from nexthop.apps.l2switch import L2Switch
from nexthop.sdf import Switch, run_frames


def mac(i: int) -> bytes:
    return b"\x02\x00" + struct.pack("!I", i)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=1024)
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pipeline", action="store_true",
                    help="through the SDF pipeline (run_frames), table on and off, 1 and 4 frames per flow")
    a = ap.parse_args()
    port = {h: 1 + h % 4 for h in range(a.hosts)}
    pad = b"\0" * 46
    pairs = []
    for i in range(a.flows):
        s, d = i % a.hosts, (i // a.hosts + 1 + i) % a.hosts
        pairs.append((port[s], mac(d) + mac(s) + b"\x88\xb5" + pad))
    learn = [(port[h], b"\xff" * 6 + mac(h) + b"\x88\xb5" + pad) for h in range(a.hosts)]
    if a.pipeline:
        pipeline(learn, a.hosts, a.flows, a.rounds)
        return
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


def pipeline(learn: "list[tuple[int, bytes]]", hosts: int, flows: int, rounds: int) -> None:
    # Flows in runs of one source (as a port receives them: a batch of one
    # ingress port at a time): flow n is host n // (hosts - 1) sending to
    # another host.
    pad = b"\0" * 46
    runs = []
    for n in range(flows):
        s = (n // (hosts - 1)) % hosts
        d = n % (hosts - 1)
        d += d >= s
        runs.append((1 + s % 4, mac(d) + mac(s) + b"\x88\xb5" + pad))
    variants = [(per, table) for per in (1, 4) for table in (True, False)]
    rates: "dict[tuple[int, bool], list[float]]" = {v: [] for v in variants}
    sent: "dict[tuple[int, bool], list[float]]" = {v: [] for v in variants}
    frames = {per: learn + [(p, f) for p, f in runs for _ in range(per)] for per in (1, 4)}
    for _ in range(rounds):
        for per, table in variants:
            s = run_frames(L2Switch(), frames[per], ports=[1, 2, 3, 4], capacity=1 << 18,
                           pending_table=table)
            assert sum(s["sdf_drops"].values()) == 0 and s["unanswered"] == 0, s
            rates[(per, table)].append(s["app_calls"] / s["elapsed_s"])
            sent[(per, table)].append(s["frames_out"] / s["elapsed_s"])
    for per, table in variants:
        r = rates[(per, table)]
        print(f"python L2 app, pipeline (run_frames), {per} frame{'s' if per > 1 else ''}/flow, "
              f"pending table {'on ' if table else 'off'}: {statistics.median(r) / 1e3:.1f} k decisions/s "
              f"(min {min(r) / 1e3:.1f}, max {max(r) / 1e3:.1f}), "
              f"{statistics.median(sent[(per, table)]) / 1e3:.1f} k frames sent/s, {rounds} rounds")


if __name__ == "__main__":
    main()
