"""SEATTLE-style Ethernet over a DHT, as an SDF app on several switches.

The non-IP design of the SDF paper's section 5 (after SEATTLE, Kim et al.,
SIGCOMM 2008): a flat Ethernet spread over several nexthop switches that
never floods unicast traffic between them. Each switch learns the hosts on
its own (host) ports and *publishes* every host's location to the host's
*owner*, the switch the DHT assigns its MAC to (rendezvous hashing over the
switch ids). A switch that must send to a MAC it does not know asks the
owner (*lookup*); the owner answers with the location (*resolve*) and keeps
the asker as a subscriber, so a host that moves is re-resolved everywhere.
Frames then cross exactly one tunnel, from the sender's switch to the
receiver's.

Switches are joined by tunnel ports (``Control.add_port``, one per peer,
property ``peer``, added by :meth:`SeattleSwitch.add_tunnels` or at the
first packet or tick); the DHT's own messages travel on them as frames of
ethertype 0x88B5 (IEEE local experimental), answered by the app and never
cached. What the cache holds:

* a host frame to a resolved MAC: marked on (ingress port, destination,
  source MAC), registered with the states of both bindings, so a move or
  an expiry of either revokes exactly it;
* a frame arriving on a tunnel: marked on (ingress, destination, ethertype),
  registered with the local binding of the destination;
* **a DHT miss cached as a drop**: while a lookup for a MAC is in flight,
  frames to it are dropped by a cached decision registered with the
  lookup's *pending* state id; the answer calls ``removed`` on it, so the
  next frame reaches the app and is forwarded. The first frame of a miss
  (the one that sends the lookup) is not cached: it sends a made-up frame.

Broadcast and multicast frames from a host go to the switch's other host
ports and once over every tunnel; a switch never forwards a tunnelled frame
into another tunnel, so the full mesh of tunnels has no loop.

:class:`Fabric` runs N such switches in-process (each a
``nexthop.sdf.Switch``), carrying tunnel frames between them; the tests
compare it with the same fabric without caches.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Optional

from nexthop.sdf import Control, InPkt, OutPkt, StateId, Switch

ETHERTYPE = 0x88B5
OP_PUBLISH = 1
OP_LOOKUP = 2
OP_RESOLVE = 3
_OPS = {OP_PUBLISH, OP_LOOKUP, OP_RESOLVE}
# No location (the field of a LOOKUP).
NOWHERE = 0xFFFF


def owner_of(mac: bytes, switches: int) -> int:
    """The switch that holds ``mac``'s location: rendezvous hashing."""
    best, owner = b"", 0
    for s in range(switches):
        h = hashlib.blake2b(mac + s.to_bytes(2, "big"), digest_size=8).digest()
        if h > best:
            best, owner = h, s
    return owner


def switch_mac(s: int) -> bytes:
    """The locally administered MAC a switch sends DHT messages from."""
    return bytes([0x02, 0x5E, 0, 0]) + s.to_bytes(2, "big")


def message(src: int, dst: int, op: int, mac: bytes, where: int) -> bytes:
    """A DHT message from switch ``src`` to switch ``dst``."""
    return (
        switch_mac(dst)
        + switch_mac(src)
        + ETHERTYPE.to_bytes(2, "big")
        + bytes([op])
        + mac
        + where.to_bytes(2, "big")
    )


def _is_group(mac: bytes) -> bool:
    return mac[0] & 1 != 0


@dataclass
class _Local:
    port: int
    state: StateId
    since: float


@dataclass
class _Remote:
    switch: int
    state: StateId


@dataclass
class _Pending:
    state: StateId
    since: float


@dataclass
class Counters:
    published: int = 0
    lookups: int = 0
    resolved: int = 0
    pending_drops: int = 0
    unknown_drops: int = 0
    bad_messages: int = 0
    moves: int = 0
    expired: int = 0


