//! The handshake state machine on untrusted bytes, both ends: the
//! controller's `accept` and the forwarder's `connect` read the input as
//! the peer's stream. Neither panics; whatever they write is one
//! authenticated Nonce (or Error) frame under the shared key; a handshake
//! that succeeds derives the keys both sides would.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_control::frame::{Frame, MsgType, MAX_PAYLOAD};
use nexthop_control::handshake::{accept, connect, derive, Role, NONCE_LEN};
use nexthop_control::AuthKey;

/// The key the seeds in fuzz/seeds/control_handshake were made with.
const KEY: &[u8] = b"nexthop-fuzz-key-0123456789abcdef";
/// The nonces the seeds were made with.
const FORWARDER_NONCE: [u8; NONCE_LEN] = [0x11; NONCE_LEN];
const CONTROLLER_NONCE: [u8; NONCE_LEN] = [0x22; NONCE_LEN];

fuzz_target!(|data: &[u8]| {
    let key = AuthKey::new(KEY).expect("key");
    let mut out = Vec::new();
    let mut r = data;
    let accepted = accept(&mut r, &mut out, &key, &CONTROLLER_NONCE);
    if !out.is_empty() {
        let f = Frame::decode(&out, &key, MAX_PAYLOAD).expect("one frame under the shared key");
        assert!(matches!(f.ty, MsgType::Nonce | MsgType::Error));
        if f.ty == MsgType::Nonce {
            assert_eq!(f.payload.len(), 2 * NONCE_LEN);
            assert_eq!(f.payload[NONCE_LEN..], CONTROLLER_NONCE);
        }
    }
    if let Ok(a) = accepted {
        let mut theirs = [0u8; NONCE_LEN];
        theirs.copy_from_slice(&data[36..36 + NONCE_LEN]);
        let f = derive(&key, &theirs, &CONTROLLER_NONCE, Role::Forwarder);
        assert_eq!(a.keys.session, f.session);
    }
    let mut out = Vec::new();
    let mut r = data;
    let connected = connect(&mut r, &mut out, &key, &FORWARDER_NONCE);
    let f = Frame::decode(&out, &key, MAX_PAYLOAD).expect("the forwarder's Nonce frame");
    assert_eq!((f.ty, f.payload.as_slice()), (MsgType::Nonce, &FORWARDER_NONCE[..]));
    if let Ok(k) = connected {
        let mut theirs = [0u8; NONCE_LEN];
        theirs.copy_from_slice(&data[36 + NONCE_LEN..36 + 2 * NONCE_LEN]);
        let c = derive(&key, &FORWARDER_NONCE, &theirs, Role::Controller);
        assert_eq!(k.session, c.session);
    }
});
