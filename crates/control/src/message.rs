//! Typed message bodies (the payload of a [`Frame`](crate::frame::Frame)).
//!
//! ```text
//! Hello      = id_len:u8 id:utf8[id_len] column:u32 last_seq:u64 last_generation:u64
//!              [features:u32]                                           ; optional, absent = 0
//! Snapshot   = total:u64 offset:u64 part:[rest]                          ; bytes offset.. of the snapshot body
//! body       = snap_len:u64 snapshot:[snap_len] actions:utf8(rest)     ; Othello::snapshot + ActionTable::to_text
//! Delta      = delta_len:u32 delta:[delta_len] new_actions:utf8(rest)  ; Delta::encode + "ID ACTION" lines
//! Ack        = seq:u64                                                  ; highest sequence number applied
//! Error      = code:u16 text:utf8(rest, at most 1024 bytes)
//! DeltaBatch = count:u32 (entry_len:u32 entry:[entry_len]){count}      ; count >= 1, each entry a Delta payload
//! Nonce      = nonce:[32] | forwarder_nonce:[32] controller_nonce:[32] ; see crate::handshake
//! Keepalive  = (empty)
//! Push       = changes:utf8(rest)                                       ; the lines of a changes file
//! StatsRequest = (empty)
//! Report     = count:u16 (name_len:u8 name:utf8[name_len] value:u64){count} ; count <= 256
//! ```
//!
//! A snapshot body larger than one frame travels in consecutive Snapshot
//! frames, each a part: the first at offset 0, each next one at the end
//! of the previous, the last ending at `total`. A frame whose part is the
//! whole body (offset 0, `total` bytes) decodes to [`Message::Snapshot`],
//! any other to [`Message::SnapshotPart`]; the follower reassembles parts
//! ([`parse_snapshot_body`] then checks the body).
//!
//! All integers are little-endian. Parsing checks every length against the
//! bytes present and rejects trailing data (also inside each DeltaBatch
//! entry); the snapshot bytes are checked by
//! [`Query::from_snapshot`](nexthop_othello::Query::from_snapshot) when
//! installed, the delta bytes here by [`Delta::decode`].
//!
//! Versioning: a Hello without `features` is the original layout (sent
//! as is when no feature bit is set); with them, bit 0
//! ([`FEATURE_DELTA_BATCH`]) asks for DeltaBatch frames, unknown bits are
//! ignored. A controller sends DeltaBatch only to a forwarder that set
//! the bit, Delta frames otherwise. Bit 1 ([`ROLE_ADMIN`]) is a role, not
//! a feature: the peer is an admin client (it sends Push and StatsRequest
//! and is answered with Report or Error; it is never sent the FIB; see
//! [`crate::admin`]). The deltas of a batch apply in order;
//! one that does not apply stops the batch there (those before it stay
//! applied: each is a whole route change, a state the controller's FIB
//! passed through) and the forwarder resyncs as for a Delta that does not
//! apply. A batch that does not parse is rejected whole before any apply.

use nexthop_othello::{AllocError, Delta, FormatError};
use nexthop_wire::cursor::{CursorError, Reader};
use thiserror::Error;

use crate::frame::MsgType;

/// Hello feature bit: the forwarder accepts [`Message::DeltaBatch`].
pub const FEATURE_DELTA_BATCH: u32 = 1;

/// Hello role bit: the peer is an admin client, not a forwarder (see
/// [`crate::admin`]). A controller that predates it serves such a peer as
/// a forwarder; the client reports that as an unsupported controller.
pub const ROLE_ADMIN: u32 = 1 << 1;

/// Most counters in a [`Message::Report`].
pub const MAX_REPORT_VALUES: usize = 256;

/// Longest Error text.
pub const MAX_ERROR_TEXT: usize = 1024;

