//! Untrusted delta bytes: decoding never panics, decoded deltas re-encode to
//! the same bytes, and applying one to a structure either succeeds or leaves
//! it unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::{Config, Delta, Othello};

fuzz_target!(|data: &[u8]| {
    let Ok(d) = Delta::decode(data) else { return };
    assert_eq!(d.encode(), data);
    let o = Othello::build(Config::default(), (0..64u64).map(|k| (k, k))).expect("build");
    let q = o.export(0);
    let before = q.to_snapshot();
    if q.apply(&d).is_err() {
        assert_eq!(
            q.to_snapshot(),
            before,
            "failed apply changed the structure"
        );
    }
});
