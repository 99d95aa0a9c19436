"""An L2 learning switch as an SDF app.

Floods frames to unknown and group destinations, learns source MACs per
port, and caches each decision on exactly (ingress port, destination MAC,
source MAC), registered with the state ids of the bindings it used: a MAC
that moves or times out revokes only the decisions that depended on it.
It makes the same decisions as the built-in Rust ``l2switch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from nexthop.sdf import Control, InPkt, StateId


@dataclass
class _Binding:
    port: Optional[int]  # None: a destination seen, not yet learned
    state: StateId
    since: float


def _is_group(mac: bytes) -> bool:
    return mac[0] & 1 != 0


class L2Switch:
    """Learning switch; bindings expire ``timeout`` seconds after they were made."""

    def __init__(self, timeout: float = 300.0, max_macs: int = 1 << 16) -> None:
        self.timeout = timeout
        self.max_macs = max_macs
        self.macs: dict[bytes, _Binding] = {}
        self.learned = 0
        self.moves = 0
        self.expired = 0

    def port_of(self, mac: bytes) -> Optional[int]:
        b = self.macs.get(mac)
        return b.port if b else None

    def _bind(self, ctl: Control, mac: bytes, port: Optional[int]) -> Optional[StateId]:
        old = self.macs.pop(mac, None)
        if old is not None:
            ctl.removed(old.state)
        elif len(self.macs) >= self.max_macs:
            return None
        sid = ctl.new_state_id()
        self.macs[mac] = _Binding(port, sid, ctl.now())
        return sid

    def on_packet(self, pkt: InPkt, ctl: Control) -> None:
        if len(pkt) < 14:
            return  # a drop, not cached (nothing marked)
        dst = pkt.bytes(0, 6)
        src = pkt.bytes(6, 6)
        in_port = pkt.mark_ingress()
        states: list[StateId] = []
        cacheable = True

        if not _is_group(src):
            b = self.macs.get(src)
            if b is not None and b.port == in_port:
                states.append(b.state)
            else:
                moved = b is not None and b.port is not None
                sid = self._bind(ctl, src, in_port)
                if sid is None:
                    cacheable = False
                else:
                    states.append(sid)
                    self.moves += moved
                    self.learned += not moved

        def flood() -> list[int]:
            return [p for p in ctl.get_ports() if p != in_port]

        if _is_group(dst):
            dests = flood()
        else:
            b = self.macs.get(dst)
            if b is not None:
                states.append(b.state)
                if b.port is None:
                    dests = flood()
                elif b.port == in_port:
                    dests = []
                else:
                    dests = [b.port]
            else:
                sid = self._bind(ctl, dst, None)
                if sid is None:
                    cacheable = False
                else:
                    states.append(sid)
                dests = flood()

        out = pkt.new_out_pkt()
        for p in dests:
            out.add_destination(p)
        if cacheable:
            for s in states:
                out.register(s)
        else:
            pkt.clear()
        pkt.send(out, True)

    def on_tick(self, ctl: Control) -> None:
        now = ctl.now()
        for mac in [m for m, b in self.macs.items() if now - b.since >= self.timeout]:
            b = self.macs.pop(mac)
            ctl.removed(b.state)
            self.expired += 1


def make_app() -> L2Switch:
    """The app ``python -m nexthop.sdf run --app l2switch.py`` runs."""
    return L2Switch()
