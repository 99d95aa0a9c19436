//! Realistic network keys: MAC addresses, IPv4/IPv6 hosts and IPv4 5-tuples.
//!
//! Uniform random keys make every hash table look good; real forwarding keys
//! share long prefixes. The models here are simple but keep that structure:
//!
//! * **MACs** ([`macs`]): about 90% come from a pool of 256 OUIs (48 real
//!   NIC, server, switch and hypervisor vendor prefixes plus 208 synthetic
//!   ones), chosen with Zipf(1) popularity so a few vendors dominate, as on a
//!   real L2 segment; a quarter of those also bring the next MAC (the second
//!   port of a dual-port NIC). The rest are random locally administered MACs
//!   (containers, VMs with randomised addresses). All are unicast (bit 0 of
//!   the first octet clear).
//! * **IPv4 hosts** ([`ipv4s`]): pods are `/16`s (first `10.0.0.0/8`, then
//!   `172.16.0.0/12`, `192.168.0.0/16`, then public space), each with 8 to 64
//!   racks (`/24`s) of 16 to 200 hosts (`.1` to `.254`).
//! * **IPv6 hosts** ([`ipv6s`]): pods are `/48`s under one to four global
//!   `/32`s (in blocks the regional registries allocate from) or ULA
//!   `fd00::/8`; racks are `/64`s with 16 to 200 hosts whose interface IDs
//!   mix small static numbers, EUI-64 from MACs and random privacy IDs.
//! * **5-tuples** ([`five_tuples`]): clients and servers drawn from the IPv4
//!   model, servers with Zipf(1) popularity, services weighted towards TCP 443
//!   and 80 with UDP DNS, QUIC and VXLAN, ephemeral source ports, and a fifth
//!   of the flows in the reply direction.
//!
//! Every function returns distinct keys in a seeded, shuffled order.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use rand::seq::{index, SliceRandom};
use rand::Rng;

use super::{rng, Zipf};

/// Real OUIs from NIC, server, switch and hypervisor vendors (QEMU's
/// `52:54:00` and Docker's `02:42:ac` are locally administered).
const REAL_OUIS: [[u8; 3]; 48] = [
    [0x00, 0x50, 0x56],
    [0x00, 0x0C, 0x29],
    [0x00, 0x05, 0x69],
    [0x52, 0x54, 0x00],
    [0x00, 0x16, 0x3E],
    [0x00, 0x15, 0x5D],
    [0x08, 0x00, 0x27],
    [0x02, 0x42, 0xAC],
    [0x00, 0x1B, 0x21],
    [0x90, 0xE2, 0xBA],
    [0xA0, 0x36, 0x9F],
    [0x3C, 0xFD, 0xFE],
    [0x68, 0x05, 0xCA],
    [0x00, 0x1E, 0x67],
    [0xB4, 0x96, 0x91],
    [0x40, 0xA6, 0xB7],
    [0x00, 0x02, 0xC9],
    [0x24, 0x8A, 0x07],
    [0x7C, 0xFE, 0x90],
    [0x98, 0x03, 0x9B],
    [0x0C, 0x42, 0xA1],
    [0xEC, 0x0D, 0x9A],
    [0xB8, 0x59, 0x9F],
    [0x50, 0x6B, 0x4B],
    [0x00, 0x1C, 0x73],
    [0x44, 0x4C, 0xA8],
    [0x28, 0x99, 0x3A],
    [0x00, 0x00, 0x0C],
    [0x00, 0x1B, 0x54],
    [0x58, 0x8D, 0x09],
    [0x00, 0x23, 0x04],
    [0x00, 0x25, 0x90],
    [0xAC, 0x1F, 0x6B],
    [0x0C, 0xC4, 0x7A],
    [0x3C, 0xEC, 0xEF],
    [0x18, 0x66, 0xDA],
    [0xF8, 0xBC, 0x12],
    [0x14, 0x18, 0x77],
    [0xB0, 0x83, 0xFE],
    [0xD0, 0x94, 0x66],
    [0xE4, 0x43, 0x4B],
    [0x94, 0x57, 0xA5],
    [0x9C, 0x8E, 0x99],
    [0x00, 0x17, 0xA4],
    [0x00, 0xE0, 0x4C],
    [0xB8, 0x27, 0xEB],
    [0x00, 0x0F, 0x53],
    [0x00, 0x07, 0x43],
];

/// Size of the OUI pool, real plus synthetic.
const OUI_POOL: usize = 256;

