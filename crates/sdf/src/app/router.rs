//! A built-in app: an IPv4 router (paper §5.1's second example), the Rust
//! twin of `python/nexthop/apps/router.py` (same interfaces, same route
//! file, same state ids per route).
//!
//! The router has one interface per port (its MAC and IPv4 address) and a
//! route table of `PREFIX PORT NEXT_HOP_MAC` lines. Each route has its own
//! state id (issued when a decision first uses it); a decision registers
//! the id of the route it used, so a route change revokes exactly the
//! decisions of the changed prefix, and a new route revokes those of the
//! prefix that covered it (they may belong to the new route now).
//!
//! What a decision marks:
//!
//! * forwarded (IPv4 to a routed destination): the ethertype and the
//!   shortest leading part of the destination address that settles the
//!   lookup: the route's prefix length, extended past every more specific
//!   route and router address inside the prefix just far enough to tell
//!   the destination apart from it. A /24 with no more specific entries is
//!   one decision for the whole /24. The rewrite is the next hop's MAC and
//!   the output interface's MAC; the TTL decrement is a primitive (TTL 0
//!   or 1: dropped), so the TTL is not marked;
//! * IPv4 to one of the router's addresses: the ethertype and the whole
//!   address, sent to the control port;
//! * IPv4 with no route: the ethertype and the whole address, a drop
//!   registered with a "no route" state id that any new route not covered
//!   by another revokes;
//! * anything but IPv4 and ARP: the ethertype, dropped.
//!
//! ARP requests for the router's address on the port they arrive on are
//! answered with a made-up reply (never cached); other ARP frames and
//! frames shorter than their headers are dropped uncached.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use thiserror::Error;

use super::{App, AppError, Control, InPkt, OutPkt};
use crate::action::Primitive;
use crate::cache::StateId;
use crate::key::PortId;

const ETH_IPV4: u64 = 0x0800;
const ETH_ARP: [u8; 2] = [0x08, 0x06];
/// Bit offset of the IPv4 destination in an untagged frame.
const DST_BIT: usize = 30 * 8;
/// Ethernet/IPv4 ARP request: hardware type, protocol type, sizes, opcode.
const ARP_REQUEST: [u8; 8] = [0, 1, 8, 0, 6, 4, 0, 1];
const ARP_REPLY: [u8; 8] = [0, 1, 8, 0, 6, 4, 0, 2];

/// What was wrong with an interface, a route or a route file.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouteError {
    /// A route file line that does not parse (1-based line number).
    #[error("line {line}: {what}")]
    Line {
        /// Its number.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// An interface that does not parse (`PORT=MAC,IPV4`).
    #[error("interface {0:?}: expected PORT=MAC,IPV4")]
    Iface(String),
    /// Two interfaces on one port.
    #[error("port {0} has two interfaces")]
    DuplicatePort(PortId),
    /// A route out of a port that has no interface.
    #[error("route {0}: port {1} is not one of the router's interfaces")]
    NoIface(Prefix, PortId),
}

/// An IPv4 prefix (no bits set past its length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: u32,
    len: u8,
}

impl Prefix {
    /// `addr/len`; `None` when `len` > 32 or bits past `len` are set.
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Prefix> {
        let addr = u32::from(addr);
        (len <= 32 && addr & !netmask(len) == 0).then_some(Prefix { addr, len })
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// The network address.
    pub fn addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.addr)
    }

    /// Whether `a` lies in the prefix.
    pub fn contains(&self, a: u32) -> bool {
        a & netmask(self.len) == self.addr
    }

    /// Whether `other` lies inside this prefix and is longer.
    fn strictly_covers(&self, other: &Prefix) -> bool {
        other.len > self.len && self.contains(other.addr)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len)
    }
}

impl FromStr for Prefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Prefix, String> {
        let (a, l) = s.split_once('/').unwrap_or((s, "32"));
        let addr: Ipv4Addr = a
            .parse()
            .map_err(|_| format!("{s:?}: not an IPv4 prefix"))?;
        let len: u8 = l.parse().map_err(|_| format!("{s:?}: bad prefix length"))?;
        if len > 32 {
            return Err(format!("{s:?}: prefix length past 32"));
        }
        Prefix::new(addr, len).ok_or_else(|| format!("{s:?}: host bits set"))
    }
}

