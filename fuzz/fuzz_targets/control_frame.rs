//! Untrusted controller-protocol bytes: frame decoding never panics, a
//! decoded frame re-encodes to the same bytes, and its payload parses to a
//! typed message or a typed error without panicking. A parsed message
//! re-encodes to a payload that parses to it again, and each delta of a
//! DeltaBatch is exactly a Delta message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_control::frame::{encode_parts, Frame, MsgType, MAX_PAYLOAD};
use nexthop_control::{AuthKey, Message};

/// The key the seeds in fuzz/seeds/control_frame were made with.
const KEY: &[u8] = b"nexthop-fuzz-key-0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let key = AuthKey::new(KEY).expect("key");
    check(data, &key);
    // The MAC stops random bytes at the frame layer; also authenticate the
    // input as a payload (first byte: the type) so the message decoders
    // behind it see arbitrary bytes.
    if let [ty, payload @ ..] = data {
        if let Some(ty) = MsgType::from_u8(*ty) {
            if payload.len() <= MAX_PAYLOAD as usize {
                check(&encode_parts(&key, ty, 1, 1, 0, payload), &key);
            }
        }
    }
});

fn check(data: &[u8], key: &AuthKey) {
    let Ok(f) = Frame::decode(data, key, MAX_PAYLOAD) else { return };
    assert_eq!(f.encode(key), data);
    let Ok(m) = Message::decode(f.ty, &f.payload) else { return };
    assert_eq!(m.ty(), f.ty);
    assert_eq!(Message::decode(m.ty(), &m.encode()).as_ref(), Ok(&m));
    if let Message::DeltaBatch { deltas } = &m {
        assert!(!deltas.is_empty());
        for d in deltas {
            let one = Message::Delta { delta: d.delta.clone(), new_actions: d.new_actions.clone() };
            assert_eq!(Message::decode(MsgType::Delta, &one.encode()), Ok(one));
        }
    }
}
