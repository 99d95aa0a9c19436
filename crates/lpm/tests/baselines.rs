//! The baselines (DIR-24-8, MIHT, MIHT-v6) equal the binary-trie oracle on
//! random and real tables; multi-threaded Bloomfwd lookups over one shared
//! table equal single-threaded ones.

mod common;

use common::*;
use nexthop_lpm::dir248::Dir248;
use nexthop_lpm::miht::{Miht4, Miht6};
use nexthop_lpm::{BloomfwdControl, Config, NextHop, Prefix, NO_ROUTE};
use proptest::prelude::*;
use rand::Rng;

fn random_routes<A: nexthop_lpm::Address>(
    seed: u64,
    n: usize,
    lens: &[u8],
) -> Vec<(Prefix<A>, NextHop)> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| (random_prefix::<A>(&mut r, lens), r.gen_range(0..1000)))
        .collect()
}

const V4_LENS: &[u8] = &[0, 1, 8, 12, 15, 16, 17, 20, 23, 24, 25, 28, 31, 32];
const V6_LENS: &[u8] = &[0, 1, 16, 31, 32, 33, 40, 48, 56, 64, 96, 127, 128];

#[test]
fn dir248_and_miht_match_trie_on_random_tables() {
    for seed in 0..3 {
        let routes = random_routes::<u32>(seed, 4000, V4_LENS);
        let o = oracle(&routes);
        let d = Dir248::build(&routes).unwrap();
        let m = Miht4::build(&routes);
        let addrs = probe_addrs(&mut rng(seed + 50), &routes, 20_000, 4000);
        let mut out = vec![0; addrs.len()];
        d.lookup_batch(&addrs, &mut out);
        for (i, &a) in addrs.iter().enumerate() {
            let want = o.lookup(a);
            assert_eq!(d.lookup(a), want, "dir-24-8 {a:#x}");
            assert_eq!(out[i], want.unwrap_or(NO_ROUTE));
            assert_eq!(m.lookup(a), want, "miht {a:#x}");
        }
    }
}

#[test]
fn miht6_matches_trie_on_random_table() {
    let routes = random_routes::<u128>(5, 4000, V6_LENS);
    let o = oracle(&routes);
    let m = Miht6::build(&routes);
    for a in probe_addrs(&mut rng(6), &routes, 20_000, 4000) {
        assert_eq!(m.lookup(a), o.lookup(a), "{a:#x}");
    }
}

#[test]
fn dir248_rejects_next_hops_it_cannot_hold() {
    let r = [(Prefix::new(0u32, 8).unwrap(), 0x7fff_ffff)];
    assert!(Dir248::build(&r).is_err());
}

#[test]
fn baselines_match_trie_on_real_tables() {
    let routes = real_routes();
    let o = oracle(&routes.v4);
    let d = Dir248::build(&routes.v4).unwrap();
    let m = Miht4::build(&routes.v4);
    for a in probe_addrs(&mut rng(41), &routes.v4, 100_000, 100_000) {
        let want = o.lookup(a);
        assert_eq!(d.lookup(a), want, "dir-24-8 {a:#x}");
        assert_eq!(m.lookup(a), want, "miht {a:#x}");
    }
    let o6 = oracle(&routes.v6);
    let m6 = Miht6::build(&routes.v6);
    for a in probe_addrs(&mut rng(42), &routes.v6, 50_000, 30_000) {
        assert_eq!(m6.lookup(a), o6.lookup(a), "miht6 {a:#x}");
    }
}

#[test]
fn parallel_lookups_over_a_shared_table_equal_single_lookups() {
    let routes = random_routes::<u32>(9, 20_000, V4_LENS);
    let t = BloomfwdControl::build(Config::ipv4(), &routes).unwrap();
    let addrs = probe_addrs(&mut rng(10), &routes, 50_000, 5000);
    let mut one = vec![0; addrs.len()];
    let h1 = t.table().lookup_batch(&addrs, &mut one);
    for threads in [1, 2, 3, 8] {
        let mut many = vec![0; addrs.len()];
        assert_eq!(t.table().lookup_parallel(&addrs, &mut many, threads), h1);
        assert_eq!(many, one, "{threads} threads");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn prop_miht_and_dir248_equal_trie(
        routes in proptest::collection::vec((any::<u32>(), 0u8..=32, 0u32..100), 0..80),
        addrs in proptest::collection::vec(any::<u32>(), 0..50),
    ) {
        let routes: Vec<_> = routes.into_iter().map(|(a, l, nh)| (Prefix::new(a, l).unwrap(), nh)).collect();
        let o = oracle(&routes);
        let d = Dir248::build(&routes).unwrap();
        let m = Miht4::build(&routes);
        let mut probe = addrs.clone();
        for (p, _) in &routes { probe.extend(boundaries(*p)); }
        for a in probe {
            prop_assert_eq!(d.lookup(a), o.lookup(a));
            prop_assert_eq!(m.lookup(a), o.lookup(a));
        }
    }

    #[test]
    fn prop_miht6_equals_trie(
        routes in proptest::collection::vec((any::<u128>(), 0u8..=128, 0u32..100), 0..60),
        addrs in proptest::collection::vec(any::<u128>(), 0..30),
    ) {
        let routes: Vec<_> = routes.into_iter().map(|(a, l, nh)| (Prefix::new(a, l).unwrap(), nh)).collect();
        let o = oracle(&routes);
        let m = Miht6::build(&routes);
        let mut probe = addrs.clone();
        for (p, _) in &routes { probe.extend(boundaries(*p)); }
        for a in probe {
            prop_assert_eq!(m.lookup(a), o.lookup(a));
        }
    }
}
