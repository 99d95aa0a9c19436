//! The fingerprint hash table never misforwards a name of its set, even
//! with fingerprints so short that collisions are common.

use nexthop_ndn::fht::{Fht, FhtConfig};
use nexthop_ndn::names::synthetic;
use nexthop_ndn::NameView;

fn check(n: usize, fp_bits: u32, seed: u64) -> (Fht, Vec<Vec<u8>>) {
    let names: Vec<Vec<u8>> = synthetic(n, 3, false, seed)
        .iter()
        .map(|n| n.tlv().to_vec())
        .collect();
    let port = |i: usize| (i * 31 % 251) as u8;
    let cfg = FhtConfig {
        fp_bits,
        ..FhtConfig::default()
    };
    let t = Fht::build(
        names.iter().enumerate().map(|(i, n)| (&n[..], port(i))),
        cfg,
    )
    .unwrap();
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            t.lookup(name),
            Some(port(i)),
            "name {i} misforwarded (w = {fp_bits})"
        );
    }
    (t, names)
}

#[test]
fn known_names_are_never_misforwarded_over_two_million_names() {
    let (t, _) = check(2_000_000, 16, 1);
    let s = t.stats();
    assert!(
        s.ct_collided + s.ct_shadowed > 0,
        "a 16-bit table of 2M names must see collisions: {s:?}"
    );
    assert!(s.bytes_per_name() < 3.6, "{s:?}");
}

#[test]
fn short_fingerprints_push_many_names_to_the_collision_table_and_stay_exact() {
    let (t, names) = check(1_000_000, 8, 2);
    let s = t.stats();
    assert_eq!(s.ct_collided + s.ct_overflow + s.ct_shadowed, t.ct_len());
    assert!(t.ct_len() > names.len() / 20, "{s:?}");
}

#[test]
fn overflowing_buckets_go_to_the_collision_table() {
    // Load 1.0: some candidate buckets fill up.
    let names: Vec<Vec<u8>> = (0..200_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    let cfg = FhtConfig {
        fp_bits: 24,
        load: 1.0,
        ..FhtConfig::default()
    };
    let t = Fht::build(names.iter().map(|n| (&n[..], n[0])), cfg).unwrap();
    assert!(t.stats().ct_overflow > 0, "{:?}", t.stats());
    for n in &names {
        assert_eq!(t.lookup(n), Some(n[0]));
    }
}