fn netmask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// One of the router's interfaces: `PORT=MAC,IPV4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Iface {
    /// Its port.
    pub port: PortId,
    /// The router's MAC address on it.
    pub mac: [u8; 6],
    /// The router's IPv4 address on it.
    pub ip: Ipv4Addr,
}

impl FromStr for Iface {
    type Err = RouteError;

    fn from_str(s: &str) -> Result<Iface, RouteError> {
        let bad = || RouteError::Iface(s.to_owned());
        let (port, rest) = s.split_once('=').ok_or_else(bad)?;
        let (mac, ip) = rest.split_once(',').ok_or_else(bad)?;
        Ok(Iface {
            port: port.trim().parse().map_err(|_| bad())?,
            mac: parse_mac(mac.trim()).ok_or_else(bad)?,
            ip: ip.trim().parse().map_err(|_| bad())?,
        })
    }
}

/// A route: packets to `prefix` leave on `port` for `next_hop` (a MAC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The destinations.
    pub prefix: Prefix,
    /// The output port.
    pub port: PortId,
    /// The next hop's MAC address.
    pub next_hop: [u8; 6],
}

/// A route file: `PREFIX PORT NEXT_HOP_MAC` per line, `#` comments, blank
/// lines ignored (the format of `router.py`). A prefix given twice: the
/// last line wins.
pub fn parse_routes(text: &str) -> Result<Vec<Route>, RouteError> {
    let mut out: Vec<Route> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let err = |what: String| RouteError::Line { line: i + 1, what };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [prefix, port, mac] = parts[..] else {
            return Err(err("expected PREFIX PORT NEXT_HOP_MAC".into()));
        };
        let r = Route {
            prefix: prefix.parse().map_err(err)?,
            port: port
                .parse()
                .map_err(|_| err(format!("{port:?}: not a port number")))?,
            next_hop: parse_mac(mac).ok_or_else(|| err(format!("{mac:?}: not a MAC address")))?,
        };
        out.retain(|o| o.prefix != r.prefix);
        out.push(r);
    }
    Ok(out)
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    port: PortId,
    next_hop: [u8; 6],
    /// Issued when a decision first uses the route.
    id: Option<StateId>,
}

/// The IPv4 router (see the module docs).
#[derive(Debug, Default)]
pub struct Router {
    ifaces: BTreeMap<PortId, Iface>,
    routes: BTreeMap<Prefix, Entry>,
    /// The state of the decisions that found no route.
    no_route: Option<StateId>,
    arp_replies: u64,
}

impl Router {
    /// A router with `ifaces` and no routes.
    pub fn new(ifaces: &[Iface]) -> Result<Router, RouteError> {
        let mut r = Router::default();
        for i in ifaces {
            if r.ifaces.insert(i.port, *i).is_some() {
                return Err(RouteError::DuplicatePort(i.port));
            }
        }
        Ok(r)
    }

    /// The interfaces' ports.
    pub fn ports(&self) -> Vec<PortId> {
        self.ifaces.keys().copied().collect()
    }

    /// The routes, by prefix.
    pub fn routes(&self) -> Vec<Route> {
        self.routes
            .iter()
            .map(|(p, e)| Route {
                prefix: *p,
                port: e.port,
                next_hop: e.next_hop,
            })
            .collect()
    }

    /// ARP requests answered.
    pub fn arp_replies(&self) -> u64 {
        self.arp_replies
    }

    /// The route for `dst` (longest prefix match).
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<Route> {
        self.lookup_prefix(u32::from(dst)).map(|p| {
            let e = self.routes[&p];
            Route {
                prefix: p,
                port: e.port,
                next_hop: e.next_hop,
            }
        })
    }

    fn lookup_prefix(&self, dst: u32) -> Option<Prefix> {
        (0..=32u8).rev().find_map(|len| {
            let p = Prefix {
                addr: dst & netmask(len),
                len,
            };
            self.routes.contains_key(&p).then_some(p)
        })
    }

    /// The nearest route strictly covering `p`.
    fn covering(&self, p: &Prefix) -> Option<Prefix> {
        self.routes
            .keys()
            .filter(|c| c.strictly_covers(p))
            .max_by_key(|c| c.len)
            .copied()
    }

