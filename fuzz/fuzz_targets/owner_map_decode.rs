//! Untrusted cluster owner-map files (`DIR/owner.map`): decoding must never
//! panic; whatever loads must answer lookups (batched as one by one) and
//! re-serialise to a canonical file that loads and answers the same.
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
        let keys = [1u64, 2, 3, 7];
        let mut out = [0u64; 4];
        m.lookup_batch(&keys, &mut out);
        for (k, o) in keys.iter().zip(out) {
            assert!(o < (1u64 << m.value_bits()));
            assert_eq!(m.lookup(k), o);
        }
        // A file may carry bits the map never reads (the slot arrays'
        // padding): what it writes back is canonical, loads, writes the
        // same bytes again and answers the same.
        let bytes = m.to_bytes();
        let again = PackedOwnerMap::from_bytes(&bytes).expect("its own file loads");
        assert_eq!(again.to_bytes(), bytes);
        for (k, o) in keys.iter().zip(out) {
            assert_eq!(again.lookup(k), o);
        }
    }
}
