use nexthop_lpm::parse::RouteList;
use nexthop_lpm::{BinaryTrie, Prefix4, Prefix6};
use nexthop_wire::WireError;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

use super::*;
use crate::error::MalformedKind;
use nexthop_wire::checksum::ipv4_header_checksum;

/// Offset of the TTL in the IPv4 header of the test frames.
const V4_TTL: usize = 8;
/// Offset of the hop limit in the IPv6 header of the test frames.
const V6_HOP_LIMIT: usize = 7;

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfe];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xfd];

fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

/// An IPv4 header of `ihl` words with random fields, TTL `ttl` and a
/// valid checksum.
fn v4_header(r: &mut impl Rng, ihl: u8, ttl: u8, dst: u32) -> Vec<u8> {
    let len = usize::from(ihl) * 4;
    let mut h: Vec<u8> = (0..len).map(|_| r.gen()).collect();
    h[0] = 0x40 | ihl;
    h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    h[V4_TTL] = ttl;
    h[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = ipv4_header_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// An Ethernet frame (with `vlans` 802.1Q tags) around an IPv4 packet to
/// `dst` with TTL `ttl` and 8 payload bytes, padded to 60 bytes.
fn v4_frame(dst: u32, ttl: u8, vlans: usize) -> Vec<u8> {
    let mut f = eth(vlans, 0x0800);
    let mut h = v4_header(&mut rng(u64::from(dst)), 5, ttl, dst);
    h[2..4].copy_from_slice(&28u16.to_be_bytes());
    h[10..12].copy_from_slice(&[0, 0]);
    let c = ipv4_header_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0xab; 8]);
    f.resize(f.len().max(60), 0);
    f
}

fn v6_frame(dst: u128, hop_limit: u8, vlans: usize) -> Vec<u8> {
    let mut f = eth(vlans, 0x86dd);
    let mut h = [0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&8u16.to_be_bytes());
    h[6] = 17;
    h[7] = hop_limit;
    h[8..24].copy_from_slice(&0x2001_0db8_ffff_u128.to_be_bytes());
    h[24..40].copy_from_slice(&dst.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0xcd; 8]);
    f
}