/// `n` distinct unicast MAC addresses (see the module docs for the model).
pub fn macs(seed: u64, n: usize) -> Vec<[u8; 6]> {
    let mut r = rng(seed);
    let mut pool: Vec<[u8; 3]> = REAL_OUIS.to_vec();
    let mut in_pool: HashSet<[u8; 3]> = pool.iter().copied().collect();
    while pool.len() < OUI_POOL {
        let mut oui: [u8; 3] = r.gen();
        oui[0] &= !0b11; // universally administered, unicast
        if in_pool.insert(oui) {
            pool.push(oui);
        }
    }
    pool.shuffle(&mut r);
    let popularity = Zipf::new(pool.len(), 1.0).expect("256 items and exponent 1 are valid");

    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut push = |m: [u8; 6], out: &mut Vec<[u8; 6]>| {
        if out.len() < n && seen.insert(m) {
            out.push(m);
        }
    };
    while out.len() < n {
        if r.gen_bool(0.9) {
            let oui = pool[popularity.sample(&mut r)];
            let nic: [u8; 3] = r.gen();
            let m = [oui[0], oui[1], oui[2], nic[0], nic[1], nic[2]];
            push(m, &mut out);
            if nic[2] < u8::MAX && r.gen_bool(0.25) {
                let mut sibling = m;
                sibling[5] += 1;
                push(sibling, &mut out);
            }
        } else {
            let mut m: [u8; 6] = r.gen();
            m[0] = (m[0] & !0b01) | 0b10; // locally administered, unicast
            push(m, &mut out);
        }
    }
    out.shuffle(&mut r);
    out
}

/// `/16` pods in the order [`ipv4s`] fills them: `10.x` shuffled, then
/// `172.16-31.x`, `192.168`, then shuffled public `/16`s (first octet 1 to
/// 223 minus 10, 100, 127, 169, 172 and 192).
fn ipv4_pods<R: Rng>(r: &mut R) -> Vec<[u8; 2]> {
    let mut ten: Vec<[u8; 2]> = (0..=255).map(|b| [10, b]).collect();
    ten.shuffle(r);
    let mut rfc1918: Vec<[u8; 2]> = (16..=31).map(|b| [172, b]).collect();
    rfc1918.shuffle(r);
    let mut public: Vec<[u8; 2]> = (1u8..=223)
        .filter(|a| ![10, 100, 127, 169, 172, 192].contains(a))
        .flat_map(|a| (0..=255).map(move |b| [a, b]))
        .collect();
    public.shuffle(r);
    ten.into_iter()
        .chain(rfc1918)
        .chain([[192, 168]])
        .chain(public)
        .collect()
}

/// `n` distinct IPv4 host addresses clustered in racks and pods (see the
/// module docs).
///
/// # Panics
///
/// If `n` exceeds the model's capacity (every usable public and private
/// `/16` filled, well over 10^8 hosts).
pub fn ipv4s(seed: u64, n: usize) -> Vec<Ipv4Addr> {
    let mut r = rng(seed);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut pods = ipv4_pods(&mut r).into_iter();
    'fill: while out.len() < n {
        let Some([a, b]) = pods.next() else {
            panic!("ipv4s: {n} hosts exceed the pod model's capacity");
        };
        let racks = r.gen_range(8..=64);
        for c in index::sample(&mut r, 256, racks) {
            let quota = r.gen_range(16..=200).min(n - out.len());
            for host in index::sample(&mut r, 254, quota) {
                out.push(Ipv4Addr::new(a, b, c as u8, host as u8 + 1));
            }
            if out.len() == n {
                break 'fill;
            }
        }
    }
    out.shuffle(&mut r);
    out
}

/// First hextets of global unicast space that regional registries allocate
/// from (APNIC `2400::/12`, ARIN `2600::/12`, RIPE `2a00::/12`, ...).
const RIR_BLOCKS: [u16; 16] = [
    0x2001, 0x2401, 0x2403, 0x2404, 0x2600, 0x2602, 0x2604, 0x2605, 0x2607, 0x2620, 0x2800, 0x2A00,
    0x2A01, 0x2A02, 0x2A03, 0x2C0F,
];

/// A random `/48` for an IPv6 pod: under one of `providers` (global `/32`s)
/// or, one time in five, a ULA `fdXX:XXXX:XXXX::/48`.
fn ipv6_pod<R: Rng>(r: &mut R, providers: &[u32]) -> u64 {
    if r.gen_bool(0.2) {
        let global_id: u64 = r.gen::<u64>() & ((1 << 40) - 1);
        (0xFD << 40) | global_id
    } else {
        let p = providers[r.gen_range(0..providers.len())];
        (u64::from(p) << 16) | u64::from(r.gen::<u16>())
    }
}

