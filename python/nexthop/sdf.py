"""Software-defined forwarding apps in Python (the SDF paper's API).

An app is an object with ``on_packet(self, pkt, ctl)`` and optionally
``on_tick(self, ctl)``. For each packet the decision cache misses, the
switch calls ``on_packet`` with the packet (:class:`InPkt`) and the switch's
:class:`Control`; the app reads header fields (which *marks* them: the
cached decision will match exactly those bits), builds an :class:`OutPkt`
with ``pkt.new_out_pkt()``, adds destinations, registers the
:class:`StateId` s the decision depended on, and sends it with
``pkt.send(out)``. When that state changes, ``ctl.removed(state_id)``
revokes exactly the cached decisions that registered it.

``pkt`` and ``ctl`` are valid only during the call: a later use raises
:class:`RuntimeError`. An exception raised by the app (or a return value
other than ``None``) drops the packet and is counted as ``app_error``; a
mark beyond the header drops it as ``mark_beyond_header``.

:class:`Switch` runs the whole switch (cache in front of the app) in the
calling thread: ``process(in_port, frame)`` returns the frames to send as
``(port, bytes)`` pairs, ``port`` None for the control port.
:func:`run_pcap` runs an app over pcap files through the data plane's SDF
pipeline, as ``python -m nexthop.sdf run --app APP.py --in-pcap [PORT=]FILE
--out-dir DIR`` and ``nexthop sdf run --app APP.py ...`` do;
:func:`run_live` runs it over live interfaces (the forwarder engine of
``nexthop sdf run --port``), as ``python -m nexthop.sdf run --app APP.py
--port N=IFACE ...`` does; :func:`run_frames` runs it over frames in
memory as a live worker does (no wait for the app between batches, a
bound on flows in flight; the miss-path benchmark's driver). ``run_pcap``
and ``run_live`` take ``slices`` instead of an app: several
apps on one switch, each a list item ``(spec, app)`` with ``spec`` as for
``nexthop sdf run --slice`` (``NAME:APP:ports=P,..|vlan=V[:share=N]``) and
``app`` the app object of that slice, or None for the built-in Rust app
``APP`` names (``l2switch``); ``python -m nexthop.sdf run --slice
NAME:APP.py:ports=1,2 --slice NAME:l2switch:ports=3,4 ...`` loads each
``APP.py``. :func:`run_ovs` runs it as the OpenFlow
controller of an Open vSwitch bridge (``--backend ovs --ovs-bridge BR
--ovs-ports LIST [--ovs-tunnel PEER=NAME,TYPE,...]``, as ``nexthop sdf run
--backend ovs --app APP.py`` does). An app file defines ``make_app()`` (or an
``app`` object).

An app may define ``control_filter(self)`` returning a
:class:`ControlFilter` (EtherTypes and destination MACs) or None (ARP, the
default): the misses it matches use the app's control queue, served
before data misses. The switch asks once, when it starts.
"""

import argparse
import importlib.util
import json
import signal
import sys
from pathlib import Path
from typing import Any, Optional

from ._nexthop import (
    Control,
    ControlFilter,
    InPkt,
    OutPkt,
    StateId,
    Switch,
    drop_reasons,
    run_frames,
    run_live,
    run_ovs,
    run_pcap,
)

__all__ = [
    "Control",
    "ControlFilter",
    "InPkt",
    "OutPkt",
    "StateId",
    "Switch",
    "drop_reasons",
    "load_app",
    "run_frames",
    "run_live",
    "run_ovs",
    "run_pcap",
]


def load_app(path: "str | Path") -> Any:
    """The app of the Python file ``path``: its ``make_app()``, else its ``app``."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"_nexthop_sdf_app_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and pickling look the module up
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[spec.name]
        raise
    if callable(getattr(mod, "make_app", None)):
        return mod.make_app()
    if hasattr(mod, "app"):
        return mod.app
    raise ValueError(f"{path}: defines neither make_app() nor app")


def _in_pcap(s: str) -> "tuple[int, str]":
    port, sep, f = s.partition("=")
    if sep and port.isdigit():
        if not f:
            raise argparse.ArgumentTypeError(f"{s!r}: no file after {port}=")
        return int(port), f
    return 0, s


def _ports(s: str) -> "list[int]":
    try:
        return [int(p) for p in s.split(",") if p]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r}: expected a comma list of port numbers") from None


def _port_map(s: str) -> "tuple[int, str]":
    port, sep, iface = s.partition("=")
    if not sep or not port.isdigit() or not iface or int(port) > 0xFFFF:
        raise argparse.ArgumentTypeError(f"{s!r}: expected N=IFACE")
    return int(port), iface


def _count(s: str) -> int:
    """A positive integer flag value (a bound: 0 would refuse everything)."""
    try:
        n = int(s)
    except ValueError:
        n = 0
    if not 1 <= n <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"{s!r}: expected a whole number from 1 to {2**32 - 1}")
    return n


def _run(f: Any, *args: Any, **kwargs: Any) -> "Optional[dict[str, Any]]":
    """``f(*args, **kwargs)`` (a run that installs its own SIGINT/SIGTERM
    handlers), Python's handlers restored after; its OSError or ValueError
    is printed as ``error: ...`` and gives None."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return f(*args, **kwargs)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return None
    finally:
        for sig, h in saved.items():
            if h is not None:
                signal.signal(sig, h)


