"""An IPv4 router as an SDF app.

Routes live in a :class:`nexthop.Lpm` (Bloomfwd); each route has its own
state id, and each cached decision registers the state of the prefix it
used, so a route change revokes only the decisions of the changed prefix
(a new more specific route revokes the covering prefix's decisions, which
it may now take over). Forwarded packets get the next hop's and the output
port's MAC addresses and the TTL decrement with the incremental checksum
update (a primitive, so the TTL is not marked); a TTL of 0 or 1 is dropped.
ARP requests for the router's addresses are answered as control traffic
(made-up replies, never cached); IPv4 packets to the router's addresses go
to the control port.

Route file lines: ``PREFIX PORT NEXT_HOP_MAC`` (``#`` comments).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Optional, Union

import nexthop
from nexthop.sdf import Control, InPkt, OutPkt, StateId

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806


def parse_mac(s: str) -> bytes:
    b = bytes(int(x, 16) for x in s.split(":"))
    if len(b) != 6:
        raise ValueError(f"{s!r}: not a MAC address")
    return b


class Router:
    """``interfaces``: port -> (MAC, IPv4 address) of the router on that port."""

    def __init__(self, interfaces: dict[int, tuple[str, str]]) -> None:
        self.ifaces = {p: (parse_mac(m), ipaddress.IPv4Address(a)) for p, (m, a) in interfaces.items()}
        self.own = {int(a) for _, a in self.ifaces.values()}
        self.lpm = nexthop.Lpm.from_routes([])
        self.routes: dict[ipaddress.IPv4Network, tuple[int, int, bytes, Optional[StateId]]] = {}
        self.by_index: dict[int, ipaddress.IPv4Network] = {}
        self.next_index = 0
        self.no_route: Optional[StateId] = None  # decisions that found no route

    def load_routes(self, path: Union[str, Path], ctl: Control) -> None:
        for n, line in enumerate(Path(path).read_text().splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3:
                raise ValueError(f"{path}:{n}: expected PREFIX PORT NEXT_HOP_MAC")
            self.announce(ctl, parts[0], int(parts[1]), parts[2])

    def _covering(self, net: ipaddress.IPv4Network) -> Optional[ipaddress.IPv4Network]:
        best = None
        for p in self.routes:
            if p != net and p.prefixlen < net.prefixlen and net.subnet_of(p):
                if best is None or p.prefixlen > best.prefixlen:
                    best = p
        return best

    def _revoke(self, ctl: Control, net: Optional[ipaddress.IPv4Network]) -> int:
        if net is None:
            sid, self.no_route = self.no_route, None
        else:
            idx, port, mac, sid = self.routes[net]
            self.routes[net] = (idx, port, mac, None)
        return ctl.removed(sid) if sid is not None else 0

    def announce(self, ctl: Control, prefix: str, port: int, next_hop_mac: str) -> int:
        """Add or change a route; returns the cached decisions revoked."""
        net = ipaddress.IPv4Network(prefix)
        mac = parse_mac(next_hop_mac)
        if port not in self.ifaces:
            raise ValueError(f"route {prefix}: port {port} is not one of the router's interfaces")
        if net in self.routes:
            revoked = self._revoke(ctl, net)
            idx = self.routes[net][0]
        else:
            revoked = self._revoke(ctl, self._covering(net))
            idx = self.next_index
            self.next_index += 1
            self.by_index[idx] = net
            self.lpm.announce(str(net), idx)
        self.routes[net] = (idx, port, mac, None)
        return revoked

    def withdraw(self, ctl: Control, prefix: str) -> int:
        """Remove a route; returns the cached decisions revoked."""
        net = ipaddress.IPv4Network(prefix)
        if net not in self.routes:
            return 0
        revoked = self._revoke(ctl, net)
        idx = self.routes.pop(net)[0]
        del self.by_index[idx]
        self.lpm.withdraw(str(net))
        return revoked

    def _arp(self, pkt: InPkt) -> None:
        d = pkt.data
        if len(d) < 42 or d[14:22] != b"\x00\x01\x08\x00\x06\x04\x00\x01":
            return  # not an Ethernet/IPv4 ARP request: dropped, not cached
        iface = self.ifaces.get(pkt.in_port)
        if iface is None or d[38:42] != iface[1].packed:
            return
        mac = iface[0]
        reply = (d[6:12] + mac + b"\x08\x06" + b"\x00\x01\x08\x00\x06\x04\x00\x02"
                 + mac + d[38:42] + d[22:28] + d[28:32])
        out = OutPkt(reply)
        out.add_destination(pkt.in_port)
        pkt.send(out)

    def on_packet(self, pkt: InPkt, ctl: Control) -> None:
        if len(pkt) < 14:
            return
        if len(pkt) >= 42 and pkt.data[12:14] == b"\x08\x06":
            self._arp(pkt)  # reads pkt.data only: nothing marked, never cached
            return
        if pkt.field(96, 16) != ETH_IPV4 or len(pkt) < 34:
            out = pkt.new_out_pkt()  # not IPv4: dropped (cached on the ethertype)
            pkt.send(out)
            return
        dst = pkt.field(30 * 8, 32)
        out = pkt.new_out_pkt()
        if dst in self.own:
            out.to_controller()
            pkt.send(out)
            return
        idx = self.lpm.lookup(str(ipaddress.IPv4Address(dst)))
        if idx is None:
            if self.no_route is None:
                self.no_route = ctl.new_state_id()
            out.register(self.no_route)
            pkt.send(out)  # a drop until a covering route appears
            return
        net = self.by_index[idx]
        i, port, mac, sid = self.routes[net]
        if sid is None:
            sid = ctl.new_state_id()
            self.routes[net] = (i, port, mac, sid)
        out.set_bytes(0, mac + self.ifaces[port][0])
        out.dec_ttl()
        out.add_destination(port)
        out.register(sid)
        pkt.send(out)


def make_app() -> Router:
    """For ``--app router.py``: interfaces and routes from the environment
    (``NEXTHOP_ROUTER_IFACES``: ``PORT=MAC,IP;...``; ``NEXTHOP_ROUTER_ROUTES``:
    a route file, loaded at the first packet)."""
    import os

    ifaces = {}
    for item in filter(None, os.environ.get("NEXTHOP_ROUTER_IFACES", "").split(";")):
        port, _, rest = item.partition("=")
        m, _, a = rest.partition(",")
        ifaces[int(port)] = (m, a)
    return _Loading(Router(ifaces), os.environ.get("NEXTHOP_ROUTER_ROUTES"))


class _Loading:
    """Loads the route file with the switch's Control at the first call."""

    def __init__(self, router: Router, routes: Optional[str]) -> None:
        self.router = router
        self.routes = routes

    def on_packet(self, pkt: InPkt, ctl: Control) -> None:
        if self.routes is not None:
            path, self.routes = self.routes, None
            self.router.load_routes(path, ctl)
        self.router.on_packet(pkt, ctl)
