//! Untrusted cluster owner-map files (`DIR/owner.map`): decoding must never
//! panic; whatever loads must answer lookups and re-serialise to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::owner::PackedOwnerMap;

/// The file's last 8 bytes are the checksum of everything before them: the
/// sealed copy carries a correct one, so the fuzzer reaches the layout
/// checks behind it.
fn seal(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 8 {
        return None;
    }
    let mut s = data.to_vec();
    let body = s.len() - 8;
    let sum = nexthop_hash::hash64(&s[..body], 0);
    s[body..].copy_from_slice(&sum.to_le_bytes());
    Some(s)
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(s) = seal(data) {
        check(&s);
    }
});

fn check(data: &[u8]) {
    if let Ok(m) = PackedOwnerMap::from_bytes(data) {
        let owner = m.lookup(&7u64);
        assert!(owner < (1u64 << m.value_bits()));
        let mut out = [0u64; 3];
        m.lookup_batch(&[1u64, 2, 3], &mut out);
        assert_eq!(m.to_bytes(), data);
    }
}
