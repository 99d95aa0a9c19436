//! DPDK's `rte_lpm` / `rte_lpm6` through the `dpdk` feature's wrapper
//! against the binary-trie oracle: the real RouteViews tables of DATA.md,
//! random nested tables, and the LINX update stream (adds and deletes).
//! These catch a broken wrapper (byte order, next-hop decoding, miss
//! value, chunk tails, delete semantics) before the benchmark trusts it.
//!
//! `cargo test -p nexthop-lpm --release --features dpdk --test dpdk`
//! (needs libdpdk-dev; Cargo.toml builds this file only with the feature).

mod common;

use common::{linx_updates, oracle, probe_addrs, random_prefix, real_routes, rng};
use nexthop_lpm::dpdk::{DpdkLpm4, DpdkLpm6};
use nexthop_lpm::parse::{AnyPrefix, UpdateKind};
use nexthop_lpm::{Address, BinaryTrie, NextHop, NO_ROUTE};
use rand::Rng;

/// `single` and `bulk` lookups of every address equal the oracle's.
fn check<A: Address>(
    what: &str,
    addrs: &[A],
    oracle: &BinaryTrie<A>,
    single: impl Fn(A) -> Option<NextHop>,
    bulk: impl Fn(&[A], &mut [NextHop]) -> usize,
) {
    let mut out = vec![0; addrs.len()];
    let hits = bulk(addrs, &mut out);
    let mut want_hits = 0;
    for (&a, &o) in addrs.iter().zip(&out) {
        let want = oracle.lookup(a);
        want_hits += usize::from(want.is_some());
        assert_eq!(single(a), want, "{what}: lookup({})", a.display());
        assert_eq!(
            o,
            want.unwrap_or(NO_ROUTE),
            "{what}: lookup_bulk at {}",
            a.display()
        );
    }
    assert_eq!(hits, want_hits, "{what}: bulk hit count");
}

#[test]
fn real_ipv6_table_matches_trie() {
    let routes = real_routes().v6;
    assert!(routes.len() > 27_000, "expected the full 2015 table");
    let t = DpdkLpm6::from_routes(&routes).unwrap_or_else(|e| panic!("{e}"));
    let o = oracle(&routes);
    let mut addrs = probe_addrs(&mut rng(42), &routes, 200_000, 30_000);
    addrs.push(u128::MAX);
    check(
        "rte_lpm6 real",
        &addrs,
        &o,
        |a| t.lookup(a),
        |a, out| t.lookup_bulk(a, out),
    );
}

#[test]
fn random_nested_tables_match_trie() {
    let mut r = rng(43);
    // IPv4: every length 1..=32, a few thousand prefixes inside two /8s so
    // they nest and share tbl8 groups; some prefixes re-added with a new
    // next hop.
    let mut v4 = Vec::new();
    for _ in 0..5000 {
        let mut p = random_prefix::<u32>(&mut r, &(1..=32).collect::<Vec<u8>>());
        if p.len() > 8 {
            let a = (p.addr() & 0x00ff_ffff) | (if r.gen() { 10 } else { 192 } << 24);
            p = nexthop_lpm::Prefix::new(a, p.len()).expect("len <= 32");
        }
        v4.push((p, r.gen_range(1..=(1 << 24) - 1)));
    }
    let t = DpdkLpm4::from_routes(&v4).unwrap_or_else(|e| panic!("{e}"));
    let o = oracle(&v4);
    let addrs = probe_addrs(&mut r, &v4, 50_000, 5000);
    check(
        "rte_lpm random",
        &addrs,
        &o,
        |a| t.lookup(a),
        |a, out| t.lookup_bulk(a, out),
    );

    // IPv6: every length 1..=128 under two /16s.
    let mut v6 = Vec::new();
    for _ in 0..3000 {
        let mut p = random_prefix::<u128>(&mut r, &(1..=128).collect::<Vec<u8>>());
        if p.len() > 16 {
            let top: u128 = if r.gen() { 0x2001 } else { 0x2a02 };
            let a = (p.addr() & (u128::MAX >> 16)) | (top << 112);
            p = nexthop_lpm::Prefix::new(a, p.len()).expect("len <= 128");
        }
        v6.push((p, r.gen_range(1..=(1 << 21) - 1)));
    }
    let t = DpdkLpm6::from_routes(&v6).unwrap_or_else(|e| panic!("{e}"));
    let o = oracle(&v6);
    let addrs = probe_addrs(&mut r, &v6, 50_000, 3000);
    check(
        "rte_lpm6 random",
        &addrs,
        &o,
        |a| t.lookup(a),
        |a, out| t.lookup_bulk(a, out),
    );
}

