//! The handshake: fresh keys for every connection.
//!
//! ```text
//! forwarder                                       controller
//!   |-- Nonce(session 0, seq 0, Nf) ------------------>|  keyed by the shared secret K
//!   |<- Nonce(session 0, seq 0, Nf || Nc) -------------|  keyed by K, echoes Nf
//!   |   both: okm = HKDF-SHA256(salt = Nf || Nc, ikm = K,
//!   |               info = "nexthop-control v2 session keys"), 72 bytes
//!   |         forwarder→controller key = okm[0..32]
//!   |         controller→forwarder key = okm[32..64]
//!   |         session id               = okm[64..72] (LE)
//!   |-- Hello(session, seq 1) ------------------------>|  keyed by the f→c key
//!   |<- Snapshot(session, seq 1) ----------------------|  keyed by the c→f key
//! ```
//!
//! `Nf` and `Nc` are 32 random bytes each from the operating system's
//! generator ([`fresh_nonce`]). Every frame after the two Nonce frames is
//! authenticated under a key that depends on both nonces, so bytes
//! recorded on one connection fail the MAC on any other (the other side's
//! nonce differs), and frames of one direction fail in the other. A
//! replayed first Nonce frame only gets a fresh controller nonce back; a
//! replayed controller Nonce frame fails the echo check. The handshake
//! adds one round trip before the Hello.
//!
//! The functions here are sans-timeout: they read and write whatever
//! streams they are given, so the caller bounds them (the controller reads
//! through a [`crate::frame::DeadlineReader`], so the whole handshake has
//! one deadline) and the fuzz target drives them from bytes.

use std::io::{self, Read, Write};

use hkdf::Hkdf;
use rand::RngCore;
use sha2::Sha256;
use thiserror::Error;

use crate::frame::{encode_parts, read_frame, write_all, AuthKey, FrameError, MsgType, ReadError};
use crate::message::{ErrorCode, Hello, Message};

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;

/// HKDF `info` of the version 2 session keys.
const INFO: &[u8] = b"nexthop-control v2 session keys";

/// Largest payload read during the handshake (a Hello is at most 282
/// bytes, a Nonce 64).
pub const MAX_HANDSHAKE_PAYLOAD: u32 = 1024;

/// A random nonce.
pub type Nonce = [u8; NONCE_LEN];

/// 32 bytes from the operating system's random generator.
pub fn fresh_nonce() -> Nonce {
    let mut n = [0u8; NONCE_LEN];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

/// Which end of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The forwarder (sends the first Nonce and the Hello).
    Forwarder,
    /// The controller.
    Controller,
}

/// The keys of one connection.
#[derive(Clone, Debug)]
pub struct SessionKeys {
    /// Session id carried by every frame after the handshake.
    pub session: u64,
    /// Key of the frames this side sends.
    pub send: AuthKey,
    /// Key of the frames this side receives.
    pub recv: AuthKey,
}

/// Derive a connection's keys from the shared secret and both nonces.
pub fn derive(secret: &AuthKey, forwarder: &Nonce, controller: &Nonce, role: Role) -> SessionKeys {
    let mut salt = [0u8; 2 * NONCE_LEN];
    salt[..NONCE_LEN].copy_from_slice(forwarder);
    salt[NONCE_LEN..].copy_from_slice(controller);
    let hk = Hkdf::<Sha256>::new(Some(&salt), secret.secret());
    let mut okm = [0u8; 72];
    // 72 bytes is far below HKDF-SHA256's 8160-byte limit.
    hk.expand(INFO, &mut okm)
        .expect("72 bytes is a valid HKDF-SHA256 output length");
    let key = |r: std::ops::Range<usize>| {
        AuthKey::new(&okm[r]).expect("a 32-byte derived key is long enough")
    };
    let (f2c, c2f) = (key(0..32), key(32..64));
    let mut id = [0u8; 8];
    id.copy_from_slice(&okm[64..72]);
    let (send, recv) = match role {
        Role::Forwarder => (f2c, c2f),
        Role::Controller => (c2f, f2c),
    };
    SessionKeys {
        session: u64::from_le_bytes(id),
        send,
        recv,
    }
}

/// Why a handshake failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The stream failed, closed or passed its deadline.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The peer speaks another protocol version.
    #[error(
        "the peer speaks control protocol version {got}; this build speaks version {supported} only \
         (upgrade the older side)"
    )]
    Version {
        /// The peer's version.
        got: u8,
        /// Ours.
        supported: u8,
    },
    /// A frame that does not decode or authenticate.
    #[error(transparent)]
    Frame(FrameError),
    /// An authenticated frame that is not the next step of the handshake.
    #[error("handshake: {0}")]
    Protocol(String),
    /// The controller refused the connection with an Error message.
    #[error("controller error {code:?}: {text}")]
    Refused {
        /// Its code.
        code: ErrorCode,
        /// Its text.
        text: String,
    },
}

impl From<ReadError> for HandshakeError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io(e) => HandshakeError::Io(e),
            ReadError::Frame(FrameError::Version { got, supported }) => {
                HandshakeError::Version { got, supported }
            }
            ReadError::Frame(e) => HandshakeError::Frame(e),
        }
    }
}

fn nonce_frame(secret: &AuthKey, payload: &[u8]) -> Vec<u8> {
    encode_parts(secret, MsgType::Nonce, 0, 0, 0, payload)
}