class SeattleSwitch:
    """The app of switch ``me`` among ``switches``; ``host_ports`` face hosts."""

    def __init__(
        self,
        me: int,
        switches: int,
        host_ports: list[int],
        timeout: float = 300.0,
        lookup_timeout: float = 1.0,
        max_entries: int = 1 << 16,
    ) -> None:
        if not 0 <= me < switches <= NOWHERE:
            raise ValueError(f"switch {me} of {switches}")
        self.me = me
        self.switches = switches
        self.host_ports = sorted(host_ports)
        self.timeout = timeout
        self.lookup_timeout = lookup_timeout
        self.max_entries = max_entries
        self.tunnel_to: dict[int, int] = {}  # peer switch -> tunnel port
        self.peer_of: dict[int, int] = {}  # tunnel port -> peer switch
        self.local: dict[bytes, _Local] = {}
        self.remote: dict[bytes, _Remote] = {}
        self.pending: dict[bytes, _Pending] = {}
        # The DHT share this switch owns: MAC -> location, and who asked.
        self.directory: dict[bytes, int] = {}
        self.subscribers: dict[bytes, set[int]] = {}
        self.counters = Counters()

    # Set-up -----------------------------------------------------------------

    def add_tunnels(self, ctl: Control) -> None:
        """Add one tunnel port per peer switch (through ``Switch.control``;
        the app's first packet or tick adds those still missing, so it also
        runs where nobody calls this: ``python -m nexthop.sdf run``, where
        ``--backend ovs --ovs-tunnel PEER=...`` makes each an OVS port)."""
        for peer in range(self.switches):
            if peer == self.me or peer in self.tunnel_to:
                continue
            port = ctl.add_port()
            ctl.set_properties(port, "peer", str(peer))
            self.tunnel_to[peer] = port
            self.peer_of[port] = peer

    # DHT --------------------------------------------------------------------

    def _send_msg(self, pkt: InPkt, peer: int, op: int, mac: bytes, where: int) -> None:
        out = OutPkt(message(self.me, peer, op, mac, where))
        out.add_destination(self.tunnel_to[peer])
        pkt.send(out, False)

    def _tell(self, pkt: InPkt, ctl: Control, peer: int, op: int, mac: bytes, where: int) -> None:
        """Deliver a DHT message to ``peer`` (to this switch: handled at once)."""
        if peer == self.me:
            self._on_message(pkt, ctl, op, mac, where, self.me)
        else:
            self._send_msg(pkt, peer, op, mac, where)

    def _publish(self, pkt: InPkt, ctl: Control, mac: bytes) -> None:
        self.counters.published += 1
        self._tell(pkt, ctl, owner_of(mac, self.switches), OP_PUBLISH, mac, self.me)

    def _on_message(
        self, pkt: InPkt, ctl: Control, op: int, mac: bytes, where: int, sender: int
    ) -> None:
        if op == OP_PUBLISH:
            if owner_of(mac, self.switches) != self.me or where != sender:
                self.counters.bad_messages += 1
                return
            old = self.directory.get(mac)
            if old is None and len(self.directory) >= self.max_entries:
                return
            self.directory[mac] = where
            if old != where:
                # Every switch that asked, and the old location, hear of it;
                # the old location caches the new one, so it subscribes too.
                subs = self.subscribers.setdefault(mac, set())
                if old is not None:
                    subs.add(old)
                told = set(subs)
                told.discard(where)
                for s in sorted(told):
                    self._tell(pkt, ctl, s, OP_RESOLVE, mac, where)
        elif op == OP_LOOKUP:
            if owner_of(mac, self.switches) != self.me:
                self.counters.bad_messages += 1
                return
            if mac in self.subscribers or len(self.subscribers) < self.max_entries:
                self.subscribers.setdefault(mac, set()).add(sender)
            where = self.directory.get(mac, NOWHERE)
            if where != NOWHERE:
                self._tell(pkt, ctl, sender, OP_RESOLVE, mac, where)
        elif op == OP_RESOLVE:
            self._resolved(ctl, mac, where)

    def _resolved(self, ctl: Control, mac: bytes, where: int) -> None:
        self.counters.resolved += 1
        p = self.pending.pop(mac, None)
        if p is not None:
            ctl.removed(p.state)  # the cached drop goes
        if where != self.me:
            loc = self.local.pop(mac, None)
            if loc is not None:
                # The host moved away from here.
                ctl.removed(loc.state)
                self.counters.moves += 1
        old = self.remote.pop(mac, None)
        if old is not None:
            ctl.removed(old.state)
        if where != NOWHERE and where != self.me and where in self.tunnel_to:
            self.remote[mac] = _Remote(where, ctl.new_state_id())

    # Packets ----------------------------------------------------------------

    def on_packet(self, pkt: InPkt, ctl: Control) -> None:
        if len(self.tunnel_to) < self.switches - 1:
            self.add_tunnels(ctl)
        if len(pkt) < 14:
            return  # a runt: dropped, nothing marked, not cached
        in_port = pkt.mark_ingress()
        if in_port in self.peer_of:
            self._from_tunnel(pkt, ctl, in_port)
        elif in_port in self.host_ports:
            self._from_host(pkt, ctl, in_port)

    def _from_tunnel(self, pkt: InPkt, ctl: Control, in_port: int) -> None:
        if pkt.field(96, 16) == ETHERTYPE:
            raw = pkt.data
            pkt.clear()  # a DHT message: answered, never cached
            if len(raw) < 23 or raw[14] not in _OPS:
                self.counters.bad_messages += 1
                return
            mac = bytes(raw[15:21])
            where = int.from_bytes(raw[21:23], "big")
            if where != NOWHERE and where >= self.switches:
                self.counters.bad_messages += 1
                return
            self._on_message(pkt, ctl, raw[14], mac, where, self.peer_of[in_port])
            return
        dst = pkt.bytes(0, 6)
        out = pkt.new_out_pkt()
        if _is_group(dst):
            for p in self.host_ports:
                out.add_destination(p)
        else:
            loc = self.local.get(dst)
            if loc is None:
                # Not here (any more): dropped, and not cached, so the
                # next frame is looked at again.
                self.counters.unknown_drops += 1
                pkt.clear()
                return
            out.add_destination(loc.port)
            out.register(loc.state)
        pkt.send(out, True)

    def _learn(self, pkt: InPkt, ctl: Control, src: bytes, in_port: int) -> Optional[StateId]:
        loc = self.local.get(src)
        if loc is not None and loc.port == in_port:
            return loc.state
        if loc is not None:
            ctl.removed(loc.state)
            self.counters.moves += 1
        elif len(self.local) >= self.max_entries:
            return None
        # A host here is no longer elsewhere, nor looked for.
        rem = self.remote.pop(src, None)
        if rem is not None:
            ctl.removed(rem.state)
        pend = self.pending.pop(src, None)
        if pend is not None:
            ctl.removed(pend.state)
        sid = ctl.new_state_id()
        self.local[src] = _Local(in_port, sid, ctl.now())
        if loc is None:
            self._publish(pkt, ctl, src)
        return sid

    def _from_host(self, pkt: InPkt, ctl: Control, in_port: int) -> None:
        dst = pkt.bytes(0, 6)
        src = pkt.bytes(6, 6)
        states: list[StateId] = []
        cacheable = True
        if not _is_group(src):
            sid = self._learn(pkt, ctl, src, in_port)
            if sid is None:
                cacheable = False
            else:
                states.append(sid)
        out = pkt.new_out_pkt()
        if _is_group(dst):
            for p in self.host_ports:
                if p != in_port:
                    out.add_destination(p)
            for port in self.tunnel_to.values():
                out.add_destination(port)
        elif dst in self.local:
            loc = self.local[dst]
            states.append(loc.state)
            if loc.port != in_port:
                out.add_destination(loc.port)
        elif dst in self.remote:
            rem = self.remote[dst]
            states.append(rem.state)
            out.add_destination(self.tunnel_to[rem.switch])
        elif dst in self.pending:
            # The DHT miss, cached as a drop until the lookup answers.
            self.counters.pending_drops += 1
            states.append(self.pending[dst].state)
        else:
            owner = owner_of(dst, self.switches)
            where = self.directory.get(dst) if owner == self.me else None
            if where is not None and where != self.me and where in self.tunnel_to:
                self.subscribers.setdefault(dst, set()).add(self.me)
                rem = _Remote(where, ctl.new_state_id())
                self.remote[dst] = rem
                states.append(rem.state)
                out.add_destination(self.tunnel_to[where])
            elif where == self.me:
                # Published from here but expired since: not cached, so
                # the next frame looks again.
                self.counters.unknown_drops += 1
                cacheable = False
            else:
                self.counters.lookups += 1
                self.counters.pending_drops += 1
                self.pending[dst] = _Pending(ctl.new_state_id(), ctl.now())
                if owner == self.me:
                    self.subscribers.setdefault(dst, set()).add(self.me)
                else:
                    self._send_msg(pkt, owner, OP_LOOKUP, dst, NOWHERE)
                cacheable = False
        if cacheable:
            for s in states:
                out.register(s)
        else:
            pkt.clear()
        pkt.send(out, True)

    def on_tick(self, ctl: Control) -> None:
        if len(self.tunnel_to) < self.switches - 1:
            self.add_tunnels(ctl)
        now = ctl.now()
        for mac in [m for m, p in self.pending.items() if now - p.since >= self.lookup_timeout]:
            # Unanswered: the cached drop goes, the next frame asks again.
            ctl.removed(self.pending.pop(mac).state)
        for mac in [m for m, b in self.local.items() if now - b.since >= self.timeout]:
            ctl.removed(self.local.pop(mac).state)
            self.counters.expired += 1


