//! Decision-cache miss rate against cache size (software-defined
//! forwarding, section 5, Figs. 3-6), replayed through the real
//! [`Switch`] of this crate (decision cache with LRU in front of an app).
//!
//! ```text
//! cargo run --release -p nexthop-sdf --example miss_curve -- --trace FILE
//!     [--app l2|fib|16|24] [--sizes 16,64,256,...] [--dos 0,0.1,0.5]
//!     [--caches wildcard,exact] [--warmup 0.5] [--max-packets N] [--timeout 15]
//!     [--table ../shared/data/routeviews-20151101-ipv4.txt.gz] [--json]
//! ```
//!
//! The traffic is built from real flow records: a Zeek `conn.log` (its
//! `#fields` header names the columns) or an Argus `.binetflow` CSV (header
//! `StartTime,Dur,...`), gzipped or not. Each flow's packets (Zeek:
//! `orig_pkts` one way, `resp_pkts` back; Argus: `TotPkts` split by the
//! share of `SrcBytes` in `TotBytes`) are spread evenly over its duration
//! and all flows' packets are replayed in time order as 60-byte Ethernet /
//! IPv4 frames with the flow's addresses, protocol and ports. IPv6 flows
//! are skipped. `--trace synthetic:FLOWS` instead makes FLOWS seeded flows
//! over one hour whose destinations, inside random prefixes of the table,
//! are drawn Zipf (s = 1) and whose sizes are Pareto (alpha 1.2).
//!
//! Apps (`--app`):
//! * `l2`: this crate's learning switch ([`L2Switch`], hard timeout
//!   `--timeout` seconds, 15 as in the paper). Flow records carry no MAC
//!   addresses: a private or link-local IPv4 address is a host of the LAN
//!   with a MAC derived from it, on one of 46 access ports; every other
//!   address lies behind the gateway (one MAC, port 1); broadcast and
//!   multicast destinations get their group MACs.
//! * `fib`: IPv4 routing by longest-prefix match on the RouteViews table
//!   (`--table`, next hop = origin ASN mod 250 + 1, a default route to
//!   port 0). A decision marks the EtherType and exactly the destination
//!   bits that fix its result: down the table's binary trie as far as the
//!   destination's path goes, so every address matching those bits has the
//!   same longest match (the paper's "decisions based on the FIB").
//! * `16`, `24`: decisions at /16 or /24 granularity (the paper's
//!   assumption for its anonymized traces): the first 16 or 24 destination
//!   bits marked, the port a function of them.
//!
//! Each app runs with the caches of `--caches` (default both) for every
//! size in `--sizes`: `wildcard`
//! (the app's marks, as SDF caches decisions) and `exact` (the same app,
//! but every header byte and the ingress port marked: one entry per
//! distinct header, a microflow cache). `--dos` adds uniformly random
//! attack packets (random source, destination and ports, on the uplink)
//! making up that share of all packets (Fig. 6; IP apps only).
//! `--warmup F`: the first fraction F of the packets warms the cache and
//! is not counted (the paper: 0.5 for L2, none for LPM).
//!
//! Output: one line per (cache, dos share, size), or with `--json` one
//! JSON document: the trace's statistics and the rows.
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::process::exit;
use std::time::Duration;

use nexthop_sdf::app::{App, AppError, Control, InPkt, L2Config, L2Switch, Ports, Switch};
use nexthop_sdf::{Config, PortId};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const USAGE: &str = "miss_curve --trace FILE|synthetic:FLOWS [--app l2|fib|16|24] \
[--sizes 16,64,...] [--caches wildcard,exact] [--dos 0,0.1,...] [--warmup F] [--max-packets N] [--timeout S] \
[--table FILE] [--json]";
const FRAME_LEN: usize = 60;
/// The byte offset of the IPv4 destination in our frames.
const DST_AT: usize = 30;
const UPLINK: PortId = 0;
const GATEWAY_PORT: PortId = 1;
const ACCESS_PORTS: u32 = 46;
const ROUTE_PORTS: u32 = 250;
/// Packets a replay holds at most (records claiming more are refused).
const MAX_PACKETS: u64 = 1 << 25;
/// The largest number a record's field may hold (about 31,700 years in
/// seconds), so that times stay exact enough and durations convertible.
const MAX_NUMBER: f64 = 1e12;
/// Synthetic flows at most.
const MAX_FLOWS: usize = 1 << 24;
/// Cache sizes at most.
const MAX_SIZE: usize = 1 << 24;

fn fail(msg: &str) -> ! {
    eprintln!("miss_curve: {msg}\nusage: {USAGE}");
    exit(2)
}

/// One direction of a flow record.
#[derive(Clone, Copy, Debug)]
struct Flow {
    start: f64,
    duration: f64,
    src: u32,
    dst: u32,
    proto: u8,
    sport: u16,
    dport: u16,
    packets: u64,
}

