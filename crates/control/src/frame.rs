//! Frames: the authenticated envelope of every message.
//!
//! ```text
//! offset size field
//!      0    4 magic "NHCP"
//!      4    1 version (2)
//!      5    1 message type (1 Hello, 2 Snapshot, 3 Delta, 4 Ack, 5 Error, 6 DeltaBatch,
//!                          7 Nonce, 8 Keepalive)
//!      6    2 reserved, 0
//!      8    8 session id (u64 LE, derived with the session keys; 0 in Nonce frames)
//!     16    8 sequence number (u64 LE, 1, 2, 3, ... per direction and connection)
//!     24    8 generation (u64 LE, the Othello generation the message is about)
//!     32    4 payload length (u32 LE, at most the receiver's limit, 256 MiB by default)
//!     36  len payload
//! 36+len   32 HMAC-SHA256(key, bytes 0 .. 36+len)
//! ```
//!
//! `key` is the shared secret only in the two Nonce frames of the
//! handshake; every later frame is keyed by a per-connection,
//! per-direction key derived from the secret and both sides' nonces
//! (see [`crate::handshake`]).
//!
//! [`Frame::decode`] checks, in order: length of the header, magic,
//! version, reserved bits, payload length against the limit, total length
//! (short: [`FrameError::Truncated`], long: [`FrameError::TrailingData`]),
//! the tag (constant-time, [`hmac::Mac::verify_slice`]) and only then the
//! message type. It never panics and never allocates more than the input.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

/// The four magic bytes that start every frame.
pub const MAGIC: [u8; 4] = *b"NHCP";
/// The protocol version this crate speaks (2: the nonce handshake and
/// per-session keys; version 1 peers are refused).
pub const VERSION: u8 = 2;
/// Bytes before the payload.
pub const HEADER_LEN: usize = 36;
/// Bytes of the HMAC-SHA256 tag after the payload.
pub const TAG_LEN: usize = 32;
/// Default (and largest accepted) payload length: 256 MiB.
pub const MAX_PAYLOAD: u32 = 256 << 20;
/// Shortest accepted shared secret.
pub const MIN_KEY_LEN: usize = 16;
/// Largest accepted key file (a secret is a line of hex or base64).
pub const MAX_KEY_FILE: u64 = 4096;

pub(crate) mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const TYPE: usize = 5;
    pub const RESERVED: Range<usize> = 6..8;
    pub const SESSION: Range<usize> = 8..16;
    pub const SEQ: Range<usize> = 16..24;
    pub const GENERATION: Range<usize> = 24..32;
    pub const LEN: Range<usize> = 32..36;
}

type HmacSha256 = Hmac<Sha256>;

/// Message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// Forwarder → controller: who it is and what it has applied.
    Hello = 1,
    /// Controller → forwarder: a whole data-plane structure and action table.
    Snapshot = 2,
    /// Controller → forwarder: the slot writes of one route change.
    Delta = 3,
    /// Forwarder → controller: a message was applied.
    Ack = 4,
    /// Either way: the connection is being closed, and why.
    Error = 5,
    /// Controller → forwarder: the deltas of several route changes, in
    /// order, in one frame (only to forwarders whose Hello offers
    /// [`crate::message::FEATURE_DELTA_BATCH`]).
    DeltaBatch = 6,
    /// Either way, first frame of a connection: the sender's random
    /// nonce (the controller's echoes the forwarder's); keyed by the
    /// shared secret (see [`crate::handshake`]).
    Nonce = 7,
    /// Controller → forwarder: nothing changed for a while, the
    /// connection is alive (empty payload).
    Keepalive = 8,
    /// Admin client → controller: route changes to apply (the lines of a
    /// changes file; see [`crate::admin`]).
    Push = 9,
    /// Admin client → controller: send your counters.
    StatsRequest = 10,
    /// Controller → admin client: the answer to a Push or StatsRequest
    /// (named counters).
    Report = 11,
}

impl MsgType {
    /// The type with wire code `b`.
    pub fn from_u8(b: u8) -> Option<MsgType> {
        Some(match b {
            1 => MsgType::Hello,
            2 => MsgType::Snapshot,
            3 => MsgType::Delta,
            4 => MsgType::Ack,
            5 => MsgType::Error,
            6 => MsgType::DeltaBatch,
            7 => MsgType::Nonce,
            8 => MsgType::Keepalive,
            9 => MsgType::Push,
            10 => MsgType::StatsRequest,
            11 => MsgType::Report,
            _ => return None,
        })
    }
}

