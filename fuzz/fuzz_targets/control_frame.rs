//! Untrusted controller-protocol bytes: frame decoding never panics, a
//! decoded frame re-encodes to the same bytes, and its payload parses to a
//! typed message or a typed error without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_control::frame::{Frame, MAX_PAYLOAD};
use nexthop_control::{AuthKey, Message};

/// The key the seeds in fuzz/seeds/control_frame were made with.
const KEY: &[u8] = b"nexthop-fuzz-key-0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let key = AuthKey::new(KEY).expect("key");
    let Ok(f) = Frame::decode(data, &key, MAX_PAYLOAD) else { return };
    assert_eq!(f.encode(&key), data);
    if let Ok(m) = Message::decode(f.ty, &f.payload) {
        assert_eq!(m.ty(), f.ty);
    }
});