#[derive(Clone, Copy, Debug)]
struct Packet {
    time: f64,
    src: u32,
    dst: u32,
    proto: u8,
    sport: u16,
    dport: u16,
    attack: bool,
}

fn read_text(path: &Path) -> String {
    let raw = std::fs::read(path)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
    let mut text = String::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut bytes = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut bytes)
            .unwrap_or_else(|e| fail(&format!("{}: bad gzip: {e}", path.display())));
        text = String::from_utf8_lossy(&bytes).into_owned();
    } else {
        text.push_str(&String::from_utf8_lossy(&raw));
    }
    text
}

fn ipv4(s: &str) -> Option<u32> {
    s.trim().parse::<std::net::Ipv4Addr>().ok().map(u32::from)
}

fn proto_number(s: &str) -> u8 {
    match s.trim() {
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        other => other.parse().unwrap_or(0),
    }
}

/// A port written in decimal or (Argus, for ICMP) as `0x...`; 0 if neither.
fn port_number(s: &str) -> u16 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u16::from_str_radix(h, 16).unwrap_or(0),
        None => s.parse().unwrap_or(0),
    }
}

/// A count, time or duration of a record: finite, from 0 to [`MAX_NUMBER`]
/// (anything else reads as 0).
fn number(s: &str) -> f64 {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| (0.0..=MAX_NUMBER).contains(x))
        .unwrap_or(0.0)
}