/// Why bytes are not a valid frame.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The input ends before the frame does.
    #[error("truncated frame: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The first four bytes are not `NHCP`.
    #[error("bad magic {0:02x?} (expected \"NHCP\")")]
    BadMagic([u8; 4]),
    /// A protocol version this build does not speak.
    #[error("unsupported protocol version {got} (supported: {supported})")]
    Version {
        /// Version in the frame.
        got: u8,
        /// Version supported here.
        supported: u8,
    },
    /// Reserved header bits are set.
    #[error("reserved header field is {0:#06x}, expected 0")]
    Reserved(u16),
    /// The payload length is over the receiver's limit.
    #[error("payload of {len} bytes is over the limit of {max}")]
    Oversize {
        /// Announced payload length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Bytes follow the tag.
    #[error("{0} bytes of trailing data after the frame")]
    TrailingData(usize),
    /// The tag does not authenticate the frame under our key.
    #[error("bad MAC: frame corrupted or sent with another key")]
    BadMac,
    /// An authenticated frame of a type this version does not know.
    #[error("unknown message type {0}")]
    UnknownType(u8),
}

/// An error reading a frame from a stream.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The peer closed the connection or the socket failed.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The bytes received are not a valid frame.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// Why a shared secret was refused.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_LEN`] bytes.
    #[error("key of {len} bytes is too short (at least {MIN_KEY_LEN} bytes)")]
    TooShort {
        /// Length found.
        len: usize,
    },
    /// The key file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The key file.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// The key file is not a regular file.
    #[error("{path}: not a regular file")]
    NotAFile {
        /// The key file.
        path: String,
    },
    /// The key file is accessible to its group or to others.
    #[error(
        "{path}: mode {mode:04o} gives its group or others access to the key; run `chmod 600 {path}`"
    )]
    Permissions {
        /// The key file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file is larger than [`MAX_KEY_FILE`].
    #[error("{path}: {len} bytes, a key file is at most {MAX_KEY_FILE} bytes")]
    TooLarge {
        /// The key file.
        path: String,
        /// Its length.
        len: u64,
    },
}

/// An HMAC-SHA256 key: the shared secret, or a session key derived from
/// it (see [`crate::handshake`]).
#[derive(Clone)]
pub struct AuthKey {
    mac: HmacSha256,
    secret: std::sync::Arc<[u8]>,
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthKey({} bytes, redacted)", self.secret.len())
    }
}

impl AuthKey {
    /// A key from raw bytes (at least [`MIN_KEY_LEN`]).
    pub fn new(secret: &[u8]) -> Result<AuthKey, KeyError> {
        if secret.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort { len: secret.len() });
        }
        // HMAC takes keys of any length; the error arm cannot happen.
        let mac = HmacSha256::new_from_slice(secret)
            .map_err(|_| KeyError::TooShort { len: secret.len() })?;
        Ok(AuthKey {
            mac,
            secret: secret.into(),
        })
    }

    /// The secret bytes (input of the session key derivation).
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// Read a key file: its bytes, less trailing whitespace (so a
    /// newline-terminated hex or base64 line works as is). The file must
    /// be a regular file of at most [`MAX_KEY_FILE`] bytes and, on Unix,
    /// accessible to its owner only (mode `0600` or `0400`): anything
    /// else is refused before the key is read.
    pub fn from_file(path: &Path) -> Result<AuthKey, KeyError> {
        let name = || path.display().to_string();
        let io = |source| KeyError::Io {
            path: name(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(KeyError::NotAFile { path: name() });
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                return Err(KeyError::Permissions { path: name(), mode });
            }
        }
        if meta.len() > MAX_KEY_FILE {
            return Err(KeyError::TooLarge {
                path: name(),
                len: meta.len(),
            });
        }
        // Bounded also if the file grows between the check and the read.
        let mut bytes = Vec::new();
        file.take(MAX_KEY_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > MAX_KEY_FILE {
            return Err(KeyError::TooLarge {
                path: name(),
                len: bytes.len() as u64,
            });
        }
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |p| p + 1);
        AuthKey::new(&bytes[..end])
    }

    fn tag(&self, bytes: &[u8]) -> [u8; TAG_LEN] {
        let mut m = self.mac.clone();
        m.update(bytes);
        m.finalize().into_bytes().into()
    }

    fn verify(&self, bytes: &[u8], tag: &[u8]) -> Result<(), FrameError> {
        let mut m = self.mac.clone();
        m.update(bytes);
        m.verify_slice(tag).map_err(|_| FrameError::BadMac)
    }
}

/// One decoded, authenticated frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Message type.
    pub ty: MsgType,
    /// Session id (the forwarder's choice, echoed by the controller).
    pub session: u64,
    /// Sequence number in this direction of this connection.
    pub seq: u64,
    /// Othello generation the message is about.
    pub generation: u64,
    /// The message body (see [`crate::message`]).
    pub payload: Vec<u8>,
}

