//! Shared helpers of the integration tests: real data files, seeded
//! generators and the oracle comparison.
#![allow(dead_code)]

use std::path::PathBuf;

use nexthop_lpm::parse::{load_routes, load_updates, NextHopMode, RouteList, Update};
use nexthop_lpm::{Address, BinaryTrie, NextHop, Prefix};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A file of the shared data directory; panics naming it when missing.
pub fn data_file(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(name);
    assert!(
        p.exists(),
        "data file {name} not found at {} (see ../shared/DATA.md)",
        p.display()
    );
    p
}

pub fn real_routes() -> RouteList {
    let mut v4 = load_routes(
        &data_file("routeviews-20151101-ipv4.txt.gz"),
        NextHopMode::Asn,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let v6 = load_routes(
        &data_file("routeviews-20151101-ipv6.txt.gz"),
        NextHopMode::Asn,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    v4.v6 = v6.v6;
    v4
}

pub fn linx_updates() -> Vec<Update> {
    load_updates(&data_file("linx-bgp-updates-20141217-ipv4.txt.gz"))
        .unwrap_or_else(|e| panic!("{e}"))
}

pub fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

pub fn random_addr<A: Address>(r: &mut impl Rng) -> A {
    A::from_u128(r.gen::<u128>())
}

/// A random prefix with a length drawn from `lens`.
pub fn random_prefix<A: Address>(r: &mut impl Rng, lens: &[u8]) -> Prefix<A> {
    let len = lens[r.gen_range(0..lens.len())];
    Prefix::new(random_addr::<A>(r), len).unwrap()
}

/// A random address inside `p`.
pub fn inside<A: Address>(r: &mut impl Rng, p: Prefix<A>) -> A {
    let host: u128 = r.gen();
    let host = if p.is_empty() {
        host
    } else if p.len() >= A::BITS {
        0
    } else {
        host & ((1u128 << (A::BITS - p.len())) - 1)
    };
    A::from_u128(p.addr().to_u128() | host)
}

/// The first and last address of `p` and their neighbours outside it.
pub fn boundaries<A: Address>(p: Prefix<A>) -> [A; 4] {
    let first = p.addr().to_u128();
    let span = if p.is_empty() {
        u128::MAX
    } else {
        (1u128 << (A::BITS - p.len())) - 1
    };
    let span = if A::BITS == 128 || !p.is_empty() {
        span
    } else {
        u32::MAX as u128
    };
    let last = first | span;
    let lim = if A::BITS == 128 {
        u128::MAX
    } else {
        (1u128 << A::BITS) - 1
    };
    [
        A::from_u128(first),
        A::from_u128(last & lim),
        A::from_u128(first.wrapping_sub(1) & lim),
        A::from_u128(last.wrapping_add(1) & lim),
    ]
}

pub fn oracle<A: Address>(routes: &[(Prefix<A>, NextHop)]) -> BinaryTrie<A> {
    let mut t = BinaryTrie::new();
    for &(p, nh) in routes {
        t.insert(p, nh);
    }
    t
}

/// Addresses to check for `routes`: random ones, ones inside random
/// routes, and the boundaries of every route (up to `max_routes` of them).
pub fn probe_addrs<A: Address>(
    r: &mut impl Rng,
    routes: &[(Prefix<A>, NextHop)],
    random: usize,
    max_routes: usize,
) -> Vec<A> {
    let mut v: Vec<A> = (0..random).map(|_| random_addr(r)).collect();
    if !routes.is_empty() {
        for _ in 0..random {
            let i = r.gen_range(0..routes.len());
            v.push(inside(r, routes[i].0));
        }
    }
    let step = (routes.len() / max_routes.max(1)).max(1);
    for (p, _) in routes.iter().step_by(step) {
        v.extend(boundaries(*p));
    }
    v
}
