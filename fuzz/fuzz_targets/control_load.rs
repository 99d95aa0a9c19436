//! Untrusted control-state bytes: loading never panics, and a loaded
//! structure keeps its invariants. Each input is tried as it is and
//! "sealed" (its last 8 bytes replaced by the XXH3 checksum of the rest, as
//! a forger with the format would write them), so the fuzzer reaches the
//! body parser instead of stopping at the checksum.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::Othello;

fn check(data: &[u8]) {
    if let Ok(o) = Othello::<u64>::load(data) {
        o.check_invariants()
            .expect("loaded structure is consistent");
    }
    if let Ok(o) = Othello::<Vec<u8>>::load(data) {
        o.check_invariants()
            .expect("loaded structure is consistent");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= 16 {
        let mut sealed = data.to_vec();
        let n = sealed.len() - 8;
        let sum = nexthop_hash::hash64(&sealed[..n], 0);
        sealed[n..].copy_from_slice(&sum.to_le_bytes());
        check(&sealed);
    }
});