/// Why a payload is not a valid message of its type.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageError {
    /// The payload ends early.
    #[error("truncated {msg} payload: needed {needed} bytes, got {got}")]
    Truncated {
        /// Message type.
        msg: &'static str,
        /// Bytes the field needs, counted from the start of the payload
        /// (of the entry, inside a DeltaBatch; saturating).
        needed: usize,
        /// Bytes in the payload (the entry).
        got: usize,
    },
    /// Bytes after the message's last field.
    #[error("{0} bytes of trailing data in the payload")]
    TrailingData(usize),
    /// A field is invalid.
    #[error("malformed payload: {0}")]
    Malformed(&'static str),
    /// The embedded delta does not decode.
    #[error("delta: {0}")]
    Delta(FormatError),
}

/// Error codes of an [`Message::Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The peer sent something this side could not accept.
    Protocol,
    /// The forwarder asked for a column the controller does not serve.
    UnknownColumn,
    /// The sender is shutting down.
    Shutdown,
    /// An admin request was refused (a change that does not parse or
    /// apply, with its line and reason); nothing of it was applied and the
    /// connection stays open.
    Refused,
    /// The controller cannot serve the request now (a snapshot whose
    /// buffers it cannot allocate); the forwarder keeps its table and
    /// reconnects later.
    Unavailable,
    /// A code this version does not know.
    Other(u16),
}

impl ErrorCode {
    fn to_u16(self) -> u16 {
        match self {
            ErrorCode::Protocol => 1,
            ErrorCode::UnknownColumn => 2,
            ErrorCode::Shutdown => 3,
            ErrorCode::Refused => 4,
            ErrorCode::Unavailable => 5,
            ErrorCode::Other(c) => c,
        }
    }
    fn from_u16(c: u16) -> ErrorCode {
        match c {
            1 => ErrorCode::Protocol,
            2 => ErrorCode::UnknownColumn,
            3 => ErrorCode::Shutdown,
            4 => ErrorCode::Refused,
            5 => ErrorCode::Unavailable,
            c => ErrorCode::Other(c),
        }
    }
}

/// A forwarder's introduction (and its resync request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The forwarder's name (at most 255 bytes of UTF-8).
    pub forwarder_id: String,
    /// The value column (switch) it wants; a Concise FIB has column 0 only.
    pub column: u32,
    /// The controller sequence number of the last message it applied (0: none).
    pub last_seq: u64,
    /// The Othello generation of its table (0 when it has none).
    pub last_generation: u64,
    /// Protocol features it accepts (`FEATURE_*` bits; 0: the original
    /// protocol, encoded without the field).
    pub features: u32,
}

/// One route change's delta inside a [`Message::DeltaBatch`]: the same
/// fields, and the same bytes, as a [`Message::Delta`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchDelta {
    /// The slot writes (or, after a rebuild, a whole snapshot).
    pub delta: Delta,
    /// Action-table entries the change added, `ID ACTION` per line.
    pub new_actions: String,
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// See [`Hello`].
    Hello(Hello),
    /// A whole data-plane structure and its action table (a Snapshot
    /// frame that carries the whole body).
    Snapshot {
        /// [`Othello::snapshot`](nexthop_othello::Othello::snapshot) bytes.
        snapshot: Vec<u8>,
        /// [`ActionTable::to_text`](nexthop_othello::fib::ActionTable::to_text).
        actions: String,
    },
    /// One part of a snapshot body too large for one frame.
    SnapshotPart {
        /// Bytes of the whole body.
        total: u64,
        /// Where this part starts in it.
        offset: u64,
        /// The part (at least one byte).
        data: Vec<u8>,
    },
    /// A handshake nonce (32 bytes from the forwarder, 64 from the
    /// controller: the forwarder's, then its own).
    Nonce(Vec<u8>),
    /// The connection is alive.
    Keepalive,
    /// One route change.
    Delta {
        /// The slot writes (or, after a rebuild, a whole snapshot).
        delta: Delta,
        /// Action-table entries the change added, `ID ACTION` per line.
        new_actions: String,
    },
    /// The deltas of consecutive route changes, applied in order.
    DeltaBatch {
        /// At least one.
        deltas: Vec<BatchDelta>,
    },
    /// The highest controller sequence number applied.
    Ack {
        /// That sequence number.
        seq: u64,
    },
    /// Route changes from an admin client, the text of a changes file.
    Push {
        /// `+ NAME ACTION`, `- NAME`, `= NAME ACTION` lines.
        changes: String,
    },
    /// An admin client asks for the controller's counters.
    StatsRequest,
    /// The controller's answer to an admin request: named counters (at
    /// most [`MAX_REPORT_VALUES`], names of at most 255 bytes).
    Report {
        /// Name and value, in the controller's order.
        values: Vec<(String, u64)>,
    },
    /// The sender closes the connection (on an admin connection, code
    /// [`ErrorCode::Refused`] answers a refused request and the connection
    /// stays open).
    Error {
        /// Why, as a code.
        code: ErrorCode,
        /// Why, in words.
        text: String,
    },
}