/// An interface ID: a small static number, EUI-64 from a MAC, or random.
fn ipv6_iid<R: Rng>(r: &mut R) -> u64 {
    match r.gen_range(0..10) {
        0..=3 => r.gen_range(1..=0x3FF),
        4..=6 => {
            let m: [u8; 6] = r.gen();
            let m0 = (m[0] & !1) ^ 0b10; // flip the U/L bit (RFC 4291 App. A)
            u64::from_be_bytes([m0, m[1], m[2], 0xFF, 0xFE, m[3], m[4], m[5]])
        }
        _ => r.gen(),
    }
}

/// `n` distinct IPv6 host addresses clustered in `/64` racks and `/48` pods
/// (see the module docs).
pub fn ipv6s(seed: u64, n: usize) -> Vec<Ipv6Addr> {
    let mut r = rng(seed);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let n_providers = r.gen_range(1..=4);
    let providers: Vec<u32> = (0..n_providers)
        .map(|_| {
            let rir = RIR_BLOCKS[r.gen_range(0..RIR_BLOCKS.len())];
            (u32::from(rir) << 16) | u32::from(r.gen::<u16>())
        })
        .collect();
    let mut used_pods = HashSet::new();
    'fill: while out.len() < n {
        let pod = ipv6_pod(&mut r, &providers);
        if !used_pods.insert(pod) {
            continue;
        }
        let racks = r.gen_range(4..=64);
        for subnet in index::sample(&mut r, 0x1000, racks) {
            let prefix = (u128::from(pod) << 80) | ((subnet as u128) << 64);
            let quota = r.gen_range(16..=200).min(n - out.len());
            let mut iids = HashSet::with_capacity(quota);
            while iids.len() < quota {
                let iid = ipv6_iid(&mut r);
                if iids.insert(iid) {
                    out.push(Ipv6Addr::from(prefix | u128::from(iid)));
                }
            }
            if out.len() == n {
                break 'fill;
            }
        }
    }
    out.shuffle(&mut r);
    out
}

/// An IPv4 flow key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port (0 for protocols without ports).
    pub src_port: u16,
    /// Destination port (0 for protocols without ports).
    pub dst_port: u16,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP).
    pub proto: u8,
}

impl FiveTuple {
    /// Length of the canonical byte form.
    pub const LEN: usize = 13;

    /// The canonical byte form, network order: src, dst, src port, dst port,
    /// protocol.
    pub fn to_bytes(&self) -> [u8; 13] {
        let mut b = [0u8; 13];
        b[0..4].copy_from_slice(&self.src.octets());
        b[4..8].copy_from_slice(&self.dst.octets());
        b[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        b[10..12].copy_from_slice(&self.dst_port.to_be_bytes());
        b[12] = self.proto;
        b
    }

    /// The inverse of [`Self::to_bytes`].
    pub fn from_bytes(b: &[u8; 13]) -> FiveTuple {
        FiveTuple {
            src: Ipv4Addr::new(b[0], b[1], b[2], b[3]),
            dst: Ipv4Addr::new(b[4], b[5], b[6], b[7]),
            src_port: u16::from_be_bytes([b[8], b[9]]),
            dst_port: u16::from_be_bytes([b[10], b[11]]),
            proto: b[12],
        }
    }
}

/// The bytes of [`FiveTuple::to_bytes`] go to the hash through one 16-byte
/// store. Built by five narrower stores (as `to_bytes` does), the hash's
/// two overlapping 8-byte loads (XXH3 reads bytes 0..8 and 5..13 of a
/// 13-byte key) each spanned several stores, so the CPU could not forward
/// them: each load waited until those stores retired, that is until every
/// older instruction had, including the previous lookup's memory reads.
/// One key at a time, lookups then did not overlap at all: 190 ns at 1e7
/// keys, against 74 ns with the single store (docs/benchmarks.md,
/// "Othello lookups"). A 16-byte store holds both loads, so both are forwarded.
impl nexthop_hash::KeyBytes for FiveTuple {
    #[inline(always)]
    fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        // Little-endian words of bytes 0..8 and 8..13 of `to_bytes`.
        let lo = u32::from_le_bytes(self.src.octets()) as u64
            | (u32::from_le_bytes(self.dst.octets()) as u64) << 32;
        let hi = u16::from_le_bytes(self.src_port.to_be_bytes()) as u64
            | (u16::from_le_bytes(self.dst_port.to_be_bytes()) as u64) << 16
            | (self.proto as u64) << 32;
        let mut buf = [0u8; 16];
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_storeu_si128};
            // SAFETY: both intrinsics need only SSE2, which every x86-64
            // CPU has; `buf` is 16 writable bytes and `_mm_storeu_si128`
            // has no alignment requirement.
            unsafe {
                let v = _mm_set_epi64x(hi as i64, lo as i64);
                _mm_storeu_si128(buf.as_mut_ptr().cast::<__m128i>(), v);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            buf[..8].copy_from_slice(&lo.to_le_bytes());
            buf[8..].copy_from_slice(&hi.to_le_bytes());
        }
        f(&buf[..Self::LEN])
    }
}