@dataclass
class Delivery:
    """A frame that left the fabric: switch, host port, bytes."""

    switch: int
    port: int
    frame: bytes


@dataclass
class Fabric:
    """``switches`` SEATTLE switches with ``hosts_per_switch`` host ports each
    (ports 0..hosts_per_switch-1), a full mesh of tunnels between them, run
    in-process; ``caching=False`` runs every frame through the apps (the
    oracle). Set ``hold_dht`` to keep DHT messages in flight until
    :meth:`release`."""

    switches: int
    hosts_per_switch: int
    caching: bool = True
    timeout: float = 300.0
    hold_dht: bool = False
    apps: list[SeattleSwitch] = field(default_factory=list)
    nodes: list[Switch] = field(default_factory=list)
    held: deque = field(default_factory=deque)
    tunnel_frames: int = 0
    dht_frames: int = 0

    def __post_init__(self) -> None:
        ports = list(range(self.hosts_per_switch))
        for s in range(self.switches):
            app = SeattleSwitch(s, self.switches, ports, timeout=self.timeout)
            sw = Switch(app, ports, caching=self.caching)
            sw.control(app.add_tunnels)
            self.apps.append(app)
            self.nodes.append(sw)

    def send(self, switch: int, port: int, frame: bytes) -> list[Delivery]:
        """A host on ``port`` of ``switch`` sends ``frame``: every frame
        that reaches a host port anywhere, in order."""
        out: list[Delivery] = []
        work = deque([(switch, port, frame)])
        while work:
            s, p, f = work.popleft()
            for q, b in self.nodes[s].process(p, f):
                if q is None:
                    continue
                peer = self.apps[s].peer_of.get(q)
                if peer is None:
                    out.append(Delivery(s, q, bytes(b)))
                    continue
                self.tunnel_frames += 1
                hop = (peer, self.apps[peer].tunnel_to[s], bytes(b))
                is_dht = len(b) >= 14 and int.from_bytes(b[12:14], "big") == ETHERTYPE
                self.dht_frames += is_dht
                if is_dht and self.hold_dht:
                    self.held.append(hop)
                else:
                    work.append(hop)
        return out

    def release(self) -> list[Delivery]:
        """Deliver the DHT messages held so far, and those they cause, until
        none is left."""
        out: list[Delivery] = []
        while self.held:
            s, p, f = self.held.popleft()
            out.extend(self.send(s, p, f))
        return out

    def tick(self, now: float) -> None:
        for sw in self.nodes:
            sw.tick(now)


def make_app() -> SeattleSwitch:
    """One switch alone (``python -m nexthop.sdf run --app seattle.py``):
    switch 0 of 1, its hosts on ports 0-3; the DHT is local."""
    return SeattleSwitch(0, 1, [0, 1, 2, 3])