def _live(a: argparse.Namespace, app: Any, slices: Any) -> int:
    """Run ``app`` (or ``slices``) on live ports."""
    s = _run(
        run_live,
        app,
        a.port,
        inputs=a.inputs or None,
        workers=a.workers,
        io=a.io,
        fanout=a.fanout,
        xdp_mode=a.xdp_mode,
        xdp_queue=a.xdp_queue,
        duration=a.duration,
        quiet=a.quiet,
        capacity=a.cache_capacity,
        max_masks=a.max_masks,
        label=a.app,
        metrics=a.metrics,
        metrics_allow_remote=a.metrics_allow_remote,
        slices=slices,
        mac_timeout=a.mac_timeout,
        max_macs=a.max_macs,
        **_queues(a),
        )
    if s is None:
        return 1
    print(s["summary"], flush=True)
    return 0


def _queues(a: argparse.Namespace) -> "dict[str, Any]":
    """The pipeline's queue bounds and pending-miss table from the flags."""
    return {
        "queue": a.queue,
        "control_queue": a.control_queue,
        "control_weight": a.control_weight,
        "pending_table": not a.no_pending_table,
    }


def _tunnel(s: str) -> "tuple[str, str]":
    peer, sep, spec = s.partition("=")
    if not sep or not peer or not spec:
        raise argparse.ArgumentTypeError(f"{s!r}: expected PEER=NAME,TYPE[,KEY=VAL...]")
    return peer, spec


def _ovs(a: argparse.Namespace, app: Any) -> int:
    """Run ``app`` with Open vSwitch as its fast path (:func:`run_ovs`)."""
    s = _run(
        run_ovs,
        app,
        a.ovs_ports,
        listen=a.ovs_listen,
        bridge=a.ovs_bridge,
        idle_timeout=a.ovs_idle_timeout,
        tunnels=a.ovs_tunnel,
        duration=a.duration,
        label=a.app,
        )
    if s is None:
        return 1
    if a.json:
        print(json.dumps({k: v for k, v in s.items() if k != "summary"}, sort_keys=True), flush=True)
    else:
        print(s["summary"], flush=True)
    return 0


def _slices(a: argparse.Namespace) -> "Optional[list[tuple[str, Any]]]":
    """Each ``--slice`` with its app: the object its ``APP.py`` makes, or
    None for a built-in app (the binding checks the spec and the name)."""
    if not a.slice:
        return None
    out = []
    for spec in a.slice:
        name, _, rest = spec.partition(":")
        app = rest.partition(":")[0]
        if not app.endswith(".py"):
            out.append((spec, None))
            continue
        if not Path(app).is_file():
            raise ValueError(f"slice {name}: {app}: no such file")
        try:
            out.append((spec, load_app(app)))
        except Exception as e:  # the app file's own failure, reported as such
            raise ValueError(f"slice {name}: {app}: {type(e).__name__}: {e}") from e
    return out