/// Zeek conn.log: both directions of every IPv4 flow.
fn parse_zeek(text: &str) -> Vec<Flow> {
    let fields: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("#fields\t"))
        .unwrap_or_else(|| fail("Zeek log without a #fields line"))
        .split('\t')
        .collect();
    let col = |name: &str| {
        fields
            .iter()
            .position(|f| *f == name)
            .unwrap_or_else(|| fail(&format!("Zeek log without the {name} field")))
    };
    let (ts, oh, op, rh, rp) = (
        col("ts"),
        col("id.orig_h"),
        col("id.orig_p"),
        col("id.resp_h"),
        col("id.resp_p"),
    );
    let (proto, dur, opk, rpk) = (
        col("proto"),
        col("duration"),
        col("orig_pkts"),
        col("resp_pkts"),
    );
    let mut flows = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |i: usize| f.get(i).copied().unwrap_or("-");
        let (Some(a), Some(b)) = (ipv4(get(oh)), ipv4(get(rh))) else {
            continue;
        };
        let (start, duration, p) = (number(get(ts)), number(get(dur)), proto_number(get(proto)));
        let (pa, pb) = (port_number(get(op)), port_number(get(rp)));
        for (src, dst, sport, dport, packets) in
            [(a, b, pa, pb, get(opk)), (b, a, pb, pa, get(rpk))]
        {
            let packets = number(packets) as u64;
            if packets > 0 {
                flows.push(Flow {
                    start,
                    duration,
                    src,
                    dst,
                    proto: p,
                    sport,
                    dport,
                    packets,
                });
            }
        }
    }
    flows
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2013/12/17 22:09:19.500617` as Unix seconds.
fn argus_time(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once(' ')?;
    let mut d = date.split('/').map(|x| x.parse::<i64>().ok());
    let (y, m, dd) = (d.next()??, d.next()??, d.next()??);
    if !(1..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&dd) {
        return None;
    }
    let mut t = time.split(':');
    let (h, mi) = (
        t.next()?.parse::<f64>().ok()?,
        t.next()?.parse::<f64>().ok()?,
    );
    let sec = t.next()?.parse::<f64>().ok()?;
    let clock = [(h, 24.0), (mi, 60.0), (sec, 61.0)];
    if clock.iter().any(|&(v, max)| !(0.0..max).contains(&v)) {
        return None;
    }
    Some(days_from_civil(y, m, dd) as f64 * 86_400.0 + h * 3600.0 + mi * 60.0 + sec)
}

/// Argus binetflow CSV: both directions of every IPv4 flow.
fn parse_argus(text: &str) -> Vec<Flow> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|f| *f == name)
            .unwrap_or_else(|| fail(&format!("binetflow without the {name} column")))
    };
    let (st, dur, pr, sa, sp, da, dp) = (
        col("StartTime"),
        col("Dur"),
        col("Proto"),
        col("SrcAddr"),
        col("Sport"),
        col("DstAddr"),
        col("Dport"),
    );
    let (tp, tb, sb) = (col("TotPkts"), col("TotBytes"), col("SrcBytes"));
    let mut flows = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.splitn(header.len(), ',').collect();
        let get = |i: usize| f.get(i).copied().unwrap_or("");
        let (Some(a), Some(b), Some(start)) = (ipv4(get(sa)), ipv4(get(da)), argus_time(get(st)))
        else {
            continue;
        };
        let total = number(get(tp)) as u64;
        let (bytes, src_bytes) = (number(get(tb)), number(get(sb)));
        let share = if bytes > 0.0 {
            (src_bytes / bytes).min(1.0)
        } else {
            1.0
        };
        let forward = ((total as f64 * share).round() as u64).clamp(total.min(1), total);
        let (duration, p) = (number(get(dur)), proto_number(get(pr)));
        let (pa, pb) = (port_number(get(sp)), port_number(get(dp)));
        for (src, dst, sport, dport, packets) in
            [(a, b, pa, pb, forward), (b, a, pb, pa, total - forward)]
        {
            if packets > 0 {
                flows.push(Flow {
                    start,
                    duration,
                    src,
                    dst,
                    proto: p,
                    sport,
                    dport,
                    packets,
                });
            }
        }
    }
    flows
}

/// FLOWS seeded flows over an hour: destinations inside random table
/// prefixes, drawn Zipf (s = 1); sizes Pareto (alpha 1.2, at most 10,000
/// packets); sources in 10.0.0.0/16; replies half the request's packets.
fn synthetic(flows: usize, routes: &[(u32, u8, u32)]) -> Vec<Flow> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(0x5df);
    let pool: Vec<u32> = (0..(flows / 4).max(1))
        .map(|_| {
            let (p, len, _) = routes[r.gen_range(0..routes.len())];
            let host = if len >= 32 { 0 } else { r.gen::<u32>() >> len };
            p | host
        })
        .collect();
    let ranks = nexthop_testutil::keys::zipf_indices(7, pool.len(), 1.0, flows)
        .unwrap_or_else(|e| fail(&format!("zipf: {e:?}")));
    let mut out = Vec::with_capacity(2 * flows);
    for rank in ranks {
        let u: f64 = r.gen_range(f64::EPSILON..1.0);
        let packets = (u.powf(-1.0 / 1.2).floor() as u64).clamp(1, 10_000);
        let src = 0x0a00_0000 | r.gen_range(0..1u32 << 16);
        let (dst, sport, dport) = (pool[rank], r.gen_range(1024..u16::MAX), 443);
        let start = r.gen_range(0.0..3600.0);
        let duration = packets as f64 * 0.02;
        out.push(Flow {
            start,
            duration,
            src,
            dst,
            proto: 6,
            sport,
            dport,
            packets,
        });
        if packets > 1 {
            let back = packets / 2;
            out.push(Flow {
                start,
                duration,
                src: dst,
                dst: src,
                proto: 6,
                sport: dport,
                dport: sport,
                packets: back,
            });
        }
    }
    out
}

/// Every flow's packets spread evenly over its duration, in time order;
/// an error if the records claim more than [`MAX_PACKETS`] packets.
fn packets_of(flows: &[Flow]) -> Result<Vec<Packet>, String> {
    let total = flows.iter().fold(0u64, |t, f| t.saturating_add(f.packets));
    if total > MAX_PACKETS {
        return Err(format!(
            "the records hold {total} packets, more than {MAX_PACKETS}"
        ));
    }
    let mut out = Vec::with_capacity(total as usize);
    for f in flows {
        for i in 0..f.packets {
            let time = f.start + f.duration * i as f64 / f.packets as f64;
            out.push(Packet {
                time,
                src: f.src,
                dst: f.dst,
                proto: f.proto,
                sport: f.sport,
                dport: f.dport,
                attack: false,
            });
        }
    }
    out.sort_by(|a, b| a.time.total_cmp(&b.time));
    Ok(out)
}

/// `share` of all packets replaced by uniformly random attack packets,
/// interleaved evenly (the trace's packets keep their order).
fn with_attack(trace: &[Packet], share: f64, seed: u64) -> Vec<Packet> {
    if share <= 0.0 {
        return trace.to_vec();
    }
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let per = share / (1.0 - share);
    let mut out = Vec::with_capacity((trace.len() as f64 * (1.0 + per)) as usize + 1);
    let mut credit = 0.0;
    for p in trace {
        credit += per;
        while credit >= 1.0 {
            credit -= 1.0;
            out.push(Packet {
                time: p.time,
                src: r.gen(),
                dst: r.gen(),
                proto: 17,
                sport: r.gen(),
                dport: r.gen(),
                attack: true,
            });
        }
        out.push(*p);
    }
    out
}

fn is_lan(a: u32) -> bool {
    let o = a.to_be_bytes();
    o[0] == 10
        || (o[0] == 172 && o[1] & 0xf0 == 16)
        || (o[0] == 192 && o[1] == 168)
        || (o[0] == 169 && o[1] == 254)
}

const GATEWAY_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

/// The MAC a LAN switch sees for IPv4 address `a` as a destination.
fn mac_of(a: u32) -> [u8; 6] {
    let o = a.to_be_bytes();
    if a == u32::MAX || (is_lan(a) && o[3] == 255) {
        [0xff; 6]
    } else if o[0] & 0xf0 == 0xe0 {
        [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
    } else if is_lan(a) {
        [0x02, 0x01, o[0], o[1], o[2], o[3]]
    } else {
        GATEWAY_MAC
    }
}

/// The port a frame from `src` enters on: the LAN host's access port, the
/// gateway's, or (attack traffic) the uplink.
fn ingress(p: &Packet) -> PortId {
    if p.attack {
        UPLINK
    } else if is_lan(p.src) {
        2 + (p.src % ACCESS_PORTS) as PortId
    } else {
        GATEWAY_PORT
    }
}

fn frame(p: &Packet, buf: &mut [u8; FRAME_LEN]) {
    *buf = [0; FRAME_LEN];
    let src_mac = if is_lan(p.src) && !p.attack {
        mac_of(p.src)
    } else {
        GATEWAY_MAC
    };
    buf[0..6].copy_from_slice(&mac_of(p.dst));
    buf[6..12].copy_from_slice(&src_mac);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    buf[14] = 0x45;
    buf[16..18].copy_from_slice(&46u16.to_be_bytes());
    buf[22] = 64;
    buf[23] = p.proto;
    buf[26..30].copy_from_slice(&p.src.to_be_bytes());
    buf[30..34].copy_from_slice(&p.dst.to_be_bytes());
    let mut sum: u32 = buf[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    buf[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    buf[34..36].copy_from_slice(&p.sport.to_be_bytes());
    buf[36..38].copy_from_slice(&p.dport.to_be_bytes());
}

/// A binary trie of the routing table that answers, for a destination,
/// its longest match and how many leading bits fix that answer.
struct Trie {
    /// Children (0: none) per node; node 0 is the root.
    kids: Vec<[u32; 2]>,
    /// The next hop of the prefix ending at the node, if one does.
    hop: Vec<Option<u32>>,
}

impl Trie {
    fn new(routes: &[(u32, u8, u32)]) -> Trie {
        let mut t = Trie {
            kids: vec![[0, 0]],
            hop: vec![None],
        };
        for &(addr, len, nh) in routes {
            let mut n = 0usize;
            for bit in 0..len {
                let b = ((addr >> (31 - bit)) & 1) as usize;
                if t.kids[n][b] == 0 {
                    t.kids[n][b] = t.kids.len() as u32;
                    t.kids.push([0, 0]);
                    t.hop.push(None);
                }
                n = t.kids[n][b] as usize;
            }
            t.hop[n] = Some(nh);
        }
        t
    }

    /// (next hop, bits to mark): every address sharing `bits` leading
    /// bits with `d` has the same longest match (no prefix lies strictly
    /// inside that block).
    fn decide(&self, d: u32) -> (u32, usize) {
        let (mut n, mut best) = (0usize, 0u32);
        for depth in 0..32usize {
            if let Some(h) = self.hop[n] {
                best = h;
            }
            let b = ((d >> (31 - depth)) & 1) as usize;
            let next = self.kids[n][b];
            if next == 0 {
                let leaf = self.kids[n] == [0, 0];
                return (best, if leaf { depth } else { depth + 1 });
            }
            n = next as usize;
        }
        (self.hop[n].unwrap_or(best), 32)
    }
}

/// The routing table: (address, length, next hop) with next hop = ASN
/// mod 250 + 1 and a default route to port 0.
fn load_table(path: &Path) -> Vec<(u32, u8, u32)> {
    let mut routes = vec![(0u32, 0u8, u32::from(UPLINK))];
    for line in read_text(path).lines() {
        let mut f = line.split_whitespace();
        let (Some(prefix), Some(asn)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((a, l)) = prefix.split_once('/') else {
            continue;
        };
        let (Some(a), Ok(l)) = (ipv4(a), l.parse::<u8>()) else {
            continue;
        };
        if l > 32 {
            continue;
        }
        let mask = if l == 0 { 0 } else { u32::MAX << (32 - l) };
        let asn: u64 = asn.parse().unwrap_or(0);
        routes.push((a & mask, l, (asn % u64::from(ROUTE_PORTS)) as u32 + 1));
    }
    if routes.len() == 1 {
        fail(&format!("{}: no IPv4 routes", path.display()));
    }
    routes
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Granularity {
    Fib,
    Bits(usize),
}

/// IPv4 forwarding on the destination: by the FIB or at a fixed
/// granularity.
struct Router<'t> {
    trie: &'t Trie,
    granularity: Granularity,
}

impl App for Router<'_> {
    fn name(&self) -> &str {
        "router"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, _ctl: &mut Control<'_>) -> Result<(), AppError> {
        let ether = pkt.field(96, 16).map_err(|e| AppError(e.to_string()))?;
        if ether != 0x0800 {
            return Ok(());
        }
        let data = pkt.data();
        let d = u32::from_be_bytes([
            data[DST_AT],
            data[DST_AT + 1],
            data[DST_AT + 2],
            data[DST_AT + 3],
        ]);
        let (port, bits) = match self.granularity {
            Granularity::Fib => self.trie.decide(d),
            Granularity::Bits(b) => ((d >> (32 - b)) % ROUTE_PORTS + 1, b),
        };
        if bits > 0 {
            pkt.mark(DST_AT * 8, bits)
                .map_err(|e| AppError(e.to_string()))?;
        }
        let mut out = pkt.new_out_pkt();
        out.add_destination(port as PortId);
        pkt.send(out, true).map_err(|e| AppError(e.to_string()))
    }
}

/// The same app with every header byte and the ingress port marked: an
/// exact-match (microflow) cache of its decisions.
struct Exact<A>(A);

impl<A: App> App for Exact<A> {
    fn name(&self) -> &str {
        "exact"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        self.0.on_packet(pkt, ctl)?;
        let bits = pkt.header_len() * 8;
        pkt.mark(0, bits).map_err(|e| AppError(e.to_string()))?;
        pkt.mark_ingress();
        Ok(())
    }

    fn on_tick(&mut self, ctl: &mut Control<'_>) {
        self.0.on_tick(ctl);
    }
}

#[derive(Debug, Default)]
struct Outcome {
    measured: u64,
    misses: u64,
    legit: u64,
    legit_misses: u64,
    entries: usize,
    masks: usize,
    uncached: u64,
}

fn replay<A: App>(app: A, capacity: usize, packets: &[Packet], warm: usize) -> Outcome {
    let cfg = Config {
        capacity,
        front_slots: capacity.next_power_of_two().clamp(4, 1 << 14),
        ..Config::default()
    };
    let ports: Vec<PortId> = (0..=ROUTE_PORTS as PortId + 1).collect();
    let mut sw = Switch::new(app, cfg, Ports::physical(&ports), true)
        .unwrap_or_else(|e| fail(&format!("cache config: {e}")));
    let mut o = Outcome::default();
    let mut buf = [0u8; FRAME_LEN];
    let t0 = packets.first().map_or(0.0, |p| p.time);
    let mut ticked = 0.0;
    for (i, p) in packets.iter().enumerate() {
        let now = p.time - t0;
        if now >= ticked + 1.0 {
            ticked = now;
            sw.tick(Duration::from_secs_f64(now));
        }
        frame(p, &mut buf);
        let before = sw.counters().misses;
        sw.process(ingress(p), &buf);
        if i < warm {
            continue;
        }
        let missed = u64::from(sw.counters().misses > before);
        o.measured += 1;
        o.misses += missed;
        if !p.attack {
            o.legit += 1;
            o.legit_misses += missed;
        }
    }
    let stats = sw.stats();
    o.entries = sw.cache().len();
    o.masks = sw.cache().masks();
    o.uncached = stats.app.uncacheable
        + stats.cache.not_cached_no_deps
        + stats.cache.not_cached_stale
        + stats.cache.admission_refusals();
    o
}

fn list<T: std::str::FromStr>(s: &str, what: &str) -> Vec<T> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<T>()
                .unwrap_or_else(|_| fail(&format!("{what}: {x:?} is not understood")))
        })
        .collect()
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut trace, mut app, mut json) = (None, "fib".to_string(), false);
    let mut caches: Vec<String> = vec!["wildcard".into(), "exact".into()];
    let mut sizes: Vec<usize> = vec![16, 64, 256, 1024, 4096, 16384, 65536];
    let (mut dos, mut warmup, mut max_packets, mut timeout) =
        (vec![0.0f64], 0.0f64, usize::MAX, 15.0f64);
    let mut table = "../shared/data/routeviews-20151101-ipv4.txt.gz".to_string();
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--trace" => trace = Some(val()),
            "--app" => app = val(),
            "--sizes" => sizes = list(&val(), "--sizes"),
            "--dos" => dos = list(&val(), "--dos"),
            "--caches" => caches = list(&val(), "--caches"),
            "--warmup" => warmup = list::<f64>(&val(), "--warmup")[0],
            "--max-packets" => {
                let v = val();
                max_packets = nexthop_testutil::args::parse_count(&v)
                    .unwrap_or_else(|| fail(&format!("--max-packets: {v:?}")));
            }
            "--timeout" => timeout = list::<f64>(&val(), "--timeout")[0],
            "--table" => table = val(),
            "--json" => json = true,
            _ => fail(&format!("unknown argument {a:?}")),
        }
    }
    let trace = trace.unwrap_or_else(|| fail("--trace is required"));
    let granularity = match app.as_str() {
        "l2" => None,
        "fib" => Some(Granularity::Fib),
        "16" => Some(Granularity::Bits(16)),
        "24" => Some(Granularity::Bits(24)),
        _ => fail(&format!("--app {app:?}: l2, fib, 16 or 24")),
    };
    if caches.is_empty() || caches.iter().any(|c| c != "wildcard" && c != "exact") {
        fail("--caches: wildcard, exact or both");
    }
    if sizes.iter().any(|&s| s == 0 || s > MAX_SIZE) {
        fail("--sizes: each from 1 to 2^24");
    }
    if dos.iter().any(|&s| !(0.0..=0.9).contains(&s))
        || (granularity.is_none() && dos.iter().any(|&s| s > 0.0))
    {
        fail("--dos: shares from 0 to 0.9, IP apps only");
    }
    let timeout_ok = timeout > 0.0 && timeout <= MAX_NUMBER;
    if !(0.0..1.0).contains(&warmup) || !timeout_ok {
        fail("--warmup in [0, 1), --timeout in (0, 1e12]");
    }
    let needs_table = granularity == Some(Granularity::Fib) || trace.starts_with("synthetic:");
    let routes = if needs_table {
        load_table(Path::new(&table))
    } else {
        Vec::new()
    };
    let flows = if let Some(n) = trace.strip_prefix("synthetic:") {
        let n = nexthop_testutil::args::parse_count(n)
            .filter(|&n| n <= MAX_FLOWS)
            .unwrap_or_else(|| fail(&format!("{trace:?}: FLOWS is a count up to 2^24")));
        synthetic(n, &routes)
    } else {
        let text = read_text(Path::new(&trace));
        if text.starts_with("StartTime,") {
            parse_argus(&text)
        } else if text.starts_with("#separator") {
            parse_zeek(&text)
        } else {
            fail(&format!(
                "{trace}: neither a Zeek conn.log nor an Argus binetflow"
            ))
        }
    };
    let mut packets = packets_of(&flows).unwrap_or_else(|e| fail(&format!("{trace}: {e}")));
    packets.truncate(max_packets);
    if packets.is_empty() {
        fail(&format!("{trace}: no IPv4 packets"));
    }
    let dsts: HashSet<u32> = packets.iter().map(|p| p.dst).collect();
    let mut microflows: HashMap<(u32, u32, u8, u16, u16), ()> = HashMap::new();
    for p in &packets {
        microflows.insert((p.src, p.dst, p.proto, p.sport, p.dport), ());
    }
    let trie = Trie::new(&routes);
    let span = packets.last().map_or(0.0, |p| p.time) - packets[0].time;
    let mut rows = Vec::new();
    for &share in &dos {
        let stream = with_attack(&packets, share, 0xd05);
        let warm = (stream.len() as f64 * warmup) as usize;
        for &size in &sizes {
            for cache in caches.iter().map(String::as_str) {
                let l2 = || {
                    L2Switch::new(L2Config {
                        timeout: Duration::from_secs_f64(timeout),
                        ..L2Config::default()
                    })
                };
                let o = match (granularity, cache) {
                    (None, "wildcard") => replay(l2(), size, &stream, warm),
                    (None, _) => replay(Exact(l2()), size, &stream, warm),
                    (Some(g), "wildcard") => replay(
                        Router {
                            trie: &trie,
                            granularity: g,
                        },
                        size,
                        &stream,
                        warm,
                    ),
                    (Some(g), _) => replay(
                        Exact(Router {
                            trie: &trie,
                            granularity: g,
                        }),
                        size,
                        &stream,
                        warm,
                    ),
                };
                let rate = |m: u64, n: u64| if n == 0 { 0.0 } else { m as f64 / n as f64 };
                if !json {
                    println!(
                        "{app:>4} {cache:>8} dos {share:.2} size {size:>7}: miss rate {:.6} (legit {:.6}), {} entries, {} masks",
                        rate(o.misses, o.measured),
                        rate(o.legit_misses, o.legit),
                        o.entries,
                        o.masks
                    );
                }
                rows.push(format!(
                    "{{\"app\":{},\"cache\":{},\"dos\":{share},\"size\":{size},\"packets\":{},\"misses\":{},\"miss_rate\":{},\"legit_packets\":{},\"legit_misses\":{},\"legit_miss_rate\":{},\"entries\":{},\"masks\":{},\"uncached\":{}}}",
                    json_str(&app), json_str(cache), o.measured, o.misses, rate(o.misses, o.measured), o.legit, o.legit_misses, rate(o.legit_misses, o.legit), o.entries, o.masks, o.uncached
                ));
            }
        }
    }
    if json {
        println!(
            "{{\"trace\":{},\"app\":{},\"flows\":{},\"packets\":{},\"seconds\":{span:.1},\"destinations\":{},\"microflows\":{},\"warmup\":{warmup},\"timeout_s\":{timeout},\"rows\":[{}]}}",
            json_str(&trace),
            json_str(&app),
            flows.len(),
            packets.len(),
            dsts.len(),
            microflows.len(),
            rows.join(",")
        );
    } else {
        println!(
            "trace {trace}: {} flow directions, {} packets over {span:.0} s, {} destinations, {} microflows",
            flows.len(),
            packets.len(),
            dsts.len(),
            microflows.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nested table in a small corner of the address space, so that
    /// prefixes overlap and addresses fall on their edges.
    fn table(seed: u64) -> Vec<(u32, u8, u32)> {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut routes = vec![(0, 0, 0)];
        for i in 0..300 {
            let len = r.gen_range(8..=32u8);
            let a = 0x0a00_0000 | (r.gen::<u32>() & 0x0000_ffff);
            let mask = u32::MAX << (32 - u32::from(len));
            routes.push((a & mask, len, i + 1));
        }
        routes
    }

    fn brute(routes: &[(u32, u8, u32)], d: u32) -> u32 {
        let mut best = (0u8, 0u32);
        for &(a, len, nh) in routes {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            if d & mask == a && len >= best.0 {
                best = (len, nh);
            }
        }
        best.1
    }

    #[test]
    fn trie_marks_exactly_bits_that_fix_the_longest_match() {
        let mut r = Xoshiro256PlusPlus::seed_from_u64(1);
        for seed in 0..4 {
            let routes = table(seed);
            let trie = Trie::new(&routes);
            for _ in 0..2000 {
                let d = 0x0a00_0000 | (r.gen::<u32>() & 0x0001_ffff);
                let (nh, bits) = trie.decide(d);
                assert_eq!(nh, brute(&routes, d), "longest match of {d:#x}");
                let keep = if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                for _ in 0..20 {
                    let e = (d & keep)
                        | (r.gen::<u32>() & !keep & 0x0001_ffff)
                        | (d & !keep & !0x0001_ffff);
                    assert_eq!(
                        brute(&routes, e),
                        nh,
                        "{e:#x} shares {bits} bits with {d:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn cached_router_forwards_as_the_app_does() {
        let routes = table(9);
        let trie = Trie::new(&routes);
        let ports: Vec<PortId> = (0..=ROUTE_PORTS as PortId + 1).collect();
        for g in [
            Granularity::Fib,
            Granularity::Bits(16),
            Granularity::Bits(24),
        ] {
            let cfg = Config {
                capacity: 1024,
                ..Config::default()
            };
            let mut cached = Switch::new(
                Router {
                    trie: &trie,
                    granularity: g,
                },
                cfg,
                Ports::physical(&ports),
                true,
            )
            .unwrap();
            let mut oracle = Switch::new(
                Router {
                    trie: &trie,
                    granularity: g,
                },
                cfg,
                Ports::physical(&ports),
                false,
            )
            .unwrap();
            let mut r = Xoshiro256PlusPlus::seed_from_u64(2);
            let mut buf = [0u8; FRAME_LEN];
            for _ in 0..20_000 {
                let p = Packet {
                    time: 0.0,
                    src: r.gen(),
                    dst: 0x0a00_0000 | (r.gen::<u32>() & 0x0001_ffff),
                    proto: 17,
                    sport: r.gen(),
                    dport: r.gen(),
                    attack: false,
                };
                frame(&p, &mut buf);
                assert_eq!(
                    cached.process(ingress(&p), &buf),
                    oracle.process(ingress(&p), &buf)
                );
            }
            assert!(
                cached.counters().hits > 2_000,
                "{g:?}: {:?}",
                cached.counters()
            );
        }
    }

    #[test]
    fn exact_cache_keys_on_the_whole_header() {
        let routes = table(3);
        let trie = Trie::new(&routes);
        let p = Packet {
            time: 0.0,
            src: 0x0a00_0001,
            dst: 0x0a00_0102,
            proto: 6,
            sport: 1000,
            dport: 80,
            attack: false,
        };
        let other_port = Packet { sport: 1001, ..p };
        let stream = [p, p, other_port, p];
        let wild = replay(
            Router {
                trie: &trie,
                granularity: Granularity::Fib,
            },
            16,
            &stream,
            0,
        );
        let exact = replay(
            Exact(Router {
                trie: &trie,
                granularity: Granularity::Fib,
            }),
            16,
            &stream,
            0,
        );
        assert_eq!((wild.misses, exact.misses), (1, 2));
        assert_eq!((wild.entries, exact.entries), (1, 2));
    }

    #[test]
    fn attack_share_is_kept_and_trace_order_too() {
        let trace: Vec<Packet> = (0..1000)
            .map(|i| Packet {
                time: f64::from(i),
                src: 1,
                dst: i as u32,
                proto: 6,
                sport: 1,
                dport: 2,
                attack: false,
            })
            .collect();
        let s = with_attack(&trace, 0.5, 1);
        assert_eq!(s.iter().filter(|p| p.attack).count(), 1000);
        let kept: Vec<u32> = s.iter().filter(|p| !p.attack).map(|p| p.dst).collect();
        assert_eq!(kept, (0..1000).collect::<Vec<u32>>());
        assert_eq!(with_attack(&trace, 0.0, 1).len(), 1000);
    }

    #[test]
    fn flow_records_parse_into_both_directions() {
        let zeek = "#separator \\x09\n#fields\tts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tproto\tduration\torig_pkts\tresp_pkts\n\
                    10.5\tC1\t192.168.1.2\t5000\t8.8.8.8\t53\tudp\t2.0\t3\t1\n\
                    11.0\tC2\tfe80::1\t1\tfe80::2\t2\tudp\t-\t1\t1\n\
                    12.0\tC3\t192.168.1.2\t5001\t1.2.3.4\t80\ttcp\t-\t2\t0\n";
        let f = parse_zeek(zeek);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(
            (f[0].src, f[0].dst, f[0].packets, f[0].proto, f[0].dport),
            (0xc0a8_0102, 0x0808_0808, 3, 17, 53)
        );
        assert_eq!((f[1].src, f[1].sport, f[1].packets), (0x0808_0808, 53, 1));
        assert_eq!((f[2].duration, f[2].packets), (0.0, 2));
        let argus = "StartTime,Dur,Proto,SrcAddr,Sport,Dir,DstAddr,Dport,State,sTos,dTos,TotPkts,TotBytes,SrcBytes,Label\n\
                     2013/12/17 22:09:19.5,10.0,icmp,10.0.0.46,0x0008,  ->,1.1.1.1,0x0000,ECO,0,,4,400,300,x,y\n\
                     2013/12/17 22:09:20,1.0,arp,00:11,,who,00:22,,INT,,,1,60,60,z\n";
        let f = parse_argus(argus);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].start, 1_387_318_159.5);
        assert_eq!(
            (f[0].packets, f[1].packets, f[0].sport, f[0].proto),
            (3, 1, 8, 1)
        );
        let p = packets_of(&f).unwrap();
        assert_eq!(p.len(), 4);
        assert!(p.windows(2).all(|w| w[0].time <= w[1].time));
        let last = p.last().map_or(0.0, |x| x.time);
        assert!(
            (last - (1_387_318_159.5 + 20.0 / 3.0)).abs() < 1e-6,
            "{last}"
        );
    }

    #[test]
    fn hostile_records_are_skipped_or_refused_without_panicking() {
        let argus = "StartTime,Dur,Proto,SrcAddr,Sport,Dir,DstAddr,Dport,State,sTos,dTos,TotPkts,TotBytes,SrcBytes,Label\n\
                     99999999999/12/17 22:09:19,1,tcp,1.1.1.1,1,->,2.2.2.2,2,X,0,,1,1,1,x\n\
                     2013/13/40 99:99:99,1,tcp,1.1.1.1,1,->,2.2.2.2,2,X,0,,1,1,1,x\n\
                     2013/12/17 22:09:19,1e308,tcp,1.1.1.1,0xzz,->,2.2.2.2,99999999,X,0,,1e300,-5,NaN\n\
                     garbage\n,,,,\n";
        let f = parse_argus(argus);
        assert_eq!(f.len(), 0, "{f:?}");
        let zeek = "#separator \\x09\n#fields\tts\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tproto\tduration\torig_pkts\tresp_pkts\n\
                    1e300\t1.1.1.1\t1\t2.2.2.2\t2\ttcp\tinf\t20000000\t20000000\n\
                    short line\n";
        let f = parse_zeek(zeek);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!((f[0].start, f[0].duration), (0.0, 0.0));
        assert!(packets_of(&f).is_err());
        let ok: Vec<Flow> = f.iter().map(|x| Flow { packets: 3, ..*x }).collect();
        let p = packets_of(&ok).unwrap();
        let o = replay(L2Switch::new(L2Config::default()), 4, &p, 0);
        assert_eq!(o.measured, 6);
    }

    #[test]
    fn lan_hosts_get_their_own_macs_and_the_internet_the_gateways() {
        assert_eq!(mac_of(0xc0a8_0102), [0x02, 0x01, 192, 168, 1, 2]);
        assert_eq!(mac_of(0x0808_0808), GATEWAY_MAC);
        assert_eq!(mac_of(0xc0a8_01ff), [0xff; 6]);
        assert_eq!(mac_of(0xe000_00fb), [0x01, 0x00, 0x5e, 0, 0, 0xfb]);
    }
}