/// A [`Reader`] whose errors name the message being parsed.
struct Cursor<'a> {
    r: Reader<'a>,
    msg: &'static str,
}

impl<'a> Cursor<'a> {
    fn new(b: &'a [u8], msg: &'static str) -> Self {
        Cursor {
            r: Reader::new(b),
            msg,
        }
    }
    fn err(&self, e: CursorError) -> MessageError {
        match e {
            CursorError::Truncated { needed, got } => MessageError::Truncated {
                msg: self.msg,
                needed,
                got,
            },
            CursorError::TrailingData(n) => MessageError::TrailingData(n),
            CursorError::Malformed(m) => MessageError::Malformed(m),
            _ => MessageError::Malformed("unreadable field"),
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], MessageError> {
        self.r.take(n).map_err(|e| self.err(e))
    }
    fn u8(&mut self) -> Result<u8, MessageError> {
        self.r.u8().map_err(|e| self.err(e))
    }
    fn u16(&mut self) -> Result<u16, MessageError> {
        self.r.u16().map_err(|e| self.err(e))
    }
    fn u32(&mut self) -> Result<u32, MessageError> {
        self.r.u32().map_err(|e| self.err(e))
    }
    fn u64(&mut self) -> Result<u64, MessageError> {
        self.r.u64().map_err(|e| self.err(e))
    }
    fn rest(&mut self) -> &'a [u8] {
        self.r.rest()
    }
    fn is_empty(&self) -> bool {
        self.r.is_empty()
    }
    fn remaining(&self) -> usize {
        self.r.remaining()
    }
    /// `n` items of at least `each` bytes can be present: `n` as a usize.
    fn count(&self, n: u64, each: usize) -> Result<usize, MessageError> {
        self.r.count(n, each).map_err(|e| self.err(e))
    }
    fn rest_utf8(&mut self) -> Result<String, MessageError> {
        std::str::from_utf8(self.r.rest())
            .map(str::to_string)
            .map_err(|_| MessageError::Malformed("text is not UTF-8"))
    }
    fn finish(self) -> Result<(), MessageError> {
        let msg = self.msg;
        self.r.finish().map_err(|e| {
            Cursor {
                r: Reader::new(&[]),
                msg,
            }
            .err(e)
        })
    }
}

impl Message {
    /// The frame type that carries this message.
    pub fn ty(&self) -> MsgType {
        match self {
            Message::Hello(_) => MsgType::Hello,
            Message::Snapshot { .. } | Message::SnapshotPart { .. } => MsgType::Snapshot,
            Message::Nonce(_) => MsgType::Nonce,
            Message::Keepalive => MsgType::Keepalive,
            Message::Delta { .. } => MsgType::Delta,
            Message::DeltaBatch { .. } => MsgType::DeltaBatch,
            Message::Ack { .. } => MsgType::Ack,
            Message::Push { .. } => MsgType::Push,
            Message::StatsRequest => MsgType::StatsRequest,
            Message::Report { .. } => MsgType::Report,
            Message::Error { .. } => MsgType::Error,
        }
    }

