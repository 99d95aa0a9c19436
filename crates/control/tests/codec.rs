//! Frame and message codec against static byte vectors.

use hmac::{Hmac, Mac};
use nexthop_control::frame::{
    Frame, FrameError, MsgType, HEADER_LEN, MAX_KEY_FILE, MAX_PAYLOAD, TAG_LEN,
};
use nexthop_control::{
    AuthKey, BatchDelta, Hello, KeyError, Message, MessageError, FEATURE_DELTA_BATCH,
};
use nexthop_othello::{Delta, Op};
use sha2::Sha256;

const SECRET: &[u8] = b"nexthop-test-key-0123456789abcdef";

fn key() -> AuthKey {
    AuthKey::new(SECRET).expect("key")
}

/// An Ack of sequence 1 on session 0x1122334455667788, sequence 2, generation 3.
const ACK_HEADER_AND_PAYLOAD: [u8; 44] = [
    b'N', b'H', b'C', b'P', // magic
    2,    // version
    4,    // type: Ack
    0, 0, // reserved
    0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // session
    2, 0, 0, 0, 0, 0, 0, 0, // sequence
    3, 0, 0, 0, 0, 0, 0, 0, // generation
    8, 0, 0, 0, // payload length
    1, 0, 0, 0, 0, 0, 0, 0, // payload: acked sequence 1
];

/// HMAC-SHA256(SECRET, ACK_HEADER_AND_PAYLOAD).
const ACK_TAG: [u8; 32] = [
    0x03, 0x93, 0xf3, 0x5c, 0xb5, 0x49, 0xef, 0xbd, 0xe4, 0x77, 0x14, 0x76, 0x31, 0x43, 0xa7, 0x7e,
    0x3b, 0x0c, 0x49, 0x12, 0x73, 0xac, 0xbc, 0xca, 0x16, 0x3b, 0xb3, 0x4d, 0x75, 0xa1, 0x1e, 0x08,
];

fn ack_frame() -> Vec<u8> {
    let mut v = ACK_HEADER_AND_PAYLOAD.to_vec();
    v.extend_from_slice(&ACK_TAG);
    v
}

/// Re-tag modified frame bytes with the shared secret (an independent HMAC).
fn retag(body: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(SECRET).expect("hmac key");
    m.update(body);
    let mut v = body.to_vec();
    v.extend_from_slice(&m.finalize().into_bytes());
    v
}

#[test]
fn ack_frame_encodes_to_the_static_vector() {
    let f = Frame::new(
        MsgType::Ack,
        0x1122_3344_5566_7788,
        2,
        3,
        Message::Ack { seq: 1 }.encode(),
    );
    assert_eq!(f.encode(&key()), ack_frame());
    assert_eq!(retag(&ACK_HEADER_AND_PAYLOAD), ack_frame());
}

#[test]
fn static_vector_decodes_to_the_ack() {
    let f = Frame::decode(&ack_frame(), &key(), MAX_PAYLOAD).expect("decode");
    assert_eq!(f.ty, MsgType::Ack);
    assert_eq!(
        (f.session, f.seq, f.generation),
        (0x1122_3344_5566_7788, 2, 3)
    );
    assert_eq!(
        Message::decode(f.ty, &f.payload),
        Ok(Message::Ack { seq: 1 })
    );
}