/// Services as (protocol, destination port, weight).
const SERVICES: [(u8, u16, u32); 21] = [
    (6, 443, 30),
    (6, 80, 12),
    (6, 8080, 5),
    (6, 8443, 3),
    (6, 22, 4),
    (6, 6379, 4),
    (6, 3306, 3),
    (6, 5432, 3),
    (6, 9092, 3),
    (6, 11211, 2),
    (6, 2049, 2),
    (6, 53, 1),
    (6, 179, 1),
    (6, 25, 1),
    (17, 53, 8),
    (17, 443, 5),
    (17, 123, 2),
    (17, 4789, 2),
    (17, 161, 1),
    (17, 514, 1),
    (1, 0, 1),
];

fn pick_service<R: Rng>(r: &mut R) -> (u8, u16) {
    let total: u32 = SERVICES.iter().map(|s| s.2).sum();
    let mut x = r.gen_range(0..total);
    for &(proto, port, w) in &SERVICES {
        if x < w {
            return (proto, port);
        }
        x -= w;
    }
    (6, 443)
}

/// `n` distinct realistic IPv4 5-tuples (see the module docs).
pub fn five_tuples(seed: u64, n: usize) -> Vec<FiveTuple> {
    let mut r = rng(seed);
    let clients = ipv4s(r.gen(), (n / 4).max(64));
    let servers = ipv4s(r.gen(), (n / 64).max(16));
    let popularity =
        Zipf::new(servers.len(), 1.0).expect("at least 16 servers and exponent 1 are valid");
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let client = clients[r.gen_range(0..clients.len())];
        let server = servers[popularity.sample(&mut r)];
        let (proto, dst_port) = pick_service(&mut r);
        let src_port = match proto {
            1 => 0,
            _ if r.gen_bool(0.7) => r.gen_range(32768..=60999), // Linux default
            _ => r.gen_range(49152..=65535),                    // IANA dynamic
        };
        let t = if r.gen_bool(0.2) {
            FiveTuple {
                src: server,
                dst: client,
                src_port: dst_port,
                dst_port: src_port,
                proto,
            }
        } else {
            FiveTuple {
                src: client,
                dst: server,
                src_port,
                dst_port,
                proto,
            }
        };
        if seen.insert(t) {
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_hash::KeyBytes;
    use std::collections::HashMap;

    fn all_distinct<T: std::hash::Hash + Eq>(v: &[T]) -> bool {
        v.iter().collect::<HashSet<_>>().len() == v.len()
    }

    #[test]
    fn macs_are_distinct_unicast_and_deterministic() {
        let m = macs(1, 20_000);
        assert_eq!(m.len(), 20_000);
        assert!(all_distinct(&m));
        assert!(m.iter().all(|a| a[0] & 1 == 0));
        assert_eq!(m, macs(1, 20_000));
        assert_ne!(m, macs(2, 20_000));
    }

    #[test]
    fn macs_share_a_few_hundred_ouis_and_mix_in_local_addresses() {
        let m = macs(3, 20_000);
        let mut per_oui: HashMap<[u8; 3], usize> = HashMap::new();
        for a in &m {
            *per_oui.entry([a[0], a[1], a[2]]).or_default() += 1;
        }
        let shared: Vec<_> = per_oui.values().filter(|&&c| c >= 2).collect();
        assert!(shared.len() >= 200 && shared.len() <= OUI_POOL);
        let in_shared: usize = shared.into_iter().sum();
        assert!(in_shared > 17_000, "{in_shared} of 20000 MACs share an OUI");
        let local = m.iter().filter(|a| a[0] & 0b10 != 0).count();
        assert!(
            (1_500..4_000).contains(&local),
            "{local} locally administered"
        );
        let real = m.iter().filter(|a| REAL_OUIS.contains(&[a[0], a[1], a[2]]));
        assert!(real.count() > 1_000);
    }

    #[test]
    fn ipv4s_are_distinct_hosts_clustered_in_racks() {
        let a = ipv4s(5, 50_000);
        assert_eq!(a.len(), 50_000);
        assert!(all_distinct(&a));
        assert!(a.iter().all(|x| !matches!(x.octets()[3], 0 | 255)));
        let racks: HashSet<[u8; 3]> = a
            .iter()
            .map(|x| [x.octets()[0], x.octets()[1], x.octets()[2]])
            .collect();
        // Racks hold 16 to 200 hosts, about 108 on average.
        assert!(racks.len() * 50 < a.len(), "{} racks", racks.len());
        assert!(
            a.iter().all(|x| x.octets()[0] == 10),
            "small sets stay in 10/8"
        );
        assert_eq!(a, ipv4s(5, 50_000));
    }

    #[test]
    fn ipv4s_spill_past_ten_slash_eight_when_large() {
        let a = ipv4s(6, 2_000_000);
        assert_eq!(a.len(), 2_000_000);
        assert!(a.iter().any(|x| x.octets()[0] != 10));
        assert!(all_distinct(&a));
    }

    #[test]
    fn ipv6s_are_distinct_hosts_clustered_in_slash_64s() {
        let a = ipv6s(7, 30_000);
        assert_eq!(a.len(), 30_000);
        assert!(all_distinct(&a));
        let nets: HashSet<u64> = a.iter().map(|x| (u128::from(*x) >> 64) as u64).collect();
        assert!(nets.len() * 50 < a.len(), "{} /64s", nets.len());
        let pods: HashSet<u64> = a.iter().map(|x| (u128::from(*x) >> 80) as u64).collect();
        assert!(pods.len() < nets.len());
        for x in &a {
            let top = x.segments()[0];
            assert!(RIR_BLOCKS.contains(&top) || top & 0xFF00 == 0xFD00, "{x}");
        }
        assert_eq!(a, ipv6s(7, 30_000));
    }

    #[test]
    fn zero_hosts_is_empty() {
        assert!(ipv4s(1, 0).is_empty());
        assert!(ipv6s(1, 0).is_empty());
        assert!(macs(1, 0).is_empty());
        assert!(five_tuples(1, 0).is_empty());
    }

    #[test]
    fn five_tuple_bytes_are_network_order_and_round_trip() {
        let t = FiveTuple {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(192, 168, 1, 2),
            src_port: 0x1234,
            dst_port: 443,
            proto: 6,
        };
        let b = t.to_bytes();
        assert_eq!(b, [10, 0, 0, 1, 192, 168, 1, 2, 0x12, 0x34, 0x01, 0xBB, 6]);
        assert_eq!(FiveTuple::from_bytes(&b), t);
        assert_eq!(t.hash128(9), b.hash128(9));
    }

    #[test]
    fn five_tuple_hashes_its_canonical_bytes() {
        use nexthop_hash::KeyBytes;
        for t in five_tuples(3, 2_000) {
            let b = t.with_bytes(|b| b.to_vec());
            assert_eq!(b, t.to_bytes());
            assert_eq!(FiveTuple::from_bytes(&t.to_bytes()), t);
            assert_eq!(t.hash128(99), nexthop_hash::hash128(&t.to_bytes(), 99));
        }
    }

    #[test]
    fn five_tuples_are_distinct_and_mostly_tcp_and_udp_to_known_ports() {
        let v = five_tuples(8, 40_000);
        assert_eq!(v.len(), 40_000);
        assert!(all_distinct(&v));
        let tcp_udp = v.iter().filter(|t| t.proto == 6 || t.proto == 17).count();
        assert!(tcp_udp as f64 > 0.95 * v.len() as f64);
        let known: HashSet<u16> = SERVICES.iter().map(|s| s.1).collect();
        for t in v.iter().filter(|t| t.proto != 1) {
            let (service, ephemeral) = if known.contains(&t.dst_port) {
                (t.dst_port, t.src_port)
            } else {
                (t.src_port, t.dst_port)
            };
            assert!(known.contains(&service), "{t:?}");
            assert!(ephemeral >= 32768, "{t:?}");
        }
        let https = v.iter().filter(|t| t.dst_port == 443).count();
        assert!(https > v.len() / 5);
        assert_eq!(v, five_tuples(8, 40_000));
    }
}