    /// Encode the payload. Over-long ids and error texts are cut (at a
    /// character boundary) to their limits.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Message::Hello(h) => {
                let id = truncate_utf8(&h.forwarder_id, 255);
                out.push(id.len() as u8);
                out.extend_from_slice(id.as_bytes());
                out.extend_from_slice(&h.column.to_le_bytes());
                out.extend_from_slice(&h.last_seq.to_le_bytes());
                out.extend_from_slice(&h.last_generation.to_le_bytes());
                if h.features != 0 {
                    out.extend_from_slice(&h.features.to_le_bytes());
                }
            }
            Message::Snapshot { snapshot, actions } => {
                let body = snapshot_body(snapshot, actions);
                out = snapshot_part(body.len() as u64, 0, &body);
            }
            Message::SnapshotPart {
                total,
                offset,
                data,
            } => out = snapshot_part(*total, *offset, data),
            Message::Nonce(n) => out.extend_from_slice(n),
            Message::Keepalive => {}
            Message::Delta { delta, new_actions } => {
                out = delta_payload(&delta.encode(), new_actions);
            }
            Message::DeltaBatch { deltas } => {
                let entries: Vec<Vec<u8>> = deltas
                    .iter()
                    .map(|d| delta_payload(&d.delta.encode(), &d.new_actions))
                    .collect();
                write_delta_batch(&mut out, entries.iter().map(Vec::as_slice));
            }
            Message::Ack { seq } => out.extend_from_slice(&seq.to_le_bytes()),
            Message::Push { changes } => out.extend_from_slice(changes.as_bytes()),
            Message::StatsRequest => {}
            Message::Report { values } => {
                let values = &values[..values.len().min(MAX_REPORT_VALUES)];
                out.extend_from_slice(&(values.len() as u16).to_le_bytes());
                for (name, v) in values {
                    let name = truncate_utf8(name, 255);
                    out.push(name.len() as u8);
                    out.extend_from_slice(name.as_bytes());
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Message::Error { code, text } => {
                out.extend_from_slice(&code.to_u16().to_le_bytes());
                out.extend_from_slice(truncate_utf8(text, MAX_ERROR_TEXT).as_bytes());
            }
        }
        out
    }

    /// Parse the payload of an authenticated frame of type `ty`.
    pub fn decode(ty: MsgType, payload: &[u8]) -> Result<Message, MessageError> {
        let msg = match ty {
            MsgType::Hello => "Hello",
            MsgType::Snapshot => "Snapshot",
            MsgType::Delta => "Delta",
            MsgType::Ack => "Ack",
            MsgType::Error => "Error",
            MsgType::DeltaBatch => "DeltaBatch",
            MsgType::Nonce => "Nonce",
            MsgType::Keepalive => "Keepalive",
            MsgType::Push => "Push",
            MsgType::StatsRequest => "StatsRequest",
            MsgType::Report => "Report",
        };
        let mut c = Cursor::new(payload, msg);
        let m = match ty {
            MsgType::Hello => {
                let n = c.u8()? as usize;
                let id = std::str::from_utf8(c.take(n)?)
                    .map_err(|_| MessageError::Malformed("forwarder id is not UTF-8"))?
                    .to_string();
                let (column, last_seq, last_generation) = (c.u32()?, c.u64()?, c.u64()?);
                // The optional trailing field: absent, or all four bytes.
                let features = if c.is_empty() { 0 } else { c.u32()? };
                Message::Hello(Hello {
                    forwarder_id: id,
                    column,
                    last_seq,
                    last_generation,
                    features,
                })
            }
            MsgType::Snapshot => {
                let (total, offset) = (c.u64()?, c.u64()?);
                let data = c.rest();
                if data.is_empty() {
                    return Err(MessageError::Malformed("empty snapshot part"));
                }
                let end = offset
                    .checked_add(data.len() as u64)
                    .filter(|&e| e <= total)
                    .ok_or(MessageError::Malformed("snapshot part ends past its total"))?;
                if offset == 0 && end == total {
                    let (snapshot, actions) = parse_snapshot_body(data)?;
                    Message::Snapshot {
                        snapshot: snapshot.to_vec(),
                        actions: actions.to_string(),
                    }
                } else {
                    Message::SnapshotPart {
                        total,
                        offset,
                        data: data.to_vec(),
                    }
                }
            }
            MsgType::Nonce => {
                let n = c.rest();
                if n.len() != 32 && n.len() != 64 {
                    return Err(MessageError::Malformed("a nonce is 32 or 64 bytes"));
                }
                Message::Nonce(n.to_vec())
            }
            MsgType::Keepalive => Message::Keepalive,
            MsgType::Delta => {
                let d = delta_entry(&mut c)?;
                Message::Delta {
                    delta: d.delta,
                    new_actions: d.new_actions,
                }
            }
            MsgType::DeltaBatch => {
                let count = c.u32()?;
                if count == 0 {
                    return Err(MessageError::Malformed("empty delta batch"));
                }
                // Each entry takes at least 8 bytes (two lengths): bounds
                // the allocation by the bytes present.
                let count = c.count(u64::from(count), 8)?;
                let mut deltas = Vec::with_capacity(count);
                for _ in 0..count {
                    let n = c.u32()? as usize;
                    let mut e = Cursor::new(c.take(n)?, msg);
                    deltas.push(delta_entry(&mut e)?);
                }
                Message::DeltaBatch { deltas }
            }
            MsgType::Ack => Message::Ack { seq: c.u64()? },
            MsgType::Push => Message::Push {
                changes: c.rest_utf8()?,
            },
            MsgType::StatsRequest => Message::StatsRequest,
            MsgType::Report => {
                let n = usize::from(c.u16()?);
                if n > MAX_REPORT_VALUES {
                    return Err(MessageError::Malformed("report of more than 256 values"));
                }
                // Each value takes at least 9 bytes: bounds the allocation.
                let n = c.count(n as u64, 9)?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    let len = usize::from(c.u8()?);
                    let name = std::str::from_utf8(c.take(len)?)
                        .map_err(|_| MessageError::Malformed("report name is not UTF-8"))?
                        .to_string();
                    values.push((name, c.u64()?));
                }
                Message::Report { values }
            }
            MsgType::Error => {
                let code = ErrorCode::from_u16(c.u16()?);
                if c.remaining() > MAX_ERROR_TEXT {
                    return Err(MessageError::Malformed("error text over 1024 bytes"));
                }
                Message::Error {
                    code,
                    text: c.rest_utf8()?,
                }
            }
        };
        c.finish()?;
        Ok(m)
    }
}