#[test]
fn header_errors_are_typed() {
    let good = ack_frame();
    let d = |b: &[u8]| Frame::decode(b, &key(), MAX_PAYLOAD);
    assert_eq!(
        d(&good[..10]),
        Err(FrameError::Truncated {
            needed: HEADER_LEN,
            got: 10
        })
    );
    assert_eq!(
        d(&good[..good.len() - 1]),
        Err(FrameError::Truncated {
            needed: good.len(),
            got: good.len() - 1
        })
    );
    let mut b = good.clone();
    b[0] = b'X';
    assert_eq!(d(&b), Err(FrameError::BadMagic(*b"XHCP")));
    // Version 1 (before the nonce handshake) and any later version.
    for v in [1, 3] {
        let mut b = good.clone();
        b[4] = v;
        assert_eq!(
            d(&b),
            Err(FrameError::Version {
                got: v,
                supported: 2
            })
        );
    }
    let mut b = good.clone();
    b[6] = 1;
    assert_eq!(d(&b), Err(FrameError::Reserved(1)));
    let mut b = good.clone();
    b[32..36].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
    assert_eq!(
        d(&b),
        Err(FrameError::Oversize {
            len: MAX_PAYLOAD as u64 + 1,
            max: MAX_PAYLOAD as u64
        })
    );
    assert_eq!(
        Frame::decode(&good, &key(), 4),
        Err(FrameError::Oversize { len: 8, max: 4 })
    );
    let mut b = good.clone();
    b.push(0);
    assert_eq!(d(&b), Err(FrameError::TrailingData(1)));
}

#[test]
fn mac_errors_and_unknown_types_are_typed() {
    let good = ack_frame();
    let d = |b: &[u8]| Frame::decode(b, &key(), MAX_PAYLOAD);
    let mut b = good.clone();
    b[20] ^= 1; // sequence number
    assert_eq!(d(&b), Err(FrameError::BadMac));
    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] ^= 0x80; // tag
    assert_eq!(d(&b), Err(FrameError::BadMac));
    let other = AuthKey::new(b"another-secret-of-32-bytes-long!").expect("key");
    assert_eq!(
        Frame::decode(&good, &other, MAX_PAYLOAD),
        Err(FrameError::BadMac)
    );
    let mut body = ACK_HEADER_AND_PAYLOAD.to_vec();
    body[5] = 12;
    assert_eq!(d(&retag(&body)), Err(FrameError::UnknownType(12)));
    assert_eq!(good.len(), HEADER_LEN + 8 + TAG_LEN);
}

#[test]
fn hello_payload_matches_its_static_vector() {
    let h = Message::Hello(Hello {
        forwarder_id: "fw".into(),
        column: 0,
        last_seq: 0x0102,
        last_generation: 7,
        features: 0,
    });
    let want: [u8; 23] = [
        2, b'f', b'w', // id
        0, 0, 0, 0, // column
        0x02, 0x01, 0, 0, 0, 0, 0, 0, // last sequence
        7, 0, 0, 0, 0, 0, 0, 0, // last generation
    ];
    assert_eq!(h.encode(), want);
    assert_eq!(Message::decode(MsgType::Hello, &want), Ok(h));
    assert_eq!(
        Message::decode(MsgType::Hello, &want[..22]),
        Err(MessageError::Truncated {
            msg: "Hello",
            needed: 23,
            got: 22
        })
    );
    let mut bad_id = want;
    bad_id[1] = 0xff;
    assert!(matches!(
        Message::decode(MsgType::Hello, &bad_id),
        Err(MessageError::Malformed(_))
    ));
}

#[test]
fn hello_with_features_appends_one_field_and_the_original_layout_still_decodes() {
    let old: [u8; 23] = [
        2, b'f', b'w', 0, 0, 0, 0, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0,
    ];
    let h = |features| {
        Message::Hello(Hello {
            forwarder_id: "fw".into(),
            column: 0,
            last_seq: 0x0102,
            last_generation: 7,
            features,
        })
    };
    // The original 23 bytes: no features.
    assert_eq!(Message::decode(MsgType::Hello, &old), Ok(h(0)));
    let mut new = old.to_vec();
    new.extend_from_slice(&[1, 0, 0, 0]);
    assert_eq!(h(FEATURE_DELTA_BATCH).encode(), new);
    assert_eq!(
        Message::decode(MsgType::Hello, &new),
        Ok(h(FEATURE_DELTA_BATCH))
    );
    // A partial features field is truncated; a byte after it is trailing.
    for cut in 24..27 {
        assert!(matches!(
            Message::decode(MsgType::Hello, &new[..cut]),
            Err(MessageError::Truncated { .. })
        ));
    }
    new.push(0);
    assert_eq!(
        Message::decode(MsgType::Hello, &new),
        Err(MessageError::TrailingData(1))
    );
}

