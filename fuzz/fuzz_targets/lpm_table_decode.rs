//! Untrusted table files: decoding never panics, never builds more than
//! its memory limit (1 GiB here, inside the fuzzer's 2 GiB), and a decoded
//! table re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_lpm::persist::LpmTable;

fn check(data: &[u8]) {
    if let Ok(t) = LpmTable::decode_with_limit(data, 1 << 30) {
        let again = LpmTable::decode(&t.encode()).expect("re-encoded table decodes");
        assert_eq!(again.v4.rib().len(), t.v4.rib().len());
        assert_eq!(again.v6.rib().len(), t.v6.rib().len());
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    // Sealed: bytes 24..32 are the XXH3 checksum of the body after the
    // 32-byte header, so the fuzzer reaches the configurations and routes.
    if data.len() >= 32 {
        let mut s = data.to_vec();
        let sum = nexthop_hash::hash64(&s[32..], 0);
        s[24..32].copy_from_slice(&sum.to_le_bytes());
        check(&s);
    }
});