/// The fixed fields of a header whose magic, version, reserved bits and
/// length were checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Raw message type byte (checked after the MAC).
    pub ty: u8,
    /// Payload length.
    pub len: u32,
}

fn u64_at(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_le_bytes(a)
}

/// Check the first [`HEADER_LEN`] bytes of a frame.
pub fn parse_header(b: &[u8], max_payload: u32) -> Result<Header, FrameError> {
    if b.len() < HEADER_LEN {
        return Err(FrameError::Truncated {
            needed: HEADER_LEN,
            got: b.len(),
        });
    }
    let mut magic = [0u8; 4];
    magic.copy_from_slice(&b[field::MAGIC]);
    if magic != MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    if b[field::VERSION] != VERSION {
        return Err(FrameError::Version {
            got: b[field::VERSION],
            supported: VERSION,
        });
    }
    let reserved = u16::from_le_bytes([b[field::RESERVED.start], b[field::RESERVED.start + 1]]);
    if reserved != 0 {
        return Err(FrameError::Reserved(reserved));
    }
    let mut l = [0u8; 4];
    l.copy_from_slice(&b[field::LEN]);
    let len = u32::from_le_bytes(l);
    let max = max_payload.min(MAX_PAYLOAD);
    if len > max {
        return Err(FrameError::Oversize {
            len: len as u64,
            max: max as u64,
        });
    }
    Ok(Header {
        ty: b[field::TYPE],
        len,
    })
}

impl Frame {
    /// A frame with an empty payload.
    pub fn new(ty: MsgType, session: u64, seq: u64, generation: u64, payload: Vec<u8>) -> Frame {
        Frame {
            ty,
            session,
            seq,
            generation,
            payload,
        }
    }

    /// Bytes of the encoded frame.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.payload.len() + TAG_LEN
    }

    /// Encode and authenticate. Payloads over [`MAX_PAYLOAD`] are the
    /// caller's bug; [`crate::message`] never builds one for FIBs that fit
    /// in memory, and the receiver would refuse it.
    pub fn encode(&self, key: &AuthKey) -> Vec<u8> {
        encode_parts(
            key,
            self.ty,
            self.session,
            self.seq,
            self.generation,
            &self.payload,
        )
    }

    /// Decode and authenticate exactly one frame (no trailing bytes).
    pub fn decode(bytes: &[u8], key: &AuthKey, max_payload: u32) -> Result<Frame, FrameError> {
        let h = parse_header(bytes, max_payload)?;
        let needed = HEADER_LEN + h.len as usize + TAG_LEN;
        if bytes.len() < needed {
            return Err(FrameError::Truncated {
                needed,
                got: bytes.len(),
            });
        }
        if bytes.len() > needed {
            return Err(FrameError::TrailingData(bytes.len() - needed));
        }
        let (body, tag) = bytes.split_at(needed - TAG_LEN);
        key.verify(body, tag)?;
        let ty = MsgType::from_u8(h.ty).ok_or(FrameError::UnknownType(h.ty))?;
        Ok(Frame {
            ty,
            session: u64_at(body, field::SESSION),
            seq: u64_at(body, field::SEQ),
            generation: u64_at(body, field::GENERATION),
            payload: body[HEADER_LEN..].to_vec(),
        })
    }
}

/// Encode a frame from its parts without building a [`Frame`] (no payload copy).
pub fn encode_parts(
    key: &AuthKey,
    ty: MsgType,
    session: u64,
    seq: u64,
    generation: u64,
    payload: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + TAG_LEN);
    encode_with(&mut out, key, ty, session, seq, generation, |o| {
        o.extend_from_slice(payload)
    });
    out
}

/// Append one frame to `out`, its payload written in place by `payload`
/// (which must only append, and at most [`MAX_PAYLOAD`] bytes; a batch of
/// deltas is built this way without an intermediate copy).
pub fn encode_with(
    out: &mut Vec<u8>,
    key: &AuthKey,
    ty: MsgType,
    session: u64,
    seq: u64,
    generation: u64,
    payload: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(ty as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&session.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    payload(out);
    let len = (out.len() - start - HEADER_LEN) as u32;
    let at = start + field::LEN.start;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    let tag = key.tag(&out[start..]);
    out.extend_from_slice(&tag);
}

/// A stream whose reads fail with [`io::ErrorKind::TimedOut`] once a
/// deadline has passed: the deadline holds for all reads together (a peer
/// sending one byte at a time cannot stretch it), unlike a socket's
/// per-read timeout.
#[derive(Debug)]
pub struct DeadlineReader<'a> {
    stream: &'a std::net::TcpStream,
    deadline: std::time::Instant,
}