fn ops_delta(generation: u64, index: u32) -> Delta {
    Delta::Ops {
        generation,
        ops: vec![Op::SetA { index, word: 5 }],
    }
}

/// A batch of two deltas and its payload built by hand from Delta payloads.
fn two_delta_batch() -> (Message, Vec<u8>) {
    let d1 = Message::Delta {
        delta: ops_delta(4, 1),
        new_actions: String::new(),
    };
    let d2 = Message::Delta {
        delta: ops_delta(4, 2),
        new_actions: "7 port 3\n".into(),
    };
    let (p1, p2) = (d1.encode(), d2.encode());
    let mut want = 2u32.to_le_bytes().to_vec();
    want.extend_from_slice(&(p1.len() as u32).to_le_bytes());
    want.extend_from_slice(&p1);
    want.extend_from_slice(&(p2.len() as u32).to_le_bytes());
    want.extend_from_slice(&p2);
    let m = Message::DeltaBatch {
        deltas: vec![
            BatchDelta {
                delta: ops_delta(4, 1),
                new_actions: String::new(),
            },
            BatchDelta {
                delta: ops_delta(4, 2),
                new_actions: "7 port 3\n".into(),
            },
        ],
    };
    (m, want)
}

#[test]
fn delta_batch_is_a_count_and_length_prefixed_delta_payloads() {
    let (m, want) = two_delta_batch();
    assert_eq!(m.ty(), MsgType::DeltaBatch);
    assert_eq!(m.encode(), want);
    assert_eq!(Message::decode(MsgType::DeltaBatch, &want), Ok(m.clone()));
    // In a frame: type byte 6, round trip.
    let f = Frame::new(MsgType::DeltaBatch, 9, 3, 4, want.clone());
    let b = f.encode(&key());
    assert_eq!(b[5], 6);
    let back = Frame::decode(&b, &key(), MAX_PAYLOAD).expect("frame");
    assert_eq!(Message::decode(back.ty, &back.payload), Ok(m));
}

#[test]
fn delta_batch_truncations_corruptions_and_bad_counts_are_rejected() {
    let (_, good) = two_delta_batch();
    let d = |b: &[u8]| Message::decode(MsgType::DeltaBatch, b);
    for n in 0..good.len() {
        assert!(d(&good[..n]).is_err(), "truncated to {n}");
    }
    let mut long = good.clone();
    long.push(0);
    assert_eq!(d(&long), Err(MessageError::TrailingData(1)));
    // Count 0, and counts the bytes cannot hold (no allocation for them).
    assert_eq!(
        d(&0u32.to_le_bytes()),
        Err(MessageError::Malformed("empty delta batch"))
    );
    let mut b = good.clone();
    b[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(d(&b), Err(MessageError::Truncated { .. })));
    let mut b = good.clone();
    b[..4].copy_from_slice(&3u32.to_le_bytes());
    assert!(matches!(d(&b), Err(MessageError::Truncated { .. })));
    // Count 1 leaves the second entry as trailing data.
    let mut b = good.clone();
    b[..4].copy_from_slice(&1u32.to_le_bytes());
    assert!(matches!(d(&b), Err(MessageError::TrailingData(_))));
    // An entry length past the end, and one that cuts its delta short.
    let mut b = good.clone();
    b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(d(&b), Err(MessageError::Truncated { .. })));
    let mut b = good.clone();
    let e1 = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    b[4..8].copy_from_slice(&(e1 - 1).to_le_bytes());
    assert!(d(&b).is_err());
    // A flipped byte inside the first delta's bytes (its checksum or
    // magic): a typed delta error.
    let mut b = good.clone();
    b[12] ^= 0x40;
    assert!(matches!(d(&b), Err(MessageError::Delta(_))));
    // New-action text that is not UTF-8.
    let mut b = good;
    let last = b.len() - 1;
    b[last] = 0xff;
    assert!(matches!(d(&b), Err(MessageError::Malformed(_))));
}