    /// Revoke the decisions of route `p` (`None`: of "no route").
    fn revoke(&mut self, ctl: &mut Control<'_>, p: Option<Prefix>) -> usize {
        let id = match p {
            None => self.no_route.take(),
            Some(p) => self.routes.get_mut(&p).and_then(|e| e.id.take()),
        };
        id.map_or(0, |id| ctl.removed(id))
    }

    /// Add or change a route; returns the cached decisions revoked.
    pub fn announce(&mut self, ctl: &mut Control<'_>, r: Route) -> Result<usize, RouteError> {
        if !self.ifaces.contains_key(&r.port) {
            return Err(RouteError::NoIface(r.prefix, r.port));
        }
        let revoked = match self.routes.get(&r.prefix) {
            Some(e) if e.port == r.port && e.next_hop == r.next_hop => return Ok(0),
            Some(_) => self.revoke(ctl, Some(r.prefix)),
            None => {
                let c = self.covering(&r.prefix);
                self.revoke(ctl, c)
            }
        };
        self.routes.insert(
            r.prefix,
            Entry {
                port: r.port,
                next_hop: r.next_hop,
                id: None,
            },
        );
        Ok(revoked)
    }

    /// Remove a route; returns the cached decisions revoked.
    pub fn withdraw(&mut self, ctl: &mut Control<'_>, p: Prefix) -> usize {
        if !self.routes.contains_key(&p) {
            return 0;
        }
        let revoked = self.revoke(ctl, Some(p));
        self.routes.remove(&p);
        revoked
    }

    /// Make `routes` the route table: withdraw what is gone, announce what
    /// is new or changed (unchanged routes keep their decisions). Returns
    /// the cached decisions revoked; on an error (a route out of a port
    /// with no interface) nothing changed.
    pub fn set_routes(
        &mut self,
        ctl: &mut Control<'_>,
        routes: &[Route],
    ) -> Result<usize, RouteError> {
        if let Some(r) = routes.iter().find(|r| !self.ifaces.contains_key(&r.port)) {
            return Err(RouteError::NoIface(r.prefix, r.port));
        }
        let gone: Vec<Prefix> = self
            .routes
            .keys()
            .filter(|p| !routes.iter().any(|r| r.prefix == **p))
            .copied()
            .collect();
        let mut revoked = 0;
        for p in gone {
            revoked += self.withdraw(ctl, p);
        }
        for r in routes {
            revoked += self.announce(ctl, *r)?;
        }
        Ok(revoked)
    }

    /// Destination bits a decision for `dst`, routed by `p`, must mark
    /// (module docs): past every more specific route and router address
    /// inside `p`, up to the first bit where `dst` differs from it.
    fn marked_len(&self, dst: u32, p: &Prefix) -> usize {
        let own = self.ifaces.values().map(|i| Prefix {
            addr: u32::from(i.ip),
            len: 32,
        });
        self.routes
            .keys()
            .copied()
            .chain(own)
            .filter(|q| p.strictly_covers(q))
            .map(|q| (dst ^ q.addr).leading_zeros() as usize + 1)
            .fold(usize::from(p.len), usize::max)
            .min(32)
    }

    fn arp(&mut self, pkt: &mut InPkt) -> Result<(), AppError> {
        let d = pkt.data();
        let Some(iface) = self.ifaces.get(&pkt.in_port()) else {
            return Ok(());
        };
        if d.len() < 42 || d[14..22] != ARP_REQUEST || d[38..42] != iface.ip.octets() {
            return Ok(());
        }
        let mut reply = Vec::with_capacity(42);
        reply.extend_from_slice(&d[6..12]);
        reply.extend_from_slice(&iface.mac);
        reply.extend_from_slice(&ETH_ARP);
        reply.extend_from_slice(&ARP_REPLY);
        reply.extend_from_slice(&iface.mac);
        reply.extend_from_slice(&d[38..42]);
        reply.extend_from_slice(&d[22..32]);
        let mut out = OutPkt::raw(reply);
        out.add_destination(pkt.in_port());
        pkt.send(out, true)?;
        self.arp_replies += 1;
        Ok(())
    }
}

