//! Untrusted control-state bytes: loading never panics, and a loaded
//! structure keeps its invariants.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_othello::Othello;

fuzz_target!(|data: &[u8]| {
    if let Ok(o) = Othello::<u64>::load(data) {
        o.check_invariants()
            .expect("loaded structure is consistent");
    }
    if let Ok(o) = Othello::<Vec<u8>>::load(data) {
        o.check_invariants()
            .expect("loaded structure is consistent");
    }
});
