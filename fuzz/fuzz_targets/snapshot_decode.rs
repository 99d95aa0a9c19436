//! Untrusted snapshot bytes: decoding must never panic; whatever loads must
//! answer lookups and re-serialise to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::{Query, QueryView};

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = Query::from_snapshot(data) {
        let _ = q.lookup(&0u64);
        assert_eq!(q.to_snapshot(), data);
    }
    // The view path needs 8-byte alignment; copy into an aligned buffer.
    let mut words = vec![0u64; data.len().div_ceil(8)];
    let bytes: &mut [u8] = bytemuck_bytes(&mut words);
    bytes[..data.len()].copy_from_slice(data);
    if let Ok(v) = QueryView::new(&bytes[..data.len()]) {
        let _ = v.lookup(&1u64);
    }
});

fn bytemuck_bytes(w: &mut [u64]) -> &mut [u8] {
    let len = w.len() * 8;
    // SAFETY: 1. u8 has alignment 1 and every bit pattern is a valid u8.
    // 2. The slice covers exactly the u64 buffer's `len` bytes, borrowed mutably once.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, len) }
}