/// Read the peer's Nonce frame (session 0, sequence 0) and return its payload.
fn read_nonce<R: Read>(
    r: &mut R,
    secret: &AuthKey,
    want_len: usize,
) -> Result<Vec<u8>, HandshakeError> {
    let f = read_frame(r, secret, MAX_HANDSHAKE_PAYLOAD)?;
    if f.ty == MsgType::Error {
        return match Message::decode(f.ty, &f.payload) {
            Ok(Message::Error { code, text }) => Err(HandshakeError::Refused { code, text }),
            _ => Err(HandshakeError::Protocol("malformed Error".into())),
        };
    }
    if f.ty != MsgType::Nonce || f.session != 0 || f.seq != 0 {
        return Err(HandshakeError::Protocol(format!(
            "expected Nonce (session 0, sequence 0), got {:?} (session {:#x}, sequence {})",
            f.ty, f.session, f.seq
        )));
    }
    if f.payload.len() != want_len {
        return Err(HandshakeError::Protocol(format!(
            "Nonce of {} bytes, expected {want_len}",
            f.payload.len()
        )));
    }
    Ok(f.payload)
}

/// The forwarder's half: send `nonce`, read the controller's, derive the
/// keys. The caller then sends its Hello (sequence 1) under `send`.
pub fn connect<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    secret: &AuthKey,
    nonce: &Nonce,
) -> Result<SessionKeys, HandshakeError> {
    write_all(w, &nonce_frame(secret, nonce))?;
    let p = read_nonce(r, secret, 2 * NONCE_LEN)?;
    if p[..NONCE_LEN] != nonce[..] {
        return Err(HandshakeError::Protocol(
            "the controller's Nonce does not echo ours (a replayed frame?)".into(),
        ));
    }
    let mut theirs = [0u8; NONCE_LEN];
    theirs.copy_from_slice(&p[NONCE_LEN..]);
    Ok(derive(secret, nonce, &theirs, Role::Forwarder))
}

/// A forwarder that passed the handshake.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// The connection's keys.
    pub keys: SessionKeys,
    /// Its Hello (sequence 1).
    pub hello: Hello,
}

/// The controller's half: read the forwarder's Nonce, answer with
/// `nonce`, derive the keys, read and check the Hello (sequence 1, this
/// session, under the derived key). A peer of another protocol version is
/// sent an Error (in this version's framing, which an older peer reports
/// as an unsupported version) before the error is returned.
pub fn accept<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    secret: &AuthKey,
    nonce: &Nonce,
) -> Result<Accepted, HandshakeError> {
    let theirs = match read_nonce(r, secret, NONCE_LEN) {
        Ok(p) => p,
        Err(HandshakeError::Version { got, supported }) => {
            let m = Message::Error {
                code: ErrorCode::Protocol,
                text: format!(
                    "protocol version {got} is not supported; this controller speaks version {supported}"
                ),
            };
            let b = encode_parts(secret, MsgType::Error, 0, 0, 0, &m.encode());
            let _ = write_all(w, &b);
            return Err(HandshakeError::Version { got, supported });
        }
        Err(e) => return Err(e),
    };
    let mut nf = [0u8; NONCE_LEN];
    nf.copy_from_slice(&theirs);
    let mut reply = [0u8; 2 * NONCE_LEN];
    reply[..NONCE_LEN].copy_from_slice(&nf);
    reply[NONCE_LEN..].copy_from_slice(nonce);
    write_all(w, &nonce_frame(secret, &reply))?;
    let keys = derive(secret, &nf, nonce, Role::Controller);
    let f = read_frame(r, &keys.recv, MAX_HANDSHAKE_PAYLOAD)?;
    if f.ty != MsgType::Hello || f.seq != 1 || f.session != keys.session {
        return Err(HandshakeError::Protocol(format!(
            "first frame must be this session's Hello with sequence 1, got {:?} {} (session {:#x})",
            f.ty, f.seq, f.session
        )));
    }
    match Message::decode(f.ty, &f.payload) {
        Ok(Message::Hello(hello)) => Ok(Accepted { keys, hello }),
        Ok(_) => Err(HandshakeError::Protocol("not a Hello".into())),
        Err(e) => Err(HandshakeError::Protocol(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> AuthKey {
        AuthKey::new(b"handshake-unit-test-secret").expect("key")
    }

    #[test]
    fn both_sides_derive_mirrored_keys_and_nonces_change_them() {
        let (nf, nc) = ([1u8; NONCE_LEN], [2u8; NONCE_LEN]);
        let f = derive(&secret(), &nf, &nc, Role::Forwarder);
        let c = derive(&secret(), &nf, &nc, Role::Controller);
        assert_eq!(f.session, c.session);
        assert_eq!(f.send.secret(), c.recv.secret());
        assert_eq!(f.recv.secret(), c.send.secret());
        assert_ne!(f.send.secret(), f.recv.secret());
        let other = derive(&secret(), &nf, &[3u8; NONCE_LEN], Role::Forwarder);
        assert_ne!(other.send.secret(), f.send.secret());
        assert_ne!(other.session, f.session);
        assert_ne!(fresh_nonce(), fresh_nonce());
    }

    #[test]
    fn a_recorded_controller_nonce_fails_the_echo_check() {
        let nf_old = [4u8; NONCE_LEN];
        let mut reply = [0u8; 2 * NONCE_LEN];
        reply[..NONCE_LEN].copy_from_slice(&nf_old);
        reply[NONCE_LEN..].copy_from_slice(&[5u8; NONCE_LEN]);
        let recorded = nonce_frame(&secret(), &reply);
        let mut out = Vec::new();
        let e = connect(&mut &recorded[..], &mut out, &secret(), &[6u8; NONCE_LEN])
            .expect_err("refused");
        assert!(e.to_string().contains("echo"), "{e}");
    }
}
