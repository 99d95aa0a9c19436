//! Every Bloomfwd lookup equals the binary-trie oracle: random, inside-prefix
//! and boundary addresses, default route, /32 and /128, real tables, random
//! and real (LINX) announce/withdraw sequences; batched == single; every
//! SIMD path and both batch probe orders give the same answers.

mod common;

use common::*;
use nexthop_lpm::bloomfwd::Probe;
use nexthop_lpm::parse::{AnyPrefix, UpdateKind};
use nexthop_lpm::{
    Address, BinaryTrie, BloomfwdControl, Config, HashKind, NextHop, Prefix, Simd, NO_ROUTE,
};
use proptest::prelude::*;
use rand::Rng;

fn check<A: nexthop_lpm::bloomfwd::GroupKey>(
    t: &BloomfwdControl<A>,
    o: &BinaryTrie<A>,
    addrs: &[A],
) {
    let mut out = vec![0; addrs.len()];
    // IPv6 batches test filters only of large tables unless told to test
    // them all (0 bytes): both ways.
    let paths = Simd::available().into_iter().flat_map(|s| {
        [
            (s, Probe::Masks, 4 << 20),
            (s, Probe::Masks, 0),
            (s, Probe::FiltersFirst, 4 << 20),
        ]
    });
    for (simd, probe, filter_min) in paths {
        let mut t2 = t.table().clone();
        t2.set_simd(simd);
        t2.set_probe(probe);
        t2.set_round_filter_min_bytes(filter_min);
        let hits = t2.lookup_batch(addrs, &mut out);
        let mut want_hits = 0;
        for (i, &a) in addrs.iter().enumerate() {
            let want = o.lookup(a);
            want_hits += want.is_some() as usize;
            assert_eq!(t.lookup(a), want, "single lookup of {}", a.display());
            assert_eq!(
                out[i],
                want.unwrap_or(NO_ROUTE),
                "batched lookup of {} ({simd:?}, {probe:?}, filters above {filter_min} bytes)",
                a.display()
            );
        }
        assert_eq!(hits, want_hits);
    }
}

fn random_routes<A: Address>(seed: u64, n: usize, lens: &[u8]) -> Vec<(Prefix<A>, NextHop)> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| (random_prefix::<A>(&mut r, lens), r.gen_range(0..1000)))
        .collect()
}

const V4_LENS: &[u8] = &[
    0, 1, 7, 8, 12, 16, 19, 20, 21, 22, 23, 24, 25, 28, 30, 31, 32,
];

#[test]
fn ipv4_random_table_matches_trie() {
    for (seed, hash) in [
        (1, HashKind::H2),
        (2, HashKind::Murmur3),
        (3, HashKind::Knuth),
        (4, HashKind::Mix64),
    ] {
        let routes = random_routes::<u32>(seed, 3000, V4_LENS);
        let mut cfg = Config::ipv4();
        cfg.filter_hash = hash;
        cfg.table_hash = if hash == HashKind::Knuth {
            HashKind::H2
        } else {
            hash
        };
        let t = BloomfwdControl::build(cfg, &routes).unwrap();
        let o = oracle(&routes);
        let addrs = probe_addrs(&mut rng(seed + 100), &routes, 20_000, 3000);
        check(&t, &o, &addrs);
    }
}

#[test]
fn ipv4_default_route_and_host_routes() {
    let routes = vec![
        (Prefix::new(0u32, 0).unwrap(), 1),
        (Prefix::new(0xFFFF_FFFFu32, 32).unwrap(), 2),
        (Prefix::new(0u32, 32).unwrap(), 3),
        (Prefix::new(0x0A00_0000u32, 8).unwrap(), 4),
        (Prefix::new(0x0A00_0001u32, 32).unwrap(), 5),
    ];
    let t = BloomfwdControl::build(Config::ipv4(), &routes).unwrap();
    let o = oracle(&routes);
    check(
        &t,
        &o,
        &[
            0,
            1,
            0xFFFF_FFFF,
            0xFFFF_FFFE,
            0x0A00_0000,
            0x0A00_0001,
            0x0A00_0002,
            0x0B00_0000,
        ],
    );
    assert_eq!(t.lookup(0x0B00_0000), Some(1));
    assert_eq!(t.lookup(0xFFFF_FFFF), Some(2));
    let empty = BloomfwdControl::<u32>::build(Config::ipv4(), &[]).unwrap();
    assert_eq!(empty.lookup(0x0102_0304), None);
}