impl<'a> DeadlineReader<'a> {
    /// Reads from `stream` until `deadline`.
    pub fn new(stream: &'a std::net::TcpStream, deadline: std::time::Instant) -> Self {
        DeadlineReader { stream, deadline }
    }
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
        }
        self.stream.set_read_timeout(Some(left))?;
        match (&mut &*self.stream).read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
            }
            r => r,
        }
    }
}

/// Read one frame from a stream. The payload buffer grows as bytes arrive,
/// so a peer announcing a large length costs memory only once it sends it.
pub fn read_frame<R: Read>(r: &mut R, key: &AuthKey, max_payload: u32) -> Result<Frame, ReadError> {
    let mut buf = vec![0u8; HEADER_LEN];
    r.read_exact(&mut buf)?;
    let h = parse_header(&buf, max_payload)?;
    let rest = h.len as u64 + TAG_LEN as u64;
    let got = r.take(rest).read_to_end(&mut buf)?;
    if (got as u64) < rest {
        return Err(ReadError::Io(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection closed inside a frame ({got} of {rest} bytes)"),
        )));
    }
    Ok(Frame::decode(&buf, key, max_payload)?)
}

/// Write one frame whose payload is the concatenation of `parts`, without
/// copying them into one buffer (a snapshot part of hundreds of MiB is
/// written from the snapshot's own bytes). A payload over [`MAX_PAYLOAD`]
/// is refused with [`io::ErrorKind::InvalidInput`] before anything is
/// written.
pub fn write_frame_parts<W: Write>(
    w: &mut W,
    key: &AuthKey,
    head: (MsgType, u64, u64, u64),
    parts: &[&[u8]],
) -> io::Result<()> {
    let (ty, session, seq, generation) = head;
    let len = parts.iter().map(|p| p.len()).sum::<usize>();
    let len = u32::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_PAYLOAD)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("payload of {len} bytes is over the frame limit of {MAX_PAYLOAD}"),
            )
        })?;
    let mut hdr = Vec::with_capacity(HEADER_LEN);
    hdr.extend_from_slice(&MAGIC);
    hdr.push(VERSION);
    hdr.push(ty as u8);
    hdr.extend_from_slice(&[0, 0]);
    hdr.extend_from_slice(&session.to_le_bytes());
    hdr.extend_from_slice(&seq.to_le_bytes());
    hdr.extend_from_slice(&generation.to_le_bytes());
    hdr.extend_from_slice(&len.to_le_bytes());
    let mut m = key.mac.clone();
    m.update(&hdr);
    for p in parts {
        m.update(p);
    }
    let tag: [u8; TAG_LEN] = m.finalize().into_bytes().into();
    w.write_all(&hdr)?;
    for p in parts {
        w.write_all(p)?;
    }
    w.write_all(&tag)?;
    w.flush()
}

/// Write an encoded frame.
pub fn write_all<W: Write>(w: &mut W, bytes: &[u8]) -> io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> AuthKey {
        AuthKey::new(b"0123456789abcdef").expect("key")
    }

    #[test]
    fn frame_round_trips() {
        let f = Frame::new(MsgType::Ack, 7, 9, 11, vec![1, 2, 3]);
        let b = f.encode(&key());
        assert_eq!(b.len(), f.encoded_len());
        assert_eq!(Frame::decode(&b, &key(), MAX_PAYLOAD), Ok(f));
    }

    #[test]
    fn frames_written_from_parts_equal_encoded_frames() {
        let mut out = Vec::new();
        write_frame_parts(
            &mut out,
            &key(),
            (MsgType::Snapshot, 5, 6, 7),
            &[b"ab", b"", b"cde"],
        )
        .expect("write");
        let f = Frame::new(MsgType::Snapshot, 5, 6, 7, b"abcde".to_vec());
        assert_eq!(out, f.encode(&key()));
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(matches!(
            AuthKey::new(b"short"),
            Err(KeyError::TooShort { len: 5 })
        ));
        assert!(format!("{:?}", key()).contains("redacted"));
    }

    #[test]
    fn every_truncation_and_bit_flip_is_rejected() {
        let b = Frame::new(MsgType::Hello, 1, 1, 0, b"payload".to_vec()).encode(&key());
        for n in 0..b.len() {
            assert!(Frame::decode(&b[..n], &key(), MAX_PAYLOAD).is_err(), "{n}");
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                assert!(Frame::decode(&c, &key(), MAX_PAYLOAD).is_err(), "{i}:{bit}");
            }
        }
    }
}