def main(argv: Optional["list[str]"] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nexthop.sdf", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a Python app (or slices) over pcap files or live interfaces")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--app", metavar="APP.py")
    which.add_argument("--slice", action="append", metavar="NAME:APP:ports=P,..|vlan=V[:share=N]",
                       help="a slice (repeat): APP is an APP.py file or the built-in l2switch")
    r.add_argument("--mac-timeout", type=float, default=300.0, metavar="SECS",
                   help="slices running the built-in l2switch: a MAC binding this old is forgotten")
    r.add_argument("--max-macs", type=int, default=65536, metavar="N",
                   help="slices running the built-in l2switch: MAC bindings held at most")
    r.add_argument("--in-pcap", action="append", type=_in_pcap, metavar="[PORT=]FILE")
    r.add_argument("--out-dir", metavar="DIR")
    r.add_argument("--port", action="append", type=_port_map, metavar="N=IFACE",
                   help="live: switch port N is interface IFACE (repeat)")
    r.add_argument("--in", dest="inputs", action="append", type=int, default=[], metavar="N",
                   help="live: a port to receive on (default: every --port)")
    r.add_argument("--workers", type=int, default=1, metavar="N")
    r.add_argument("--io", default="afpacket", metavar="IO")
    r.add_argument("--fanout", default="hash", metavar="MODE")
    r.add_argument("--xdp-mode", default="auto", metavar="MODE")
    r.add_argument("--xdp-queue", type=int, default=0, metavar="Q")
    r.add_argument("--duration", type=float, default=None, metavar="SECS")
    r.add_argument("--quiet", action="store_true", help="live: no progress lines")
    r.add_argument("--ports", type=_ports, default=[0, 1, 2, 3], metavar="LIST")
    r.add_argument("--cache-capacity", type=int, default=None)
    r.add_argument("--max-masks", type=int, default=None)
    r.add_argument("--queue", type=_count, default=1024, metavar="N",
                   help="data misses queued to the app at most (per slice)")
    r.add_argument("--control-queue", type=_count, default=256, metavar="N",
                   help="control misses (ARP) queued to the app at most (per slice)")
    r.add_argument("--control-weight", type=_count, default=4, metavar="W",
                   help="control requests served for each data request while both wait")
    r.add_argument("--no-pending-table", action="store_true",
                   help="every miss is an app call, even of a flow whose decision is in flight")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    r.add_argument("--backend", choices=("nexthop", "ovs"), default="nexthop",
                   help="ovs: Open vSwitch forwards, the app decides its misses (--ovs-*)")
    r.add_argument("--ovs-listen", default="127.0.0.1:6653", metavar="HOST:PORT")
    r.add_argument("--ovs-bridge", metavar="BR")
    r.add_argument("--ovs-ports", type=_ports, default=[], metavar="LIST")
    r.add_argument("--ovs-idle-timeout", type=int, default=10, metavar="SECS")
    r.add_argument("--ovs-tunnel", action="append", type=_tunnel, default=[],
                   metavar="PEER=NAME,TYPE[,KEY=VAL...]")
    r.add_argument("--metrics", metavar="ADDR:PORT",
                   help="live: serve the counters on http://ADDR:PORT/metrics and /stats.json")
    r.add_argument("--metrics-allow-remote", action="store_true",
                   help="allow --metrics on an address that is not loopback")
    a = ap.parse_args(argv)
    if a.backend == "ovs":
        if a.slice:
            ap.error("--backend ovs runs one --app; slices are not supported on Open vSwitch")
        if a.port or a.in_pcap or a.out_dir:
            ap.error("--backend ovs excludes --port, --in-pcap and --out-dir (OVS has the ports)")
        if not a.ovs_ports:
            ap.error("--backend ovs needs --ovs-ports LIST")
        if a.metrics:
            ap.error("--metrics serves the nexthop backend's counters; with --backend ovs, the summary has them")
    elif a.port:
        if a.in_pcap or a.out_dir:
            ap.error("--port (live) excludes --in-pcap and --out-dir (offline)")
        if a.json:
            ap.error("--json is for the offline summary")
    elif not a.in_pcap or not a.out_dir:
        ap.error("give --port N=IFACE (live) or --in-pcap FILE --out-dir DIR")
    elif a.metrics:
        ap.error("--metrics serves a live run's counters (--port N=IFACE); offline, the summary has them")
    try:
        slices = _slices(a)
        app = None if slices is not None else load_app(a.app)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the app file's own failure, reported as such
        print(f"error: {a.app}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if a.backend == "ovs":
        return _ovs(a, app)
    if a.port:
        return _live(a, app, slices)
    try:
        Path(a.out_dir).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    s = _run(run_pcap, app, a.in_pcap, a.out_dir, a.ports, a.cache_capacity, a.max_masks,
             slices=slices, mac_timeout=a.mac_timeout, max_macs=a.max_macs, **_queues(a))
    if s is None:
        return 1
    if a.json:
        print(json.dumps(s, indent=2, sort_keys=True))
    else:
        print(s["summary"])
    for m in s["stopped_by"]:
        print(f"warning: {m}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