/// Batches of every length from 0 to 100, at every offset mod 16 into the
/// address stream: the chunk tails (the vector look-ahead loads a short
/// last chunk masked) and chunk boundaries give the single-lookup answer on
/// every SIMD path.
#[test]
fn ipv4_batches_of_every_length_match_single_lookups() {
    let routes = random_routes::<u32>(11, 3000, V4_LENS);
    for hash in [HashKind::H2, HashKind::Murmur3] {
        let mut cfg = Config::ipv4();
        (cfg.filter_hash, cfg.table_hash) = (hash, hash);
        let t = BloomfwdControl::build(cfg, &routes).unwrap();
        let addrs = probe_addrs(&mut rng(12), &routes, 300, 300);
        check_batches(&t, &addrs, 0..16, 100);
    }
}

/// Batches of `addrs` from each of `starts`, of every length up to
/// `max_len`, and the whole of `addrs`, give the single-lookup answers and
/// hit counts on every SIMD path.
fn check_batches<A: nexthop_lpm::bloomfwd::GroupKey>(
    t: &BloomfwdControl<A>,
    addrs: &[A],
    starts: impl Iterator<Item = usize> + Clone,
    max_len: usize,
) {
    let want: Vec<NextHop> = addrs
        .iter()
        .map(|&a| t.lookup(a).unwrap_or(NO_ROUTE))
        .collect();
    let hits_of = |w: &[NextHop]| w.iter().filter(|&&v| v != NO_ROUTE).count();
    for simd in Simd::available() {
        let mut t2 = t.table().clone();
        t2.set_simd(simd);
        let mut out = vec![7; addrs.len()];
        let hits = t2.lookup_batch(addrs, &mut out);
        assert_eq!(out, want, "{simd:?}, the whole stream");
        assert_eq!(hits, hits_of(&want));
        for start in starts.clone() {
            for len in 0..=max_len {
                let mut out = vec![7; len];
                let hits = t2.lookup_batch(&addrs[start..start + len], &mut out);
                let w = &want[start..start + len];
                assert_eq!(out, w, "{simd:?}, batch of {len} from {start}");
                assert_eq!(hits, hits_of(w));
            }
        }
    }
}

/// IPv6 batches (`rounds`): every length from 0 to 140 at a few offsets
/// (chunks of 64 lanes, short last chunks), and a long batch whose
/// random-address segments are looked up one at a time and whose
/// inside-prefix segments go back to rounds, give the single-lookup
/// answer on every SIMD path, on the real table (full home lines, refined
/// slots and sub-slots) and on a random one.
#[test]
fn ipv6_batches_of_every_length_match_single_lookups() {
    let real = real_routes().v6;
    let lens: &[u8] = &[0, 16, 19, 29, 32, 40, 44, 48, 56, 64, 65, 96, 128];
    for routes in [real, random_routes::<u128>(13, 2000, lens)] {
        let t = BloomfwdControl::build(Config::ipv6_dpcpe(&routes, 12), &routes).unwrap();
        let mut r = rng(14);
        // Random addresses first (3 segments), then inside prefixes.
        let mut addrs: Vec<u128> = (0..3000).map(|_| random_addr(&mut r)).collect();
        for _ in 0..5000 {
            let i = r.gen_range(0..routes.len());
            addrs.push(inside(&mut r, routes[i].0));
        }
        check_batches(&t, &addrs, [3000, 3001, 3063].into_iter(), 140);
    }
}

#[test]
fn ipv6_random_table_matches_trie() {
    let lens: &[u8] = &[
        0, 1, 16, 19, 29, 32, 33, 40, 44, 47, 48, 56, 63, 64, 65, 96, 112, 127, 128,
    ];
    let routes = random_routes::<u128>(7, 800, lens);
    for levels in [1usize, 3, 5, 8, 12] {
        let t = BloomfwdControl::build(Config::ipv6_dpcpe(&routes, levels), &routes).unwrap();
        let o = oracle(&routes);
        let addrs = probe_addrs(&mut rng(8), &routes, 5_000, 3000);
        check(&t, &o, &addrs);
    }
}