/// One test for the real IPv4 table and the LINX stream on it: building
/// the table takes rte_lpm about a minute (its rule table is an array per
/// depth searched linearly on every add), so it is built once.
#[test]
fn real_ipv4_table_and_linx_updates_match_trie() {
    let routes = real_routes().v4;
    assert!(routes.len() > 600_000, "expected the full 2015 table");
    // `from_routes` sizing plus room for the prefixes LINX announces.
    let mut t = DpdkLpm4::new(1 << 20, 1 << 15).unwrap_or_else(|e| panic!("{e}"));
    for &(p, nh) in &routes {
        t.add(p, nh).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut o = oracle(&routes);

    // The table as loaded: 200k random addresses, 200k inside random
    // prefixes, boundaries of 100k prefixes; an odd count so the bulk path
    // has a partial last chunk.
    let mut addrs = probe_addrs(&mut rng(41), &routes, 200_000, 100_000);
    addrs.push(0xffff_ffff);
    check(
        "rte_lpm real",
        &addrs,
        &o,
        |a| t.lookup(a),
        |a, out| t.lookup_bulk(a, out),
    );

    // The LINX stream in batches of 1000, checked after every batch.
    let updates = linx_updates();
    let mut r = rng(44);
    let mut applied = 0;
    for chunk in updates.chunks(1000) {
        let mut touched = Vec::new();
        for u in chunk {
            let AnyPrefix::V4(p) = u.prefix else { continue };
            match u.kind {
                UpdateKind::Announce(nh) => {
                    // LINX next hops are IPv4 addresses (32 bits): fold
                    // them into rte_lpm's 24 bits the same way for both.
                    let nh = nh % 250 + 1;
                    t.add(p, nh).unwrap_or_else(|e| panic!("{e}"));
                    o.insert(p, nh);
                }
                UpdateKind::Withdraw => {
                    let removed = t.delete(p).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(removed, o.remove(p).is_some(), "withdraw {p}");
                }
            }
            applied += 1;
            touched.push(p);
        }
        let mut addrs: Vec<u32> = touched
            .iter()
            .flat_map(|&p| common::boundaries(p))
            .collect();
        addrs.extend((0..2000).map(|_| {
            let i = r.gen_range(0..routes.len());
            common::inside(&mut r, routes[i].0)
        }));
        check(
            "rte_lpm after LINX batch",
            &addrs,
            &o,
            |a| t.lookup(a),
            |a, out| t.lookup_bulk(a, out),
        );
    }
    assert!(applied > 20_000, "only {applied} IPv4 updates applied");
}

/// The measured heap bytes cover what DPDK's layouts must hold: for
/// `rte_lpm` the 2^24 4-byte `tbl24` entries plus 256 per tbl8 group, for
/// `rte_lpm6` the same plus the rule table. A wrapper that measured
/// nothing (0) or another table's creation would fail; so would one off by
/// a whole table (twice the layout).
#[test]
fn memory_bytes_cover_the_tables() {
    const TBL24: usize = (1 << 24) * 4;
    const TBL8: usize = 256 * 4;
    for (rules, tbl8s) in [(1_000, 100), (50_000, 2_000)] {
        let t4 = DpdkLpm4::new(rules, tbl8s).unwrap();
        let want4 = TBL24 + tbl8s as usize * TBL8 + rules as usize * 8;
        let m4 = t4.memory_bytes();
        assert!(
            (want4..2 * want4).contains(&m4),
            "rte_lpm {rules} rules, {tbl8s} tbl8s: {m4} bytes, layout {want4}"
        );
        let t6 = DpdkLpm6::new(rules, tbl8s).unwrap();
        let want6 = TBL24 + tbl8s as usize * TBL8;
        let m6 = t6.memory_bytes();
        assert!(
            (want6..2 * want6).contains(&m6),
            "rte_lpm6 {rules} rules, {tbl8s} tbl8s: {m6} bytes, layout {want6}"
        );
    }
}