impl App for Router {
    fn name(&self) -> &str {
        "router"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        if pkt.len() < 14 {
            return Ok(());
        }
        if pkt.data()[12..14] == ETH_ARP {
            // Reads the frame without marks: nothing cached.
            return self.arp(pkt);
        }
        if pkt.field(96, 16)? != ETH_IPV4 {
            let out = pkt.new_out_pkt();
            pkt.send(out, true)?;
            return Ok(());
        }
        if pkt.len() < 34 {
            // A truncated IPv4 header: dropped, not cached (the decision
            // would depend on the length).
            pkt.clear();
            return Ok(());
        }
        pkt.require_len(34)?;
        let d = pkt.data();
        let dst = u32::from_be_bytes([d[30], d[31], d[32], d[33]]);
        let mut out = pkt.new_out_pkt();
        if self.ifaces.values().any(|i| u32::from(i.ip) == dst) {
            pkt.mark(DST_BIT, 32)?;
            out.to_controller();
            pkt.send(out, true)?;
            return Ok(());
        }
        let Some(p) = self.lookup_prefix(dst) else {
            pkt.mark(DST_BIT, 32)?;
            let id = match self.no_route {
                Some(id) => id,
                None => *self.no_route.insert(ctl.new_state_id()?),
            };
            out.register(id);
            pkt.send(out, true)?;
            return Ok(());
        };
        let bits = self.marked_len(dst, &p);
        if bits > 0 {
            pkt.mark(DST_BIT, bits)?;
        }
        let ttl = Primitive::ip_ttl_for(pkt.data())
            .ok_or_else(|| AppError("no IPv4 TTL in the header".into()))?;
        let Some(entry) = self.routes.get_mut(&p) else {
            return Err(AppError(format!("route {p} vanished")));
        };
        let id = match entry.id {
            Some(id) => id,
            None => *entry.id.insert(ctl.new_state_id()?),
        };
        let (port, next_hop) = (entry.port, entry.next_hop);
        let Some(iface) = self.ifaces.get(&port) else {
            return Err(AppError(format!("route {p}: port {port} has no interface")));
        };
        let mut macs = [0u8; 12];
        macs[..6].copy_from_slice(&next_hop);
        macs[6..].copy_from_slice(&iface.mac);
        out.set_bytes(0, &macs)?;
        out.push_primitive(ttl)?;
        out.add_destination(port);
        out.register(id);
        pkt.send(out, true)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{Ports, Switch};
    use crate::cache::Config;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    const R1: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const R2: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const H1: [u8; 6] = [2, 0, 0, 0, 1, 1];
    const H2: [u8; 6] = [2, 0, 0, 0, 2, 2];

    fn ifaces() -> Vec<Iface> {
        vec![
            "1=02:00:00:00:00:01,192.0.2.1".parse().unwrap(),
            "2=02:00:00:00:00:02,198.51.100.1".parse().unwrap(),
        ]
    }

    fn routes() -> Vec<Route> {
        parse_routes(
            "# two subnets\n192.0.2.0/24 1 02:00:00:00:01:01\n\n198.51.100.0/24 2 02:00:00:00:02:02 # h2\n",
        )
        .unwrap()
    }

    fn switch(caching: bool) -> Switch<Router> {
        let mut s = Switch::new(
            Router::new(&ifaces()).unwrap(),
            Config::default(),
            Ports::physical(&[1, 2]),
            caching,
        )
        .unwrap();
        let rs = routes();
        s.with_app(|app, ctl| app.set_routes(ctl, &rs)).unwrap();
        s
    }

    fn udp(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&R1);
        f[6..12].copy_from_slice(&H1);
        f[12..14].copy_from_slice(&[8, 0]);
        let ip = [
            0x45, 0, 0, 46, 0, 0, 0x40, 0, ttl, 17, 0, 0, src[0], src[1], src[2], src[3], dst[0],
            dst[1], dst[2], dst[3],
        ];
        f[14..34].copy_from_slice(&ip);
        let ck = nexthop_wire::checksum::ipv4_header_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&ck.to_be_bytes());
        f
    }

    #[test]
    fn routed_packets_get_the_macs_and_a_decremented_ttl_and_hit_after() {
        let mut s = switch(true);
        let f = udp([192, 0, 2, 2], [198, 51, 100, 7], 64);
        let e = s.process(1, &f);
        assert_eq!(e.len(), 1);
        assert_eq!(&e[0].ports[..], &[2]);
        let b = &e[0].bytes;
        assert_eq!(b[..6], H2);
        assert_eq!(b[6..12], R2);
        assert_eq!(b[22], 63);
        assert_eq!(
            nexthop_wire::checksum::ipv4_header_checksum(&b[14..34]),
            u16::from_be_bytes([b[24], b[25]])
        );
        // The decision covers 198.51.100.4/30 (up to the bit that tells
        // .7 from the router's .1): .6 hits it, .200 misses and installs
        // 198.51.100.128/25, which .201 hits.
        let e = s.process(1, &udp([192, 0, 2, 2], [198, 51, 100, 6], 9));
        assert_eq!(e[0].bytes[22], 8);
        assert_eq!(s.counters().misses, 1);
        s.process(1, &udp([192, 0, 2, 2], [198, 51, 100, 200], 9));
        s.process(1, &udp([192, 0, 2, 2], [198, 51, 100, 201], 9));
        assert_eq!((s.counters().misses, s.counters().hits), (2, 2));
    }

    #[test]
    fn the_marked_destination_stops_short_of_the_router_and_nested_routes() {
        let mut s = switch(false);
        let extra = Route {
            prefix: "198.51.100.128/25".parse().unwrap(),
            port: 1,
            next_hop: H1,
        };
        s.with_app(|app, ctl| app.announce(ctl, extra)).unwrap();
        let r = s.app();
        let p: Prefix = "198.51.100.0/24".parse().unwrap();
        let ip = |s: &str| u32::from(s.parse::<Ipv4Addr>().unwrap());
        // .7 vs the router's .1: they part at bit 29; vs .128/25 at bit 24.
        assert_eq!(r.marked_len(ip("198.51.100.7"), &p), 30);
        assert_eq!(r.marked_len(ip("198.51.100.64"), &p), 26);
        let q: Prefix = "192.0.2.0/24".parse().unwrap();
        assert_eq!(r.marked_len(ip("192.0.2.200"), &q), 25);
    }

    #[test]
    fn a_route_change_revokes_its_decisions_only() {
        let mut s = switch(true);
        s.process(1, &udp([192, 0, 2, 2], [198, 51, 100, 7], 64));
        s.process(2, &udp([198, 51, 100, 7], [192, 0, 2, 2], 64));
        assert_eq!(s.cache().len(), 2);
        let mut rs = routes();
        rs[1].next_hop = [2, 0, 0, 0, 2, 3];
        assert_eq!(s.with_app(|app, ctl| app.set_routes(ctl, &rs)), Ok(1));
        assert_eq!(s.cache().len(), 1);
        let e = s.process(1, &udp([192, 0, 2, 2], [198, 51, 100, 7], 64));
        assert_eq!(e[0].bytes[..6], [2, 0, 0, 0, 2, 3]);
        // Unchanged routes revoke nothing.
        assert_eq!(s.with_app(|app, ctl| app.set_routes(ctl, &rs)), Ok(0));
        // A more specific route takes over part of the /24: the /24's
        // decisions go.
        let more = Route {
            prefix: "198.51.100.0/28".parse().unwrap(),
            port: 1,
            next_hop: H1,
        };
        assert_eq!(s.with_app(|app, ctl| app.announce(ctl, more)), Ok(1));
        let e = s.process(1, &udp([192, 0, 2, 2], [198, 51, 100, 7], 64));
        assert_eq!(&e[0].ports[..], &[1]);
    }

    #[test]
    fn arp_for_the_router_is_answered_and_other_traffic_is_dropped_or_punted() {
        let mut s = switch(true);
        let mut arp = vec![0xff; 6];
        arp.extend_from_slice(&H1);
        arp.extend_from_slice(&ETH_ARP);
        arp.extend_from_slice(&ARP_REQUEST);
        arp.extend_from_slice(&H1);
        arp.extend_from_slice(&[192, 0, 2, 2]);
        arp.extend_from_slice(&[0; 6]);
        arp.extend_from_slice(&[192, 0, 2, 1]);
        arp.resize(60, 0);
        let e = s.process(1, &arp);
        assert_eq!(e.len(), 1);
        let r = &e[0].bytes;
        assert_eq!(
            (&r[..6], &r[6..12], &r[20..22]),
            (&H1[..], &R1[..], &[0, 2][..])
        );
        assert_eq!((&r[22..28], &r[28..32]), (&R1[..], &[192, 0, 2, 1][..]));
        assert_eq!((&r[32..38], &r[38..42]), (&H1[..], &[192, 0, 2, 2][..]));
        assert_eq!(s.app().arp_replies(), 1);
        // For another address, on the wrong port, truncated: no answer.
        assert!(s.process(2, &arp).is_empty());
        assert!(s.process(1, &arp[..30]).is_empty());
        assert_eq!(s.cache().len(), 0);
        // To the router itself: the control port. Unrouted: dropped.
        let e = s.process(1, &udp([192, 0, 2, 2], [192, 0, 2, 1], 64));
        assert!(e[0].controller && e[0].ports.is_empty());
        assert!(s
            .process(1, &udp([192, 0, 2, 2], [203, 0, 113, 1], 64))
            .is_empty());
        // TTL 1 is not forwarded.
        assert!(s
            .process(1, &udp([192, 0, 2, 2], [198, 51, 100, 9], 1))
            .is_empty());
        // A new default route revokes the no-route drops.
        let dflt = Route {
            prefix: "0.0.0.0/0".parse().unwrap(),
            port: 2,
            next_hop: H2,
        };
        assert_eq!(s.with_app(|app, ctl| app.announce(ctl, dflt)), Ok(1));
        let e = s.process(1, &udp([192, 0, 2, 2], [203, 0, 113, 1], 64));
        assert_eq!(&e[0].ports[..], &[2]);
    }

    #[test]
    fn bad_interfaces_and_route_files_are_errors_with_their_line() {
        for bad in [
            "1=02:00:00:00:00:01",
            "x=02:00:00:00:00:01,10.0.0.1",
            "1=02:00:00:00:01,10.0.0.1",
        ] {
            assert!(bad.parse::<Iface>().is_err(), "{bad}");
        }
        let two = [ifaces()[0], ifaces()[0]];
        assert_eq!(Router::new(&two).unwrap_err(), RouteError::DuplicatePort(1));
        for (text, line) in [
            ("10.0.0.0/8 1\n", 1),
            ("\n10.0.0.1/8 1 02:00:00:00:00:01\n", 2),
            ("10.0.0.0/33 1 02:00:00:00:00:01\n", 1),
            ("10.0.0.0/8 one 02:00:00:00:00:01\n", 1),
            ("10.0.0.0/8 1 02:00:00:00:00\n", 1),
        ] {
            match parse_routes(text) {
                Err(RouteError::Line { line: l, .. }) => assert_eq!(l, line, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let mut s = switch(true);
        let r = parse_routes("10.0.0.0/8 3 02:00:00:00:00:01").unwrap();
        let e = s.with_app(|app, ctl| app.set_routes(ctl, &r));
        assert!(matches!(e, Err(RouteError::NoIface(_, 3))), "{e:?}");
        assert_eq!(s.app().routes(), routes());
    }

    /// Differential: the cached router forwards every packet exactly as
    /// the router without a cache, across random route changes.
    #[test]
    fn cached_router_equals_uncached_under_random_routes_and_traffic() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(34);
        let (mut cached, mut plain) = (switch(true), switch(false));
        let base = routes();
        let mut extra: Vec<Route> = Vec::new();
        for round in 0..200 {
            if round % 10 == 0 {
                // Random more specific and covering routes in 198.51.0.0/16.
                extra.clear();
                for _ in 0..rng.gen_range(0..6) {
                    let len = rng.gen_range(8..=32u8);
                    let addr = u32::from_be_bytes([198, 51, rng.gen(), rng.gen()]) & netmask(len);
                    extra.push(Route {
                        prefix: Prefix { addr, len },
                        port: rng.gen_range(1..=2),
                        next_hop: [2, 0, 0, 0, rng.gen(), rng.gen()],
                    });
                }
                let mut all = base.clone();
                for r in &extra {
                    all.retain(|o| o.prefix != r.prefix);
                    all.push(*r);
                }
                for s in [&mut cached, &mut plain] {
                    s.with_app(|app, ctl| app.set_routes(ctl, &all)).unwrap();
                }
            }
            let dst = [198, 51, rng.gen_range(98..=101), rng.gen()];
            let f = udp([192, 0, 2, 2], dst, rng.gen_range(0..4));
            let port = rng.gen_range(1..=2);
            assert_eq!(cached.process(port, &f), plain.process(port, &f), "{dst:?}");
        }
        assert!(cached.counters().misses < plain.counters().misses);
    }
}