fn eth(vlans: usize, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    for v in 0..vlans {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 10 + v as u8]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn p4(a: [u8; 4], len: u8) -> Prefix4 {
    Prefix4::new(u32::from_be_bytes(a), len).unwrap()
}

fn p6(a: u128, len: u8) -> Prefix6 {
    Prefix6::new(a, len).unwrap()
}

fn neighbor(nh: NextHop) -> Neighbor {
    Neighbor {
        port: (nh % 4) as u16 + 1,
        dst_mac: [0x02, 0xaa, 0, 0, 0, nh as u8],
        src_mac: [0x02, 0xbb, 0, 0, 0, ((nh % 4) + 1) as u8],
    }
}

fn neighbors_for(routes: &RouteList) -> Neighbors {
    let mut n = Neighbors::default();
    for nh in routes
        .v4
        .iter()
        .map(|r| r.1)
        .chain(routes.v6.iter().map(|r| r.1))
    {
        n.insert(nh, neighbor(nh));
    }
    n
}

/// 198.51.100.0/24 → 1, 198.51.100.128/25 → 2, 203.0.113.0/24 → 3,
/// 2001:db8::/32 → 4, 2001:db8:1::/48 → 5.
fn small_routes() -> RouteList {
    RouteList {
        v4: vec![
            (p4([198, 51, 100, 0], 24), 1),
            (p4([198, 51, 100, 128], 25), 2),
            (p4([203, 0, 113, 0], 24), 3),
        ],
        v6: vec![
            (p6(0x2001_0db8 << 96, 32), 4),
            (p6(0x2001_0db8_0001 << 80, 48), 5),
        ],
    }
}

fn ip4(a: [u8; 4]) -> u32 {
    u32::from_be_bytes(a)
}

fn one(p: &mut IpPipeline<'_>, mut f: Vec<u8>) -> (IpDecision, Vec<u8>) {
    let mut d = Vec::new();
    let mut frames = [&mut f[..]];
    p.process(0, &mut frames, &mut d);
    (d[0], f)
}

#[test]
fn ttl_zero_and_one_expire_two_is_forwarded_with_one() {
    let routes = small_routes();
    let table = LpmTable::build(&routes, 4).unwrap();
    let nb = neighbors_for(&routes);
    let mut p = IpPipeline::new(&table, &nb, IpConfig::default()).unwrap();
    let dst = ip4([198, 51, 100, 7]);
    for ttl in [0, 1] {
        let f = v4_frame(dst, ttl, 0);
        let (d, out) = one(&mut p, f.clone());
        assert_eq!(d, IpDecision::TtlExpired);
        assert_eq!(out, f, "an expired frame is left as it was");
    }
    let (d, out) = one(&mut p, v4_frame(dst, 2, 0));
    assert_eq!(d, IpDecision::Forward(2));
    assert_eq!(out[14 + V4_TTL], 1);
    assert_eq!(&out[0..6], &neighbor(1).dst_mac);
    assert_eq!(&out[6..12], &neighbor(1).src_mac);
    assert!(Ipv4Packet::new_checked(&out[14..]).unwrap().checksum_ok());
    let (d, out) = one(&mut p, v4_frame(dst, 255, 0));
    assert_eq!(d, IpDecision::Forward(2));
    assert_eq!(out[14 + V4_TTL], 254);
    let c = p.counters();
    assert_eq!((c.ttl_expired, c.forwarded, c.dropped), (2, 2, 2));
    assert!(c.is_consistent());
}

#[test]
fn ipv6_hop_limit_zero_and_one_expire_two_is_forwarded_with_one() {
    let routes = small_routes();
    let table = LpmTable::build(&routes, 4).unwrap();
    let mut p = IpPipeline::new(&table, &neighbors_for(&routes), IpConfig::default()).unwrap();
    let dst = (0x2001_0db8_0001_u128 << 80) | 9;
    for hl in [0, 1] {
        assert_eq!(one(&mut p, v6_frame(dst, hl, 0)).0, IpDecision::TtlExpired);
    }
    let f = v6_frame(dst, 2, 1);
    let (d, out) = one(&mut p, f.clone());
    assert_eq!(d, IpDecision::Forward(neighbor(5).port));
    assert_eq!(out[18 + V6_HOP_LIMIT], 1);
    assert_eq!(&out[0..6], &neighbor(5).dst_mac);
    assert_eq!(&out[6..12], &neighbor(5).src_mac);
    assert_eq!(&out[12..18], &f[12..18], "the VLAN tag is kept");
    assert_eq!(
        &out[18 + 8..],
        &f[18 + 8..],
        "addresses and payload are kept"
    );
    let (d, _) = one(&mut p, v6_frame(0x2001_0db9 << 96, 64, 0));
    assert_eq!(d, IpDecision::NoRoute);
    assert_eq!(p.counters().misses, 1);
}

#[test]
fn malformed_frames_are_counted_by_reason_and_left_alone() {
    let routes = small_routes();
    let table = LpmTable::build(&routes, 4).unwrap();
    let cfg = IpConfig {
        max_frame_len: 1514,
    };
    let mut p = IpPipeline::new(&table, &neighbors_for(&routes), cfg).unwrap();
    let good = v4_frame(ip4([203, 0, 113, 5]), 64, 0);
    let mut bad_version = good.clone();
    bad_version[14] = 0x55;
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x44;
    let mut bad_total = good.clone();
    bad_total[16..18].copy_from_slice(&10u16.to_be_bytes());
    let mut long_total = good.clone();
    long_total[16..18].copy_from_slice(&100u16.to_be_bytes());
    let mut bad_sum = good.clone();
    bad_sum[24] ^= 0x01;
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let v6_short = v6_frame(0x2001_0db8 << 96, 64, 0)[..40].to_vec();
    let cases: Vec<(Vec<u8>, MalformedKind)> = vec![
        (vec![0; 13], MalformedKind::Runt),
        (good[..20].to_vec(), MalformedKind::Truncated),
        (eth(1, 0x0800)[..16].to_vec(), MalformedKind::Truncated),
        (bad_version, MalformedKind::BadHeader),
        (bad_ihl, MalformedKind::BadHeader),
        (bad_total, MalformedKind::BadHeader),
        (long_total, MalformedKind::Truncated),
        (bad_sum, MalformedKind::BadChecksum),
        (arp, MalformedKind::NotIp),
        (v6_short, MalformedKind::Truncated),
        (vec![0; 1515], MalformedKind::Oversize),
    ];
    for (f, kind) in cases {
        let (d, out) = one(&mut p, f.clone());
        match d {
            IpDecision::Malformed(e) => assert_eq!(e.kind(), kind, "{f:02x?}: {e}"),
            other => panic!("{f:02x?}: {other:?}, want {kind:?}"),
        }
        assert_eq!(out, f);
    }
    let c = p.counters();
    assert_eq!(c.malformed.total(), 11);
    assert_eq!(c.malformed.get(MalformedKind::Truncated), 4);
    assert_eq!(c.dropped, 11);
    assert!(c.is_consistent());
    // The truncation offset counts from the frame start.
    let (d, _) = one(&mut p, good[..20].to_vec());
    assert_eq!(
        d,
        IpDecision::Malformed(FrameError::Wire(WireError::Truncated {
            needed: 34,
            got: 20
        }))
    );
}

#[test]
fn a_table_next_hop_without_a_neighbour_is_refused() {
    let routes = small_routes();
    let table = LpmTable::build(&routes, 4).unwrap();
    let mut nb = neighbors_for(&routes);
    nb = Neighbors::parse(
        &nb.sorted()
            .into_iter()
            .filter(|(nh, _)| *nh != 3 && *nh != 5)
            .map(|(nh, n)| {
                format!(
                    "{nh} {} {} {}\n",
                    n.port,
                    nexthop_wire::MacAddr::from(n.dst_mac),
                    nexthop_wire::MacAddr::from(n.src_mac)
                )
            })
            .collect::<String>(),
        "nb",
    )
    .unwrap();
    let e = IpPipeline::new(&table, &nb, IpConfig::default()).unwrap_err();
    assert_eq!(
        e,
        IpConfigError::MissingNeighbors {
            count: 2,
            first: vec![3, 5]
        }
    );
    assert!(e.to_string().starts_with("2 next hop(s)"));
}

#[test]
fn large_next_hop_values_resolve_like_small_ones() {
    // Next hops beyond the dense index take the binary-search path.
    let big = [4_000_000_000u32, DENSE_LIMIT, DENSE_LIMIT - 1, 7];
    let routes = RouteList {
        v4: vec![
            (p4([198, 51, 100, 0], 24), big[0]),
            (p4([203, 0, 113, 0], 24), big[1]),
            (p4([192, 0, 2, 0], 24), big[2]),
        ],
        v6: vec![(p6(0x2001_0db8 << 96, 32), big[3])],
    };
    let table = LpmTable::build(&routes, 4).unwrap();
    let nb = neighbors_for(&routes);
    let mut p = IpPipeline::new(&table, &nb, IpConfig::default()).unwrap();
    assert!(p.dense.is_empty());
    for (dst, nh) in [
        (ip4([198, 51, 100, 1]), big[0]),
        (ip4([203, 0, 113, 1]), big[1]),
        (ip4([192, 0, 2, 1]), big[2]),
    ] {
        let (d, out) = one(&mut p, v4_frame(dst, 9, 0));
        assert_eq!(d, IpDecision::Forward(neighbor(nh).port));
        assert_eq!(&out[0..6], &neighbor(nh).dst_mac);
    }
    let (d, _) = one(&mut p, v6_frame(0x2001_0db8 << 96 | 5, 9, 0));
    assert_eq!(d, IpDecision::Forward(neighbor(7).port));
    // Small next hops use the dense index, with holes between them.
    let routes = small_routes();
    let table = LpmTable::build(&routes, 4).unwrap();
    let p = IpPipeline::new(&table, &neighbors_for(&routes), IpConfig::default()).unwrap();
    assert_eq!(p.dense.len(), 6);
    assert_eq!(p.neighbor(0), None);
    assert_eq!(p.neighbor(9), None);
    assert_eq!(p.neighbor(5), Some(&neighbor(5)));
}

/// Random routes inside the documentation prefixes, random destinations
/// (mostly inside them, some outside), mixed families and VLAN tags:
/// every decision and rewritten frame against the binary-trie oracle.
#[test]
fn batches_route_like_the_binary_trie_and_rewrite_every_forwarded_frame() {
    let mut r = rng(42);
    let bases4 = [
        ip4([192, 0, 2, 0]),
        ip4([198, 51, 100, 0]),
        ip4([203, 0, 113, 0]),
    ];
    let mut routes = RouteList::default();
    let (mut t4, mut t6) = (BinaryTrie::<u32>::new(), BinaryTrie::<u128>::new());
    for _ in 0..300 {
        let len = r.gen_range(24..=32);
        let a = bases4[r.gen_range(0..3)] | (r.gen::<u32>() & 0xff);
        let p = Prefix4::new(a, len).unwrap();
        let nh = r.gen_range(0..40);
        routes.v4.push((p, nh));
        t4.insert(p, nh);
    }
    for _ in 0..300 {
        let len = r.gen_range(32..=64);
        let a = (0x2001_0db8_u128 << 96) | (u128::from(r.gen::<u32>()) << 64);
        let p = Prefix6::new(a, len).unwrap();
        let nh = r.gen_range(0..40);
        routes.v6.push((p, nh));
        t6.insert(p, nh);
    }
    let table = LpmTable::build(&routes, 4).unwrap();
    let nb = neighbors_for(&routes);
    let mut p = IpPipeline::new(&table, &nb, IpConfig::default()).unwrap();
    let mut frames = Vec::new();
    let mut want = Vec::new();
    for i in 0..2000 {
        let vlans = i % 3;
        let ttl = r.gen_range(0..=255u8);
        if r.gen_bool(0.5) {
            let dst = if r.gen_bool(0.9) {
                bases4[r.gen_range(0..3)] | (r.gen::<u32>() & 0xff)
            } else {
                r.gen()
            };
            frames.push(v4_frame(dst, ttl, vlans));
            want.push(if ttl <= 1 {
                IpDecision::TtlExpired
            } else {
                t4.lookup(dst).map_or(IpDecision::NoRoute, |nh| {
                    IpDecision::Forward(neighbor(nh).port)
                })
            });
        } else {
            let dst = if r.gen_bool(0.9) {
                (0x2001_0db8_u128 << 96)
                    | (u128::from(r.gen::<u32>()) << 64)
                    | r.gen::<u64>() as u128
            } else {
                r.gen()
            };
            frames.push(v6_frame(dst, ttl, vlans));
            want.push(if ttl <= 1 {
                IpDecision::TtlExpired
            } else {
                t6.lookup(dst).map_or(IpDecision::NoRoute, |nh| {
                    IpDecision::Forward(neighbor(nh).port)
                })
            });
        }
    }
    let before = frames.clone();
    let mut decisions = Vec::new();
    // Odd group sizes, so batches straddle groups of BATCH.
    for (k, chunk) in frames.chunks_mut(77).enumerate() {
        let mut d = Vec::new();
        p.process(k as u16 % 2, chunk, &mut d);
        decisions.extend(d);
    }
    assert_eq!(decisions, want);
    for ((f, old), d) in frames.iter().zip(&before).zip(&decisions) {
        let IpDecision::Forward(_) = d else {
            assert_eq!(f, old);
            continue;
        };
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        let l3 = eth.header_len();
        let (nh, ttl_at) = if eth.ethertype() == EtherType::IPV4 {
            let ip = Ipv4Packet::new_checked(&f[l3..]).unwrap();
            assert!(ip.checksum_ok());
            let dst = u32::from_be_bytes(ip.dst_bytes().try_into().unwrap());
            (t4.lookup(dst).unwrap(), l3 + V4_TTL)
        } else {
            let ip = Ipv6Packet::new_checked(&f[l3..]).unwrap();
            let dst = u128::from_be_bytes(ip.dst_bytes().try_into().unwrap());
            (t6.lookup(dst).unwrap(), l3 + V6_HOP_LIMIT)
        };
        assert_eq!(&f[0..6], &neighbor(nh).dst_mac);
        assert_eq!(&f[6..12], &neighbor(nh).src_mac);
        assert_eq!(f[ttl_at], old[ttl_at] - 1);
        // Only the MACs, the TTL and the IPv4 checksum changed.
        for (j, (a, b)) in f.iter().zip(old).enumerate() {
            let allowed =
                j < 12 || j == ttl_at || (ttl_at == l3 + V4_TTL && (j == l3 + 10 || j == l3 + 11));
            assert!(allowed || a == b, "byte {j} changed");
        }
    }
    let c = p.counters().clone();
    assert!(c.is_consistent());
    assert_eq!(c.frames_in, 2000);
    assert_eq!(c.rx(0).frames + c.rx(1).frames, 2000);
    let tx: u64 = c.tx_ports().map(|(_, pc)| pc.frames).sum();
    assert_eq!(tx, c.forwarded);
    let taken = p.take_counters();
    assert_eq!(taken.frames_in, 2000);
    assert_eq!(p.counters().frames_in, 0);
    p.set_counters(taken);
    assert_eq!(p.counters().forwarded, c.forwarded);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes: no panic, one decision each, every frame counted once,
    /// and frames not forwarded are not changed.
    #[test]
    fn any_frames_are_decided_and_counted_once(
        frames in prop::collection::vec(
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..80),
                (any::<u32>(), any::<u8>(), 0..3usize, 0..64usize, any::<u8>()).prop_map(
                    |(dst, ttl, vlans, at, x)| {
                        let mut f = v4_frame(dst, ttl, vlans);
                        let n = f.len();
                        f[at % n] ^= x;
                        f
                    }
                ),
                (any::<u128>(), any::<u8>(), 0..3usize, 0..80usize).prop_map(
                    |(dst, hl, vlans, cut)| {
                        let f = v6_frame(dst, hl, vlans);
                        f[..cut.min(f.len())].to_vec()
                    }
                ),
            ],
            0..70,
        )
    ) {
        let routes = small_routes();
        let table = LpmTable::build(&routes, 4).unwrap();
        let mut p = IpPipeline::new(&table, &neighbors_for(&routes), IpConfig::default()).unwrap();
        let mut fs = frames.clone();
        let mut d = Vec::new();
        p.process(3, &mut fs, &mut d);
        prop_assert_eq!(d.len(), frames.len());
        prop_assert!(p.counters().is_consistent());
        for ((a, b), d) in fs.iter().zip(&frames).zip(&d) {
            if !matches!(d, IpDecision::Forward(_)) {
                prop_assert_eq!(a, b);
            }
        }
    }
}