/// A snapshot body: the structure's bytes and the action table.
///
/// # Panics
/// If the buffer cannot be allocated ([`try_snapshot_body`] says so
/// instead).
pub fn snapshot_body(snapshot: &[u8], actions: &str) -> Vec<u8> {
    try_snapshot_body(snapshot, actions).unwrap_or_else(|e| panic!("{e}"))
}

/// [`snapshot_body`], or [`AllocError`] where its buffer cannot be
/// allocated (a controller refuses that follower rather than aborting).
pub fn try_snapshot_body(snapshot: &[u8], actions: &str) -> Result<Vec<u8>, AllocError> {
    let bytes = 8 + snapshot.len() + actions.len();
    let mut out = Vec::new();
    out.try_reserve_exact(bytes).map_err(|_| AllocError {
        what: "snapshot body",
        bytes,
    })?;
    out.extend_from_slice(&(snapshot.len() as u64).to_le_bytes());
    out.extend_from_slice(snapshot);
    out.extend_from_slice(actions.as_bytes());
    Ok(out)
}

/// Bytes a Snapshot payload adds before its part.
pub const SNAPSHOT_PART_HEADER: usize = 16;

/// The payload of a Snapshot frame carrying `data` at `offset` of a body
/// of `total` bytes.
pub fn snapshot_part(total: u64, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SNAPSHOT_PART_HEADER + data.len());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// Split a snapshot body into the structure's bytes and the action table
/// text (checked to be UTF-8; the structure is checked when installed).
pub fn parse_snapshot_body(body: &[u8]) -> Result<(&[u8], &str), MessageError> {
    let mut c = Cursor::new(body, "Snapshot");
    let n = c.u64()?;
    let n =
        usize::try_from(n).map_err(|_| MessageError::Malformed("snapshot length over usize"))?;
    let snapshot = c.take(n)?;
    let actions = std::str::from_utf8(c.rest())
        .map_err(|_| MessageError::Malformed("action table is not UTF-8"))?;
    Ok((snapshot, actions))
}