/// More groups than mask bits (groups from 30 on share bit 30) and
/// addresses under many groups at once: lookups walk only the groups their
/// mask names, which must reach every shared-bit group.
#[test]
fn ipv6_with_more_groups_than_mask_bits_matches_trie() {
    // Levels 18, 21, ..., 126 and 128: 38 groups.
    let mut levels: Vec<u8> = (18..=126).step_by(3).collect();
    levels.push(128);
    let lens: Vec<u8> = (17..=128).collect();
    let mut routes = random_routes::<u128>(21, 3000, &lens);
    // Nest many of them under one /17 so its addresses name many groups.
    let base = 0x2001_0db8u128 << 96;
    let mut r = rng(22);
    for len in 17..=128u8 {
        let host: u128 = r.gen::<u128>() >> 17;
        let p = Prefix::new(base | host, len).expect("len <= 128");
        routes.push((p, len as NextHop));
    }
    let cfg = Config {
        levels,
        ..Config::ipv6(vec![])
    };
    let t = BloomfwdControl::build(cfg, &routes).unwrap();
    let o = oracle(&routes);
    let mut addrs = probe_addrs(&mut rng(23), &routes, 4_000, 4000);
    addrs.extend((0..2000).map(|_| base | (r.gen::<u128>() >> 17)));
    check(&t, &o, &addrs);
}

fn apply_random_updates<A: nexthop_lpm::bloomfwd::GroupKey>(
    seed: u64,
    cfg: Config,
    lens: &[u8],
    rounds: usize,
) {
    apply_random_updates_under::<A>(seed, cfg, lens, rounds, &[]);
}

/// A random prefix of one of `lens`, moved inside a random one of `under`
/// (when any) so that the keys crowd a few direct slots.
fn random_prefix_under<A: Address>(
    r: &mut impl Rng,
    lens: &[u8],
    under: &[Prefix<A>],
) -> Prefix<A> {
    let p = random_prefix::<A>(r, lens);
    if under.is_empty() {
        return p;
    }
    let u = under[r.gen_range(0..under.len())];
    Prefix::new(inside(r, u), p.len().max(u.len())).unwrap()
}

fn apply_random_updates_under<A: nexthop_lpm::bloomfwd::GroupKey>(
    seed: u64,
    cfg: Config,
    lens: &[u8],
    rounds: usize,
    under: &[Prefix<A>],
) -> BloomfwdControl<A> {
    let mut r = rng(seed);
    let base: Vec<(Prefix<A>, NextHop)> = (0..500)
        .map(|_| {
            (
                random_prefix_under(&mut r, lens, under),
                r.gen_range(0..1000),
            )
        })
        .collect();
    let mut t = BloomfwdControl::build(cfg, &base).unwrap();
    let mut o = oracle(&base);
    let mut live: Vec<Prefix<A>> = base.iter().map(|x| x.0).collect();
    for round in 0..rounds {
        for _ in 0..50 {
            if r.gen_bool(0.5) && !live.is_empty() {
                let p = live.swap_remove(r.gen_range(0..live.len()));
                assert_eq!(t.withdraw(p), o.remove(p).is_some(), "withdraw {p}");
            } else {
                // Nested announces: often inside an existing prefix.
                let p = if r.gen_bool(0.5) && !live.is_empty() {
                    let outer = live[r.gen_range(0..live.len())];
                    let len = r.gen_range(outer.len()..=A::BITS.min(outer.len() + 12));
                    Prefix::new(inside(&mut r, outer), len).unwrap()
                } else {
                    random_prefix_under::<A>(&mut r, lens, under)
                };
                let nh = r.gen_range(0..1000);
                t.announce(p, nh);
                o.insert(p, nh);
                live.push(p);
            }
        }
        let routes: Vec<_> = live.iter().map(|&p| (p, 0)).collect();
        let addrs = probe_addrs(&mut r, &routes, 2000, 2000);
        check(&t, &o, &addrs);
        assert_eq!(t.rib().len(), o.len(), "round {round}");
    }
    t
}

#[test]
fn ipv4_random_announce_withdraw_matches_trie() {
    apply_random_updates::<u32>(11, Config::ipv4(), V4_LENS, 40);
}

