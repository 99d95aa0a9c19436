//! Untrusted snapshot bytes: decoding must never panic; whatever loads must
//! answer lookups and re-serialise to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::{Query, QueryView};

/// Bytes 80..88 and 120..128 of a snapshot are the payload and header
/// checksums: the sealed copy carries correct ones, so the fuzzer reaches
/// the layout checks behind them.
fn seal(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 128 {
        return None;
    }
    let mut s = data.to_vec();
    let payload = nexthop_hash::hash64(&s[128..], 0);
    s[80..88].copy_from_slice(&payload.to_le_bytes());
    let head = nexthop_hash::hash64(&s[..120], 0);
    s[120..128].copy_from_slice(&head.to_le_bytes());
    Some(s)
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(s) = seal(data) {
        check(&s);
    }
});

fn check(data: &[u8]) {
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
}

fn bytemuck_bytes(w: &mut [u64]) -> &mut [u8] {
    let len = w.len() * 8;
    // SAFETY: 1. u8 has alignment 1 and every bit pattern is a valid u8.
    // 2. The slice covers exactly the u64 buffer's `len` bytes, borrowed mutably once.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, len) }
}
