//! Untrusted table files: decoding never panics, and a decoded table
//! re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_lpm::persist::LpmTable;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = LpmTable::decode(data) {
        let again = LpmTable::decode(&t.encode()).expect("re-encoded table decodes");
        assert_eq!(again.v4.rib().len(), t.v4.rib().len());
        assert_eq!(again.v6.rib().len(), t.v6.rib().len());
    }
});