#[test]
fn ipv6_random_announce_withdraw_matches_trie() {
    let lens: &[u8] = &[0, 3, 32, 40, 48, 56, 64, 100, 128];
    apply_random_updates::<u128>(12, Config::ipv6(vec![32, 48, 64]), lens, 30);
}

#[test]
fn ipv6_dense_slot_announce_withdraw_matches_trie() {
    // Every route under two /16s: their direct slots name most groups and
    // are refined (sub-masks per /24), and the updates then keep the
    // sub-masks exact through announces and withdraws.
    let lens: &[u8] = &[17, 20, 24, 28, 32, 36, 40, 48, 56, 64, 80, 100, 128];
    let under = [
        Prefix::new(0x2001u128 << 112, 16).unwrap(),
        Prefix::new(0x2a02u128 << 112, 16).unwrap(),
    ];
    for hash in [HashKind::Murmur3, HashKind::Mix64, HashKind::H2] {
        let mut cfg = Config::ipv6(vec![24, 32, 40, 48, 64, 128]);
        cfg.filter_hash = hash;
        cfg.table_hash = hash;
        let t = BloomfwdControl::<u128>::build(cfg.clone(), &[]).unwrap();
        assert_eq!(t.table().refined_slots(), 0);
        let t = apply_random_updates_under::<u128>(13, cfg, lens, 20, &under);
        assert!(t.table().refined_slots() >= 2, "refined at the first build");
        let rebuilt = BloomfwdControl::build(t.config().clone(), &t.rib().sorted()).unwrap();
        assert!(
            rebuilt.table().refined_slots() >= 2,
            "both dense slots are refined after a rebuild"
        );
    }
}

#[test]
fn ipv6_dense_sub_slot_announce_withdraw_matches_trie() {
    // Every route under two /24s: their sub-slots name most groups and are
    // refined again (sub-sub-masks per /32), kept exact by the updates.
    let lens: &[u8] = &[24, 26, 28, 30, 32, 36, 40, 48, 56, 64, 128];
    let under = [
        Prefix::new(0x2001_0d00u128 << 96, 24).unwrap(),
        Prefix::new(0x2a02_1200u128 << 96, 24).unwrap(),
    ];
    let cfg = Config::ipv6(vec![24, 28, 32, 40, 48, 64, 128]);
    let t = apply_random_updates_under::<u128>(17, cfg, lens, 20, &under);
    assert!(
        t.table().refined_sub_slots() >= 2,
        "refined at the first build"
    );
}

#[test]
fn ipv6_lookups_agree_across_hash_choices() {
    let routes = real_routes();
    let o = oracle(&routes.v6);
    let addrs = probe_addrs(&mut rng(23), &routes.v6, 30_000, 20_000);
    for hash in [
        HashKind::Murmur3,
        HashKind::Mix64,
        HashKind::H2,
        HashKind::Knuth,
    ] {
        let mut cfg = Config::ipv6_dpcpe(&routes.v6, 12);
        cfg.filter_hash = hash;
        cfg.table_hash = hash;
        let t = BloomfwdControl::build(cfg, &routes.v6).unwrap();
        assert!(t.table().refined_slots() > 0, "2001::/16 is refined");
        check(&t, &o, &addrs);
    }
}

/// The IPv6 batch tests filters with AVX-512 only while every filter has
/// `k <= 8`; a 0.1% target (`k = 10`) takes the scalar test, and distinct
/// filter and table hashes address the buckets with a hash of their own.
#[test]
fn ipv6_lookups_agree_with_many_filter_hashes_and_split_hashes() {
    let routes = real_routes();
    let o = oracle(&routes.v6);
    let addrs = probe_addrs(&mut rng(29), &routes.v6, 20_000, 20_000);
    for (fpr, filter_hash, table_hash) in [
        (0.001, HashKind::Mix64, HashKind::Mix64),
        (0.01, HashKind::Mix64, HashKind::Murmur3),
    ] {
        let mut cfg = Config::ipv6_dpcpe(&routes.v6, 12);
        (cfg.fpr, cfg.filter_hash, cfg.table_hash) = (fpr, filter_hash, table_hash);
        let t = BloomfwdControl::build(cfg, &routes.v6).unwrap();
        check(&t, &o, &addrs);
    }
}

