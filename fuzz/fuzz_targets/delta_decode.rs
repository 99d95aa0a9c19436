//! Untrusted delta bytes: decoding never panics, decoded deltas re-encode to
//! the same bytes, and applying one to a structure either succeeds or leaves
//! it unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::{Config, Delta, Othello};

/// The sealed copy ends in the right checksum (the low 32 bits of XXH3 of
/// everything before it), so the fuzzer reaches the body parser.
fn seal(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 9 {
        return None;
    }
    let mut s = data.to_vec();
    let n = s.len() - 4;
    let sum = nexthop_hash::hash64(&s[..n], 0) as u32;
    s[n..].copy_from_slice(&sum.to_le_bytes());
    Some(s)
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(s) = seal(data) {
        check(&s);
    }
});

fn check(data: &[u8]) {
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
}
