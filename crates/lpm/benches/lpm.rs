//! Bloomfwd against its baselines on the real tables (full harness grows
//! in later commits). `--smoke`: tiny sizes, seconds.

use std::time::Instant;

use nexthop_lpm::parse::{load_routes, NextHopMode};
use nexthop_lpm::{BinaryTrie, BloomfwdControl, Config};

fn main() {
    let smoke = std::env::args().any(|a| a == "--smoke");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/routeviews-20151101-ipv4.txt.gz");
    let routes = load_routes(&path, NextHopMode::Asn)
        .unwrap_or_else(|e| panic!("routeviews-20151101-ipv4.txt.gz: {e}"));
    let n = if smoke { 100_000 } else { 10_000_000 };
    let mut x: u32 = 0x1234_5678;
    let addrs: Vec<u32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect();
    let t = BloomfwdControl::build(Config::ipv4(), &routes.v4).expect("valid config");
    let mut trie = BinaryTrie::new();
    for &(p, nh) in &routes.v4 {
        trie.insert(p, nh);
    }
    let mut out = vec![0; n];
    let s = Instant::now();
    t.table().lookup_batch(&addrs, &mut out);
    let bf = s.elapsed().as_secs_f64();
    let s = Instant::now();
    let mut sum = 0u64;
    for &a in &addrs {
        sum += trie.lookup(a).unwrap_or(0) as u64;
    }
    let tr = s.elapsed().as_secs_f64();
    println!(
        "bloomfwd batched {:.1} Mlps, trie {:.1} Mlps (checksum {sum})",
        n as f64 / bf / 1e6,
        n as f64 / tr / 1e6
    );
}