#[test]
fn real_ipv4_table_matches_trie() {
    let routes = real_routes();
    assert_eq!(routes.v4.len(), 606_138);
    let t = BloomfwdControl::build(Config::ipv4(), &routes.v4).unwrap();
    let o = oracle(&routes.v4);
    let addrs = probe_addrs(&mut rng(21), &routes.v4, 200_000, 150_000);
    check(&t, &o, &addrs);
}

#[test]
fn real_ipv6_table_matches_trie() {
    let routes = real_routes();
    assert_eq!(routes.v6.len(), 27_693);
    let o = oracle(&routes.v6);
    let addrs = probe_addrs(&mut rng(22), &routes.v6, 50_000, 30_000);
    for levels in [5, 8, 12] {
        let t = BloomfwdControl::build(Config::ipv6_dpcpe(&routes.v6, levels), &routes.v6).unwrap();
        check(&t, &o, &addrs);
    }
}

#[test]
fn linx_stream_on_real_table_matches_trie_after_every_batch() {
    let routes = real_routes();
    let updates = linx_updates();
    assert_eq!(updates.len(), 23_446);
    let mut t = BloomfwdControl::build(Config::ipv4(), &routes.v4).unwrap();
    let mut o = oracle(&routes.v4);
    let mut r = rng(31);
    let mut touched = Vec::new();
    for (bi, batch) in updates.chunks(1000).enumerate() {
        touched.clear();
        for u in batch {
            let AnyPrefix::V4(p) = u.prefix else {
                panic!("LINX stream has an IPv6 update");
            };
            match u.kind {
                UpdateKind::Announce(nh) => {
                    t.announce(p, nh);
                    o.insert(p, nh);
                }
                UpdateKind::Withdraw => {
                    assert_eq!(t.withdraw(p), o.remove(p).is_some());
                }
            }
            touched.push((p, 0));
        }
        let mut addrs = probe_addrs(&mut r, &touched, 2000, 1000);
        for _ in 0..5000 {
            let i = r.gen_range(0..routes.v4.len());
            addrs.push(inside(&mut r, routes.v4[i].0));
        }
        check(&t, &o, &addrs);
        assert_eq!(t.rib().len(), o.len(), "batch {bi}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn prop_ipv4_lookup_equals_trie(
        routes in proptest::collection::vec((any::<u32>(), 0u8..=32, 0u32..100), 0..60),
        addrs in proptest::collection::vec(any::<u32>(), 0..60),
        ops in proptest::collection::vec((any::<bool>(), 0usize..60), 0..40),
    ) {
        let routes: Vec<_> = routes.into_iter().map(|(a, l, nh)| (Prefix::new(a, l).unwrap(), nh)).collect();
        let mut t = BloomfwdControl::build(Config::ipv4(), &routes).unwrap();
        let mut o = oracle(&routes);
        for (withdraw, i) in ops {
            if routes.is_empty() { break; }
            let (p, nh) = routes[i % routes.len()];
            if withdraw {
                prop_assert_eq!(t.withdraw(p), o.remove(p).is_some());
            } else {
                t.announce(p, nh + 1);
                o.insert(p, nh + 1);
            }
        }
        let mut probe = addrs.clone();
        for (p, _) in &routes { probe.extend(boundaries(*p)); }
        let mut out = vec![0; probe.len()];
        t.table().lookup_batch(&probe, &mut out);
        for (i, &a) in probe.iter().enumerate() {
            prop_assert_eq!(t.lookup(a), o.lookup(a));
            prop_assert_eq!(out[i], o.lookup(a).unwrap_or(NO_ROUTE));
        }
    }

    #[test]
    fn prop_ipv6_lookup_equals_trie(
        routes in proptest::collection::vec((any::<u128>(), 0u8..=128, 0u32..100), 0..40),
        addrs in proptest::collection::vec(any::<u128>(), 0..40),
    ) {
        let routes: Vec<_> = routes.into_iter().map(|(a, l, nh)| (Prefix::new(a, l).unwrap(), nh)).collect();
        let t = BloomfwdControl::build(Config::ipv6_dpcpe(&routes, 4), &routes).unwrap();
        let o = oracle(&routes);
        let mut probe = addrs.clone();
        for (p, _) in &routes { probe.extend(boundaries(*p)); }
        for &a in &probe {
            prop_assert_eq!(t.lookup(a), o.lookup(a));
        }
    }
}
