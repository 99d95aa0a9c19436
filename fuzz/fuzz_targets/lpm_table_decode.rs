//! Untrusted table files: decoding never panics, never builds more than
//! its memory limit (1 GiB here, inside the fuzzer's 2 GiB), and a decoded
//! table re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_lpm::persist::LpmTable;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = LpmTable::decode_with_limit(data, 1 << 30) {
        let again = LpmTable::decode(&t.encode()).expect("re-encoded table decodes");
        assert_eq!(again.v4.rib().len(), t.v4.rib().len());
        assert_eq!(again.v6.rib().len(), t.v6.rib().len());
    }
});