/// Parse a Delta payload (all of `c`).
fn delta_entry(c: &mut Cursor<'_>) -> Result<BatchDelta, MessageError> {
    let n = c.u32()? as usize;
    let delta = Delta::decode(c.take(n)?).map_err(MessageError::Delta)?;
    Ok(BatchDelta {
        delta,
        new_actions: c.rest_utf8()?,
    })
}

/// Append a DeltaBatch payload to `out` from Delta payloads (at least one;
/// see [`delta_payload`]). Entries over 4 GiB are the caller's bug (a
/// frame carries at most [`MAX_PAYLOAD`](crate::frame::MAX_PAYLOAD)).
pub fn write_delta_batch<'a>(out: &mut Vec<u8>, entries: impl ExactSizeIterator<Item = &'a [u8]>) {
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&(e.len() as u32).to_le_bytes());
        out.extend_from_slice(e);
    }
}

/// Bytes a DeltaBatch entry of `payload_len` bytes adds to its payload.
pub const fn batch_entry_len(payload_len: usize) -> usize {
    4 + payload_len
}

/// The payload of a Delta message from encoded delta bytes.
pub fn delta_payload(delta: &[u8], new_actions: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + delta.len() + new_actions.len());
    out.extend_from_slice(&(delta.len() as u32).to_le_bytes());
    out.extend_from_slice(delta);
    out.extend_from_slice(new_actions.as_bytes());
    out
}

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_othello::Op;

    #[test]
    fn every_message_round_trips() {
        let msgs = [
            Message::Hello(Hello {
                forwarder_id: "fw-1".into(),
                column: 0,
                last_seq: 5,
                last_generation: 2,
                features: 0,
            }),
            Message::Hello(Hello {
                forwarder_id: "fw-2".into(),
                column: 0,
                last_seq: 5,
                last_generation: 2,
                features: FEATURE_DELTA_BATCH | 0x8000_0000,
            }),
            Message::Snapshot {
                snapshot: vec![1, 2, 3],
                actions: "0 drop\n".into(),
            },
            Message::Delta {
                delta: Delta::Ops {
                    generation: 3,
                    ops: vec![Op::SetA { index: 1, word: 2 }],
                },
                new_actions: "1 7\n".into(),
            },
            Message::DeltaBatch {
                deltas: vec![
                    BatchDelta {
                        delta: Delta::Ops {
                            generation: 3,
                            ops: vec![Op::SetA { index: 1, word: 2 }],
                        },
                        new_actions: String::new(),
                    },
                    BatchDelta {
                        delta: Delta::Snapshot(vec![9, 8, 7]),
                        new_actions: "2 drop\n".into(),
                    },
                ],
            },
            Message::SnapshotPart {
                total: 10,
                offset: 4,
                data: vec![5, 6],
            },
            Message::Nonce(vec![7; 64]),
            Message::Keepalive,
            Message::Ack { seq: 99 },
            Message::Push {
                changes: "+ 02:00:00:00:00:01 3\n- 02:00:00:00:00:02\n".into(),
            },
            Message::StatsRequest,
            Message::Report {
                values: vec![("version".into(), 7), ("generation".into(), u64::MAX)],
            },
            Message::Report { values: vec![] },
            Message::Error {
                code: ErrorCode::Refused,
                text: "line 2: no such name".into(),
            },
            Message::Error {
                code: ErrorCode::UnknownColumn,
                text: "column 3".into(),
            },
        ];
        for m in msgs {
            assert_eq!(Message::decode(m.ty(), &m.encode()), Ok(m.clone()));
        }
    }

    #[test]
    fn truncated_and_trailing_payloads_are_rejected() {
        let m = Message::Hello(Hello {
            forwarder_id: "x".into(),
            column: 0,
            last_seq: 0,
            last_generation: 0,
            features: 0,
        });
        let b = m.encode();
        for n in 0..b.len() {
            assert!(Message::decode(MsgType::Hello, &b[..n]).is_err());
        }
        // One byte after the fixed fields is a truncated features field;
        // a byte after the features is trailing data.
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            Message::decode(MsgType::Hello, &long),
            Err(MessageError::Truncated { needed, got, .. }) if needed == b.len() + 4 && got == b.len() + 1
        ));
        long.extend_from_slice(&[0, 0, 0, 0]);
        assert_eq!(
            Message::decode(MsgType::Hello, &long),
            Err(MessageError::TrailingData(1))
        );
        assert!(matches!(
            Message::decode(MsgType::Snapshot, &u64::MAX.to_le_bytes()),
            Err(MessageError::Malformed(_) | MessageError::Truncated { .. })
        ));
    }

    #[test]
    fn snapshot_parts_are_bounded_by_their_total() {
        let part = |total: u64, offset: u64, n: usize| {
            Message::decode(
                MsgType::Snapshot,
                &snapshot_part(total, offset, &vec![0xff; n]),
            )
        };
        assert!(matches!(part(10, 8, 3), Err(MessageError::Malformed(_))));
        assert!(matches!(
            part(10, u64::MAX, 1),
            Err(MessageError::Malformed(_))
        ));
        assert!(matches!(part(10, 0, 0), Err(MessageError::Malformed(_))));
        assert!(matches!(part(10, 2, 8), Ok(Message::SnapshotPart { .. })));
        // A whole body that does not parse is refused.
        assert!(part(10, 0, 10).is_err());
        assert_eq!(
            Message::decode(MsgType::Keepalive, &[0]),
            Err(MessageError::TrailingData(1))
        );
        assert!(Message::decode(MsgType::Nonce, &[0; 33]).is_err());
    }

    #[test]
    fn reports_are_bounded_and_checked() {
        // A count larger than the bytes present, or over the cap.
        assert!(matches!(
            Message::decode(MsgType::Report, &[2, 0, 1, b'a']),
            Err(MessageError::Truncated { .. })
        ));
        assert_eq!(
            Message::decode(MsgType::Report, &[1, 1]),
            Err(MessageError::Malformed("report of more than 256 values"))
        );
        let mut bad = vec![1, 0, 1, 0xff];
        bad.extend_from_slice(&[0; 8]);
        assert_eq!(
            Message::decode(MsgType::Report, &bad),
            Err(MessageError::Malformed("report name is not UTF-8"))
        );
        let mut long = Message::Report {
            values: vec![("a".into(), 1)],
        }
        .encode();
        long.push(0);
        assert_eq!(
            Message::decode(MsgType::Report, &long),
            Err(MessageError::TrailingData(1))
        );
        assert!(Message::decode(MsgType::Push, &[0xff]).is_err());
        assert_eq!(
            Message::decode(MsgType::StatsRequest, &[0]),
            Err(MessageError::TrailingData(1))
        );
    }
}