#[test]
fn delta_payload_with_a_corrupt_delta_is_rejected() {
    // delta_len 4, then 4 bytes that are not a delta.
    let p = [4, 0, 0, 0, b'N', b'H', b'D', 1];
    assert!(matches!(
        Message::decode(MsgType::Delta, &p),
        Err(MessageError::Delta(_))
    ));
    assert!(matches!(
        Message::decode(MsgType::Delta, &[9, 0, 0, 0, 1]),
        Err(MessageError::Truncated { .. })
    ));
}

/// Write a key file with permission bits `mode`.
fn key_file(path: &std::path::Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, bytes).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn short_key_files_are_refused_and_whitespace_is_trimmed() {
    let dir = std::env::temp_dir().join(format!("nexthop-control-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let short = dir.join("short");
    key_file(&short, b"0123456789\n", 0o600);
    assert!(matches!(
        AuthKey::from_file(&short),
        Err(KeyError::TooShort { len: 10 })
    ));
    let good = dir.join("good");
    let mut text = SECRET.to_vec();
    text.extend_from_slice(b"\n");
    key_file(&good, &text, 0o600);
    let k = AuthKey::from_file(&good).expect("key");
    assert_eq!(
        Frame::decode(&ack_frame(), &k, MAX_PAYLOAD).map(|f| f.seq),
        Ok(2)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn key_files_open_to_group_or_others_or_too_large_are_refused() {
    let dir = std::env::temp_dir().join(format!("nexthop-control-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let p = dir.join("key");
    let mut text = SECRET.to_vec();
    text.push(b'\n');
    for mode in [0o644, 0o640, 0o604, 0o660, 0o602, 0o610] {
        key_file(&p, &text, mode);
        let e = AuthKey::from_file(&p).expect_err("open key file refused");
        assert!(
            matches!(e, KeyError::Permissions { mode: m, .. } if m == mode),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }
    for mode in [0o600, 0o400] {
        key_file(&p, &text, mode);
        AuthKey::from_file(&p).expect("owner-only key file");
    }
    // Bounded: one byte over the limit is refused before it is read.
    let big = vec![b'a'; MAX_KEY_FILE as usize + 1];
    key_file(&p, &big, 0o600);
    assert!(matches!(
        AuthKey::from_file(&p),
        Err(KeyError::TooLarge { len, .. }) if len == MAX_KEY_FILE + 1
    ));
    key_file(&p, &big[..MAX_KEY_FILE as usize], 0o600);
    AuthKey::from_file(&p).expect("a key file of exactly the limit");
    // A directory is not a key file.
    assert!(matches!(
        AuthKey::from_file(&dir),
        Err(KeyError::NotAFile { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fuzz_seeds_are_valid_frames_of_every_type() {
    let key = AuthKey::new(b"nexthop-fuzz-key-0123456789abcdef").expect("key");
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/control_frame");
    let mut types = Vec::new();
    for e in std::fs::read_dir(&dir).expect("seed dir") {
        let bytes = std::fs::read(e.expect("entry").path()).expect("seed");
        let f = Frame::decode(&bytes, &key, MAX_PAYLOAD).expect("seed decodes");
        Message::decode(f.ty, &f.payload).expect("seed payload parses");
        types.push(f.ty as u8);
    }
    types.sort_unstable();
    assert_eq!(types, [1, 2, 3, 4, 5, 6, 7, 8]);
}

#[test]
fn handshake_fuzz_seeds_complete_a_handshake_on_both_ends() {
    use nexthop_control::handshake::{accept, connect, NONCE_LEN};
    let key = AuthKey::new(b"nexthop-fuzz-key-0123456789abcdef").expect("key");
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/control_handshake");
    let seed = |name: &str| std::fs::read(dir.join(name)).expect("seed");
    let (nf, nc) = ([0x11; NONCE_LEN], [0x22; NONCE_LEN]);
    let stream = seed("forwarder_stream");
    let mut out = Vec::new();
    let a = accept(&mut &stream[..], &mut out, &key, &nc).expect("the forwarder's stream");
    assert_eq!(a.hello.forwarder_id, "fw1");
    assert_eq!(a.hello.features, FEATURE_DELTA_BATCH);
    let reply = seed("controller_reply");
    let mut out = Vec::new();
    let k = connect(&mut &reply[..], &mut out, &key, &nf).expect("the controller's reply");
    assert_eq!(k.session, a.keys.session);
    // The forwarder reads the controller's Keepalive under its derived key.
    let rest = &reply[36 + 2 * NONCE_LEN + 32..];
    let f = Frame::decode(rest, &k.recv, MAX_PAYLOAD).expect("keepalive");
    assert_eq!((f.ty, f.session), (MsgType::Keepalive, k.session));
    // The refusal and the version 1 Hello each fail, with their reasons.
    let e = connect(&mut &seed("refusal")[..], &mut Vec::new(), &key, &nf).expect_err("refused");
    assert!(e.to_string().contains("version 1 is not supported"), "{e}");
    let mut out = Vec::new();
    let e = accept(&mut &seed("version_1_hello")[..], &mut out, &key, &nc).expect_err("old");
    assert!(e.to_string().contains("version 1"), "{e}");
    let f = Frame::decode(&out, &key, MAX_PAYLOAD).expect("an Error back");
    assert_eq!(f.ty, MsgType::Error);
}

#[test]
fn handshake_survives_mutated_streams_on_both_ends() {
    use nexthop_control::handshake::{accept, connect, NONCE_LEN};
    use rand::{Rng, SeedableRng};
    let key = AuthKey::new(b"nexthop-fuzz-key-0123456789abcdef").expect("key");
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/control_handshake");
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(26);
    let (nf, nc) = ([0x11; NONCE_LEN], [0x22; NONCE_LEN]);
    for e in std::fs::read_dir(&dir).expect("seed dir") {
        let seed = std::fs::read(e.expect("entry").path()).expect("seed");
        for _ in 0..3_000 {
            let mut b = seed.clone();
            match rng.gen_range(0..4) {
                0 => b.truncate(rng.gen_range(0..=b.len())),
                1 => {
                    let i = rng.gen_range(0..b.len());
                    b[i] ^= 1 << rng.gen_range(0..8);
                }
                2 => {
                    let i = rng.gen_range(0..=b.len());
                    b.insert(i, rng.gen());
                }
                _ => {
                    // A length field or a byte of the header set at random.
                    let i = rng.gen_range(0..b.len().min(36));
                    b[i] = rng.gen();
                }
            }
            let mut out = Vec::new();
            let accepted = accept(&mut &b[..], &mut out, &key, &nc);
            if !out.is_empty() {
                let f = Frame::decode(&out, &key, MAX_PAYLOAD).expect("one frame back");
                assert!(matches!(f.ty, MsgType::Nonce | MsgType::Error));
            }
            if accepted.is_ok() {
                // Only an intact forwarder stream passes (the MAC).
                assert_eq!(b[36..36 + NONCE_LEN], nf);
            }
            let mut out = Vec::new();
            if connect(&mut &b[..], &mut out, &key, &nf).is_ok() {
                assert_eq!(b[36 + NONCE_LEN..36 + 2 * NONCE_LEN], nc);
            }
        }
    }
}
