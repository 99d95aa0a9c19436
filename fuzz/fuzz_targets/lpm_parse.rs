//! Untrusted route files and update streams: parsing never panics, and a
//! parsed route file builds a table whose lookups agree with the oracle.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_lpm::parse::{parse_routes, parse_updates, NextHopMode};
use nexthop_lpm::persist::LpmTable;

fuzz_target!(|data: &[u8]| {
    let _ = parse_updates(data);
    let _ = parse_routes(data, NextHopMode::Asn);
    if let Ok(r) = parse_routes(data, NextHopMode::Raw) {
        if r.len() <= 64 {
            let t = LpmTable::build(&r, 3).expect("default configs are valid");
            let mut o = nexthop_lpm::BinaryTrie::new();
            for &(p, nh) in &r.v4 {
                o.insert(p, nh);
            }
            for &(p, _) in &r.v4 {
                assert_eq!(t.v4.lookup(p.addr()), o.lookup(p.addr()));
            }
        }
    }
});
