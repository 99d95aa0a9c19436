//! The OpenFlow 1.3 (wire version `0x04`) messages the backend uses, as
//! typed values with `encode` and a `decode` that never panics.
//!
//! Covered: hello, error, echo request/reply, features request/reply,
//! set-config, packet-in, flow-removed, packet-out, flow-mod (OXM matches
//! with masks, the apply-actions instruction, output / dec-nw-ttl /
//! set-field actions), barrier request/reply. Any other message type
//! decodes to [`Body::Other`] with its raw body (a port-status, say), so a
//! switch sending something new never breaks the connection; other
//! instructions, actions and OXM classes are kept raw the same way.
//!
//! [`frame_len`] says how long the message at the front of a byte stream
//! is, from its header, before all of it has arrived.

use thiserror::Error;

/// The wire version of OpenFlow 1.3.
pub const VERSION: u8 = 0x04;
/// Bytes of the common header.
pub const HEADER_LEN: usize = 8;
/// "No buffer": the packet travels in the message itself.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// Reserved port: the packet's ingress port (an output to the ingress
/// port itself is skipped by the switch).
pub const PORT_IN_PORT: u32 = 0xffff_fff8;
/// Reserved port: the controller.
pub const PORT_CONTROLLER: u32 = 0xffff_fffd;
/// Reserved port: any (a wildcard in flow-mod deletes).
pub const PORT_ANY: u32 = 0xffff_ffff;
/// Largest regular port number.
pub const PORT_MAX: u32 = 0xffff_ff00;
/// Group wildcard.
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// Every table (flow-mod delete).
pub const TABLE_ALL: u8 = 0xff;
/// `miss_send_len` / output `max_len`: send the whole packet, unbuffered.
pub const NO_BUFFER_LEN: u16 = 0xffff;
/// Flow-mod flag: send a flow-removed message when the flow goes.
pub const FLAG_SEND_FLOW_REM: u16 = 1;

/// Message type numbers.
mod ty {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
}

/// OXM class of the OpenFlow basic fields.
pub const OXM_CLASS_BASIC: u16 = 0x8000;

/// OpenFlow basic OXM field numbers used here.
pub mod field {
    /// Ingress port (4 bytes, no mask).
    pub const IN_PORT: u8 = 0;
    /// Ethernet destination (6 bytes, maskable).
    pub const ETH_DST: u8 = 3;
    /// Ethernet source (6 bytes, maskable).
    pub const ETH_SRC: u8 = 4;
    /// Ethertype (2 bytes, no mask).
    pub const ETH_TYPE: u8 = 5;
    /// IP protocol (1 byte, no mask; needs an IP ethertype).
    pub const IP_PROTO: u8 = 10;
    /// IPv4 source (4 bytes, maskable; needs ethertype 0x0800).
    pub const IPV4_SRC: u8 = 11;
    /// IPv4 destination (4 bytes, maskable; needs ethertype 0x0800).
    pub const IPV4_DST: u8 = 12;
}

/// A message that could not be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than a field or the declared length needs.
    #[error("truncated: {needed} bytes needed, {got} present")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// A wire version other than 1.3 on a message other than hello.
    #[error("OpenFlow version {0:#04x}, only 0x04 (1.3) is spoken")]
    Version(u8),
    /// A length or a field that is impossible.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// Bytes after the last field of a fixed-size message.
    #[error("{0} bytes of trailing data")]
    TrailingData(usize),
}

/// A message too large for OpenFlow's 16-bit length.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("message of {0} bytes exceeds OpenFlow's 65535")]
pub struct TooLong(pub usize);

/// One OXM TLV: a match field, its value and optional mask.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oxm {
    /// Its class ([`OXM_CLASS_BASIC`] for the standard fields).
    pub class: u16,
    /// Field number within the class (7 bits).
    pub field: u8,
    /// The value.
    pub value: Vec<u8>,
    /// The mask (same length as the value), if any.
    pub mask: Option<Vec<u8>>,
}

impl Oxm {
    /// A basic-class field with an exact value.
    pub fn exact(field: u8, value: &[u8]) -> Oxm {
        Oxm {
            class: OXM_CLASS_BASIC,
            field,
            value: value.to_vec(),
            mask: None,
        }
    }

    /// A basic-class field with a mask (the value is masked too, as
    /// switches require).
    pub fn masked(field: u8, value: &[u8], mask: &[u8]) -> Oxm {
        Oxm {
            class: OXM_CLASS_BASIC,
            field,
            value: value.iter().zip(mask).map(|(v, m)| v & m).collect(),
            mask: Some(mask.to_vec()),
        }
    }

    fn encoded_len(&self) -> usize {
        4 + self.value.len() + self.mask.as_ref().map_or(0, Vec::len)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.class.to_be_bytes());
        out.push(self.field << 1 | u8::from(self.mask.is_some()));
        // Lengths are bounded by the decoder and by the constructors'
        // callers (fields of at most 16 bytes); saturate rather than wrap.
        out.push(u8::try_from(self.encoded_len() - 4).unwrap_or(u8::MAX));
        out.extend_from_slice(&self.value);
        if let Some(m) = &self.mask {
            out.extend_from_slice(m);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Oxm, DecodeError> {
        let class = r.u16()?;
        let fh = r.u8()?;
        let len = usize::from(r.u8()?);
        let body = r.bytes(len)?;
        let (field, has_mask) = (fh >> 1, fh & 1 == 1);
        if has_mask {
            if len % 2 != 0 {
                return Err(DecodeError::Malformed("masked OXM of odd length"));
            }
            let (v, m) = body.split_at(len / 2);
            Ok(Oxm {
                class,
                field,
                value: v.to_vec(),
                mask: Some(m.to_vec()),
            })
        } else {
            Ok(Oxm {
                class,
                field,
                value: body.to_vec(),
                mask: None,
            })
        }
    }
}

/// An `ofp_match` of type OXM: the fields, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Match {
    /// The OXM fields.
    pub fields: Vec<Oxm>,
}

impl Match {
    /// The exact value of basic field `field`, if present without a mask.
    pub fn exact(&self, field: u8) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|o| o.class == OXM_CLASS_BASIC && o.field == field && o.mask.is_none())
            .map(|o| o.value.as_slice())
    }

    /// The ingress port, if matched.
    pub fn in_port(&self) -> Option<u32> {
        let v: [u8; 4] = self.exact(field::IN_PORT)?.try_into().ok()?;
        Some(u32::from_be_bytes(v))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let len = 4 + self.fields.iter().map(Oxm::encoded_len).sum::<usize>();
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes());
        for f in &self.fields {
            f.encode(out);
        }
        pad8(out, len);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Match, DecodeError> {
        let typ = r.u16()?;
        if typ != 1 {
            return Err(DecodeError::Malformed("match type is not OXM"));
        }
        let len = usize::from(r.u16()?);
        let body_len = len
            .checked_sub(4)
            .ok_or(DecodeError::Malformed("match length under 4"))?;
        let mut body = Reader::new(r.bytes(body_len)?);
        r.bytes(padding(len))?;
        let mut fields = Vec::new();
        while !body.is_empty() {
            fields.push(Oxm::decode(&mut body)?);
        }
        Ok(Match { fields })
    }
}

/// An action (of an apply-actions instruction or a packet-out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send out `port` (`max_len`: bytes to the controller).
    Output {
        /// The port.
        port: u32,
        /// Bytes of the packet sent when `port` is the controller.
        max_len: u16,
    },
    /// Decrement the IPv4 TTL / IPv6 hop limit (drop at 0).
    DecNwTtl,
    /// Set a header field.
    SetField(Oxm),
    /// Any other action, raw (type and the bytes after its 4-byte header).
    Other {
        /// Action type.
        typ: u16,
        /// Body.
        body: Vec<u8>,
    },
}

impl Action {
    /// Output to `port`, the whole packet if it is the controller.
    pub fn output(port: u32) -> Action {
        Action::Output {
            port,
            max_len: NO_BUFFER_LEN,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        match self {
            Action::Output { port, max_len } => {
                out.extend_from_slice(&0u16.to_be_bytes());
                out.extend_from_slice(&16u16.to_be_bytes());
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            Action::DecNwTtl => {
                out.extend_from_slice(&24u16.to_be_bytes());
                out.extend_from_slice(&8u16.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Action::SetField(o) => {
                let len = 4 + o.encoded_len();
                let padded = len + padding(len);
                out.extend_from_slice(&25u16.to_be_bytes());
                out.extend_from_slice(&u16::try_from(padded).unwrap_or(u16::MAX).to_be_bytes());
                o.encode(out);
                pad8(out, len);
            }
            Action::Other { typ, body } => {
                let len = 4 + body.len();
                out.extend_from_slice(&typ.to_be_bytes());
                out.extend_from_slice(&u16::try_from(len).unwrap_or(u16::MAX).to_be_bytes());
                out.extend_from_slice(body);
            }
        }
        debug_assert!(out.len() > start);
    }

    fn decode_list(b: &[u8]) -> Result<Vec<Action>, DecodeError> {
        let mut r = Reader::new(b);
        let mut v = Vec::new();
        while !r.is_empty() {
            let typ = r.u16()?;
            let len = usize::from(r.u16()?);
            if len < 8 || len % 8 != 0 {
                return Err(DecodeError::Malformed("action length not a multiple of 8"));
            }
            let mut body = Reader::new(r.bytes(len - 4)?);
            v.push(match typ {
                0 if len == 16 => {
                    let port = body.u32()?;
                    let max_len = body.u16()?;
                    Action::Output { port, max_len }
                }
                24 if len == 8 => Action::DecNwTtl,
                25 => {
                    let o = Oxm::decode(&mut body)?;
                    if body.remaining() >= 8 {
                        return Err(DecodeError::Malformed("set-field padding of 8 or more"));
                    }
                    Action::SetField(o)
                }
                0 | 24 => return Err(DecodeError::Malformed("action of the wrong length")),
                _ => Action::Other {
                    typ,
                    body: body.rest().to_vec(),
                },
            });
        }
        Ok(v)
    }
}

fn encode_actions(actions: &[Action], out: &mut Vec<u8>) {
    for a in actions {
        a.encode(out);
    }
}

/// A flow-mod instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// Apply these actions now.
    ApplyActions(Vec<Action>),
    /// Any other instruction, raw (type and the bytes after its header).
    Other {
        /// Instruction type.
        typ: u16,
        /// Body.
        body: Vec<u8>,
    },
}

impl Instruction {
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Instruction::ApplyActions(a) => {
                let start = out.len();
                out.extend_from_slice(&4u16.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
                encode_actions(a, out);
                let len = u16::try_from(out.len() - start).unwrap_or(u16::MAX);
                out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
            }
            Instruction::Other { typ, body } => {
                out.extend_from_slice(&typ.to_be_bytes());
                let len = u16::try_from(4 + body.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(body);
            }
        }
    }

    fn decode_list(b: &[u8]) -> Result<Vec<Instruction>, DecodeError> {
        let mut r = Reader::new(b);
        let mut v = Vec::new();
        while !r.is_empty() {
            let typ = r.u16()?;
            let len = usize::from(r.u16()?);
            if len < 8 || len % 8 != 0 {
                return Err(DecodeError::Malformed(
                    "instruction length not a multiple of 8",
                ));
            }
            let body = r.bytes(len - 4)?;
            v.push(if typ == 4 {
                Instruction::ApplyActions(Action::decode_list(&body[4..])?)
            } else {
                Instruction::Other {
                    typ,
                    body: body.to_vec(),
                }
            });
        }
        Ok(v)
    }
}

/// Flow-mod commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowCommand {
    /// Add (or replace a flow of the same match and priority).
    Add,
    /// Delete every flow that matches (cookie, match, out port filters).
    Delete,
    /// Delete the flow with exactly this match and priority.
    DeleteStrict,
    /// Another command number (modify, modify-strict).
    Other(u8),
}

impl FlowCommand {
    fn number(self) -> u8 {
        match self {
            FlowCommand::Add => 0,
            FlowCommand::Delete => 3,
            FlowCommand::DeleteStrict => 4,
            FlowCommand::Other(n) => n,
        }
    }

    fn from_number(n: u8) -> FlowCommand {
        match n {
            0 => FlowCommand::Add,
            3 => FlowCommand::Delete,
            4 => FlowCommand::DeleteStrict,
            n => FlowCommand::Other(n),
        }
    }
}

/// A flow-mod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    /// The flow's cookie (add), or the cookie to filter by (delete).
    pub cookie: u64,
    /// Bits of `cookie` a delete compares (0: any cookie).
    pub cookie_mask: u64,
    /// Table.
    pub table_id: u8,
    /// What to do.
    pub command: FlowCommand,
    /// Seconds without a packet before the flow goes (0: never).
    pub idle_timeout: u16,
    /// Seconds before the flow goes whatever (0: never).
    pub hard_timeout: u16,
    /// Priority (higher wins).
    pub priority: u16,
    /// Buffered packet to apply the flow to ([`NO_BUFFER`]: none).
    pub buffer_id: u32,
    /// Delete filter: flows that output here ([`PORT_ANY`]: any).
    pub out_port: u32,
    /// Delete filter: flows that output to this group.
    pub out_group: u32,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// The match.
    pub matches: Match,
    /// Instructions.
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    /// A flow-mod add with no timeouts, flags or instructions.
    pub fn add(priority: u16, cookie: u64, matches: Match, actions: Vec<Action>) -> FlowMod {
        FlowMod {
            cookie,
            cookie_mask: 0,
            table_id: 0,
            command: FlowCommand::Add,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: NO_BUFFER,
            out_port: PORT_ANY,
            out_group: GROUP_ANY,
            flags: 0,
            matches,
            instructions: vec![Instruction::ApplyActions(actions)],
        }
    }

    /// Delete, in every table, every flow whose cookie agrees with
    /// `cookie` on the bits of `cookie_mask` (mask 0: every flow).
    pub fn delete_by_cookie(cookie: u64, cookie_mask: u64) -> FlowMod {
        FlowMod {
            cookie,
            cookie_mask,
            table_id: TABLE_ALL,
            command: FlowCommand::Delete,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0,
            buffer_id: NO_BUFFER,
            out_port: PORT_ANY,
            out_group: GROUP_ANY,
            flags: 0,
            matches: Match::default(),
            instructions: Vec::new(),
        }
    }
}

/// A packet-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketIn {
    /// Where the switch buffered it ([`NO_BUFFER`]: not buffered).
    pub buffer_id: u32,
    /// The packet's full length.
    pub total_len: u16,
    /// Why it came (0 no match, 1 action, 2 invalid TTL).
    pub reason: u8,
    /// The table it was looked up in.
    pub table_id: u8,
    /// Cookie of the flow that sent it.
    pub cookie: u64,
    /// Its metadata (the ingress port).
    pub matches: Match,
    /// The packet (all of it, or its first bytes when buffered).
    pub data: Vec<u8>,
}

/// A flow-removed notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRemoved {
    /// The flow's cookie.
    pub cookie: u64,
    /// Its priority.
    pub priority: u16,
    /// Why (0 idle timeout, 1 hard timeout, 2 delete, 3 group delete).
    pub reason: u8,
    /// Its table.
    pub table_id: u8,
    /// How long it lived (seconds).
    pub duration_sec: u32,
    /// ... and nanoseconds.
    pub duration_nsec: u32,
    /// Its idle timeout.
    pub idle_timeout: u16,
    /// Its hard timeout.
    pub hard_timeout: u16,
    /// Packets it matched.
    pub packet_count: u64,
    /// Bytes it matched.
    pub byte_count: u64,
    /// Its match.
    pub matches: Match,
}

/// A packet-out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// A buffered packet to send ([`NO_BUFFER`]: `data` is the packet).
    pub buffer_id: u32,
    /// The port it came in on (for `IN_PORT` outputs and flooding).
    pub in_port: u32,
    /// What to do with it.
    pub actions: Vec<Action>,
    /// The packet.
    pub data: Vec<u8>,
}

/// A message body.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Body {
    /// Hello, with its raw elements (a version bitmap).
    Hello(Vec<u8>),
    /// An error the peer reports about the message with the same xid.
    Error {
        /// Error type.
        typ: u16,
        /// Error code.
        code: u16,
        /// The start of the offending message.
        data: Vec<u8>,
    },
    /// Echo request.
    EchoRequest(Vec<u8>),
    /// Echo reply.
    EchoReply(Vec<u8>),
    /// Features request.
    FeaturesRequest,
    /// Features reply.
    FeaturesReply {
        /// The datapath id.
        datapath_id: u64,
        /// Packets the switch buffers.
        n_buffers: u32,
        /// Tables.
        n_tables: u8,
        /// Auxiliary connection id (0: main).
        auxiliary_id: u8,
        /// Capability bits.
        capabilities: u32,
    },
    /// Set-config.
    SetConfig {
        /// Fragment handling flags.
        flags: u16,
        /// Bytes of a missed packet sent to the controller.
        miss_send_len: u16,
    },
    /// Packet-in.
    PacketIn(PacketIn),
    /// Flow-removed.
    FlowRemoved(FlowRemoved),
    /// Packet-out.
    PacketOut(PacketOut),
    /// Flow-mod.
    FlowMod(FlowMod),
    /// Barrier request.
    BarrierRequest,
    /// Barrier reply.
    BarrierReply,
    /// Any other message, raw.
    Other {
        /// Message type.
        typ: u8,
        /// Body (after the header).
        body: Vec<u8>,
    },
}

/// One OpenFlow message: transaction id and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Transaction id (a reply carries its request's).
    pub xid: u32,
    /// The body.
    pub body: Body,
}

/// The version bitmap hello element announcing OpenFlow 1.3 only.
pub fn hello_elements() -> Vec<u8> {
    let mut v = Vec::with_capacity(8);
    v.extend_from_slice(&1u16.to_be_bytes());
    v.extend_from_slice(&8u16.to_be_bytes());
    v.extend_from_slice(&(1u32 << VERSION).to_be_bytes());
    v
}

/// The length of the message at the front of `buf` (from its header), or
/// `None` when fewer than [`HEADER_LEN`] bytes are there. A declared
/// length under the header's is an error: the stream cannot be framed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, DecodeError> {
    let Some(h) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let len = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if len < HEADER_LEN {
        return Err(DecodeError::Malformed("message length under 8"));
    }
    Ok(Some(len))
}

impl Message {
    /// A message.
    pub fn new(xid: u32, body: Body) -> Message {
        Message { xid, body }
    }

    fn typ(&self) -> u8 {
        match &self.body {
            Body::Hello(_) => ty::HELLO,
            Body::Error { .. } => ty::ERROR,
            Body::EchoRequest(_) => ty::ECHO_REQUEST,
            Body::EchoReply(_) => ty::ECHO_REPLY,
            Body::FeaturesRequest => ty::FEATURES_REQUEST,
            Body::FeaturesReply { .. } => ty::FEATURES_REPLY,
            Body::SetConfig { .. } => ty::SET_CONFIG,
            Body::PacketIn(_) => ty::PACKET_IN,
            Body::FlowRemoved(_) => ty::FLOW_REMOVED,
            Body::PacketOut(_) => ty::PACKET_OUT,
            Body::FlowMod(_) => ty::FLOW_MOD,
            Body::BarrierRequest => ty::BARRIER_REQUEST,
            Body::BarrierReply => ty::BARRIER_REPLY,
            Body::Other { typ, .. } => *typ,
        }
    }

    /// The message on the wire, appended to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), TooLong> {
        let start = out.len();
        out.push(VERSION);
        out.push(self.typ());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.xid.to_be_bytes());
        match &self.body {
            Body::Hello(b) | Body::EchoRequest(b) | Body::EchoReply(b) => out.extend_from_slice(b),
            Body::Error { typ, code, data } => {
                out.extend_from_slice(&typ.to_be_bytes());
                out.extend_from_slice(&code.to_be_bytes());
                out.extend_from_slice(data);
            }
            Body::FeaturesRequest | Body::BarrierRequest | Body::BarrierReply => {}
            Body::FeaturesReply {
                datapath_id,
                n_buffers,
                n_tables,
                auxiliary_id,
                capabilities,
            } => {
                out.extend_from_slice(&datapath_id.to_be_bytes());
                out.extend_from_slice(&n_buffers.to_be_bytes());
                out.push(*n_tables);
                out.push(*auxiliary_id);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&capabilities.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Body::SetConfig {
                flags,
                miss_send_len,
            } => {
                out.extend_from_slice(&flags.to_be_bytes());
                out.extend_from_slice(&miss_send_len.to_be_bytes());
            }
            Body::PacketIn(p) => {
                out.extend_from_slice(&p.buffer_id.to_be_bytes());
                out.extend_from_slice(&p.total_len.to_be_bytes());
                out.push(p.reason);
                out.push(p.table_id);
                out.extend_from_slice(&p.cookie.to_be_bytes());
                p.matches.encode(out);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&p.data);
            }
            Body::FlowRemoved(f) => {
                out.extend_from_slice(&f.cookie.to_be_bytes());
                out.extend_from_slice(&f.priority.to_be_bytes());
                out.push(f.reason);
                out.push(f.table_id);
                out.extend_from_slice(&f.duration_sec.to_be_bytes());
                out.extend_from_slice(&f.duration_nsec.to_be_bytes());
                out.extend_from_slice(&f.idle_timeout.to_be_bytes());
                out.extend_from_slice(&f.hard_timeout.to_be_bytes());
                out.extend_from_slice(&f.packet_count.to_be_bytes());
                out.extend_from_slice(&f.byte_count.to_be_bytes());
                f.matches.encode(out);
            }
            Body::PacketOut(p) => {
                out.extend_from_slice(&p.buffer_id.to_be_bytes());
                out.extend_from_slice(&p.in_port.to_be_bytes());
                let at = out.len();
                out.extend_from_slice(&[0; 8]);
                encode_actions(&p.actions, out);
                let alen = out.len() - at - 8;
                let alen = u16::try_from(alen).map_err(|_| TooLong(alen))?;
                out[at..at + 2].copy_from_slice(&alen.to_be_bytes());
                out.extend_from_slice(&p.data);
            }
            Body::FlowMod(f) => {
                out.extend_from_slice(&f.cookie.to_be_bytes());
                out.extend_from_slice(&f.cookie_mask.to_be_bytes());
                out.push(f.table_id);
                out.push(f.command.number());
                out.extend_from_slice(&f.idle_timeout.to_be_bytes());
                out.extend_from_slice(&f.hard_timeout.to_be_bytes());
                out.extend_from_slice(&f.priority.to_be_bytes());
                out.extend_from_slice(&f.buffer_id.to_be_bytes());
                out.extend_from_slice(&f.out_port.to_be_bytes());
                out.extend_from_slice(&f.out_group.to_be_bytes());
                out.extend_from_slice(&f.flags.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                f.matches.encode(out);
                for i in &f.instructions {
                    i.encode(out);
                }
            }
            Body::Other { body, .. } => out.extend_from_slice(body),
        }
        let len = out.len() - start;
        match u16::try_from(len) {
            Ok(l) => {
                out[start + 2..start + 4].copy_from_slice(&l.to_be_bytes());
                Ok(())
            }
            Err(_) => {
                out.truncate(start);
                Err(TooLong(len))
            }
        }
    }

    /// The message on the wire.
    pub fn encode(&self) -> Result<Vec<u8>, TooLong> {
        let mut v = Vec::new();
        self.encode_into(&mut v)?;
        Ok(v)
    }

    /// Decode exactly one message (`buf` is the whole message, as
    /// [`frame_len`] delimits it). Never panics.
    pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader::new(buf);
        let version = r.u8()?;
        let typ = r.u8()?;
        let len = usize::from(r.u16()?);
        let xid = r.u32()?;
        if len != buf.len() {
            return Err(if len > buf.len() {
                DecodeError::Truncated {
                    needed: len,
                    got: buf.len(),
                }
            } else {
                DecodeError::TrailingData(buf.len() - len)
            });
        }
        if version != VERSION && typ != ty::HELLO {
            return Err(DecodeError::Version(version));
        }
        let body = match typ {
            ty::HELLO => Body::Hello(r.rest().to_vec()),
            ty::ERROR => Body::Error {
                typ: r.u16()?,
                code: r.u16()?,
                data: r.rest().to_vec(),
            },
            ty::ECHO_REQUEST => Body::EchoRequest(r.rest().to_vec()),
            ty::ECHO_REPLY => Body::EchoReply(r.rest().to_vec()),
            ty::FEATURES_REQUEST => Body::FeaturesRequest,
            ty::FEATURES_REPLY => {
                let datapath_id = r.u64()?;
                let n_buffers = r.u32()?;
                let n_tables = r.u8()?;
                let auxiliary_id = r.u8()?;
                r.bytes(2)?;
                let capabilities = r.u32()?;
                r.bytes(4)?;
                Body::FeaturesReply {
                    datapath_id,
                    n_buffers,
                    n_tables,
                    auxiliary_id,
                    capabilities,
                }
            }
            ty::SET_CONFIG => Body::SetConfig {
                flags: r.u16()?,
                miss_send_len: r.u16()?,
            },
            ty::PACKET_IN => {
                let buffer_id = r.u32()?;
                let total_len = r.u16()?;
                let reason = r.u8()?;
                let table_id = r.u8()?;
                let cookie = r.u64()?;
                let matches = Match::decode(&mut r)?;
                r.bytes(2)?;
                Body::PacketIn(PacketIn {
                    buffer_id,
                    total_len,
                    reason,
                    table_id,
                    cookie,
                    matches,
                    data: r.rest().to_vec(),
                })
            }
            ty::FLOW_REMOVED => Body::FlowRemoved(FlowRemoved {
                cookie: r.u64()?,
                priority: r.u16()?,
                reason: r.u8()?,
                table_id: r.u8()?,
                duration_sec: r.u32()?,
                duration_nsec: r.u32()?,
                idle_timeout: r.u16()?,
                hard_timeout: r.u16()?,
                packet_count: r.u64()?,
                byte_count: r.u64()?,
                matches: Match::decode(&mut r)?,
            }),
            ty::PACKET_OUT => {
                let buffer_id = r.u32()?;
                let in_port = r.u32()?;
                let alen = usize::from(r.u16()?);
                r.bytes(6)?;
                let actions = Action::decode_list(r.bytes(alen)?)?;
                Body::PacketOut(PacketOut {
                    buffer_id,
                    in_port,
                    actions,
                    data: r.rest().to_vec(),
                })
            }
            ty::FLOW_MOD => {
                let cookie = r.u64()?;
                let cookie_mask = r.u64()?;
                let table_id = r.u8()?;
                let command = FlowCommand::from_number(r.u8()?);
                let idle_timeout = r.u16()?;
                let hard_timeout = r.u16()?;
                let priority = r.u16()?;
                let buffer_id = r.u32()?;
                let out_port = r.u32()?;
                let out_group = r.u32()?;
                let flags = r.u16()?;
                r.bytes(2)?;
                let matches = Match::decode(&mut r)?;
                let instructions = Instruction::decode_list(r.rest())?;
                Body::FlowMod(FlowMod {
                    cookie,
                    cookie_mask,
                    table_id,
                    command,
                    idle_timeout,
                    hard_timeout,
                    priority,
                    buffer_id,
                    out_port,
                    out_group,
                    flags,
                    matches,
                    instructions,
                })
            }
            ty::BARRIER_REQUEST => Body::BarrierRequest,
            ty::BARRIER_REPLY => Body::BarrierReply,
            typ => Body::Other {
                typ,
                body: r.rest().to_vec(),
            },
        };
        if !r.is_empty() {
            return Err(DecodeError::TrailingData(r.remaining()));
        }
        Ok(Message { xid, body })
    }
}

/// Bytes of padding after `len` bytes to reach a multiple of 8.
fn padding(len: usize) -> usize {
    (8 - len % 8) % 8
}

fn pad8(out: &mut Vec<u8>, len: usize) {
    out.extend(std::iter::repeat_n(0u8, padding(len)));
}

/// A cursor over untrusted bytes: every read is checked.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, at: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }

    fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(DecodeError::Truncated {
                needed: self.at.saturating_add(n),
                got: self.buf.len(),
            })?;
        let b = &self.buf[self.at..end];
        self.at = end;
        Ok(b)
    }

    fn rest(&mut self) -> &'a [u8] {
        let b = &self.buf[self.at..];
        self.at = self.buf.len();
        b
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn hello_with_version_bitmap_matches_the_spec_bytes() {
        let m = Message::new(7, Body::Hello(hello_elements()));
        let b = m.encode().unwrap();
        assert_eq!(b, unhex("04 00 0010 00000007  0001 0008 00000010"));
        assert_eq!(Message::decode(&b).unwrap(), m);
    }

    #[test]
    fn packet_in_from_ovs_decodes_port_and_frame() {
        // As Open vSwitch 3.1 sends it: no buffer, table-miss reason 0,
        // match with in_port 2, then 2 bytes of pad and the frame.
        let b = unhex(
            "04 0a 002e 00000000 ffffffff 0004 00 00 0000000000000000
             0001 000c 80000004 00000002 00000000 0000 deadbeef",
        );
        let m = Message::decode(&b).unwrap();
        let Body::PacketIn(p) = m.body else { panic!() };
        assert_eq!(p.matches.in_port(), Some(2));
        assert_eq!(p.data, vec![0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(p.buffer_id, NO_BUFFER);
    }

    #[test]
    fn flow_mod_with_masked_eth_dst_matches_the_spec_bytes() {
        let mut f = FlowMod::add(
            100,
            0x1122,
            Match {
                fields: vec![
                    Oxm::exact(field::IN_PORT, &3u32.to_be_bytes()),
                    Oxm::masked(field::ETH_DST, &[0xff; 6], &[0xff, 0xff, 0, 0, 0, 0]),
                ],
            },
            vec![Action::output(1)],
        );
        f.idle_timeout = 10;
        f.flags = FLAG_SEND_FLOW_REM;
        let b = Message::new(1, Body::FlowMod(f.clone())).encode().unwrap();
        let expect = unhex(
            "04 0e 0068 00000001
             0000000000001122 0000000000000000 00 00 000a 0000 0064
             ffffffff ffffffff ffffffff 0001 0000
             0001 001c 80000004 00000003 8000070c ffff00000000 ffff00000000 00000000
             0004 0018 00000000 0000 0010 00000001 ffff 000000000000",
        );
        assert_eq!(b, expect);
        assert_eq!(Message::decode(&b).unwrap().body, Body::FlowMod(f));
    }

    #[test]
    fn every_message_round_trips() {
        let m = Match {
            fields: vec![Oxm::exact(field::ETH_TYPE, &[8, 0])],
        };
        let bodies = vec![
            Body::Error {
                typ: 5,
                code: 2,
                data: vec![1, 2, 3],
            },
            Body::EchoRequest(vec![9; 5]),
            Body::EchoReply(vec![]),
            Body::FeaturesRequest,
            Body::FeaturesReply {
                datapath_id: 0x0102_0304_0506_0708,
                n_buffers: 0,
                n_tables: 254,
                auxiliary_id: 0,
                capabilities: 0x4f,
            },
            Body::SetConfig {
                flags: 0,
                miss_send_len: NO_BUFFER_LEN,
            },
            Body::FlowRemoved(FlowRemoved {
                cookie: 5,
                priority: 9,
                reason: 0,
                table_id: 0,
                duration_sec: 3,
                duration_nsec: 4,
                idle_timeout: 10,
                hard_timeout: 0,
                packet_count: 7,
                byte_count: 700,
                matches: m.clone(),
            }),
            Body::PacketOut(PacketOut {
                buffer_id: NO_BUFFER,
                in_port: 1,
                actions: vec![
                    Action::output(2),
                    Action::DecNwTtl,
                    Action::SetField(Oxm::exact(field::ETH_SRC, &[2; 6])),
                ],
                data: vec![0xab; 60],
            }),
            Body::FlowMod(FlowMod::delete_by_cookie(
                0xdead_0000_0000,
                0xffff_0000_0000,
            )),
            Body::BarrierRequest,
            Body::BarrierReply,
            Body::Other {
                typ: 12,
                body: vec![0; 16],
            },
        ];
        for (i, b) in bodies.into_iter().enumerate() {
            let m = Message::new(i as u32, b);
            let bytes = m.encode().unwrap();
            assert_eq!(frame_len(&bytes).unwrap(), Some(bytes.len()));
            assert_eq!(Message::decode(&bytes).unwrap(), m, "{i}");
        }
    }

    #[test]
    fn short_long_and_foreign_version_messages_are_refused() {
        let b = Message::new(1, Body::BarrierRequest).encode().unwrap();
        assert!(matches!(
            Message::decode(&b[..7]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut long = b.clone();
        long.push(0);
        assert_eq!(Message::decode(&long), Err(DecodeError::TrailingData(1)));
        let mut v1 = b.clone();
        v1[0] = 1;
        assert_eq!(Message::decode(&v1), Err(DecodeError::Version(1)));
        assert!(frame_len(&[4, 0, 0, 3, 0, 0, 0, 0]).is_err());
        assert_eq!(frame_len(&[4, 0, 0]), Ok(None));
        // A hello of another version is accepted: versions are negotiated.
        let h = unhex("06 00 0008 00000001");
        assert!(matches!(Message::decode(&h).unwrap().body, Body::Hello(_)));
    }

    #[test]
    fn a_packet_out_too_large_for_sixteen_bits_is_refused_not_wrapped() {
        let p = Body::PacketOut(PacketOut {
            buffer_id: NO_BUFFER,
            in_port: 1,
            actions: vec![],
            data: vec![0; 70_000],
        });
        assert!(Message::new(1, p).encode().is_err());
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics_and_reencodes(b in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            if let Ok(m) = Message::decode(&b) {
                let again = m.encode().unwrap();
                proptest::prop_assert_eq!(Message::decode(&again).unwrap(), m);
            }
        }

        #[test]
        fn decoding_mutated_flow_mods_never_panics(at in 0usize..96, v in proptest::num::u8::ANY) {
            let f = FlowMod::add(1, 2, Match { fields: vec![Oxm::masked(field::IPV4_DST, &[10, 0, 0, 1], &[255, 255, 0, 0])] }, vec![Action::output(4)]);
            let mut b = Message::new(3, Body::FlowMod(f)).encode().unwrap();
            let i = at % b.len();
            b[i] = v;
            let _ = Message::decode(&b);
        }
    }
}

#[cfg(test)]
mod seed_tests {
    use super::*;

    #[test]
    fn the_fuzz_seeds_are_valid_messages() {
        let seeds: [&[u8]; 4] = [
            include_bytes!("../../../fuzz/seeds/openflow_decode/packet_in"),
            include_bytes!("../../../fuzz/seeds/openflow_decode/barrier_reply"),
            include_bytes!("../../../fuzz/seeds/openflow_decode/error"),
            include_bytes!("../../../fuzz/seeds/openflow_decode/flow_removed"),
        ];
        for s in seeds {
            let m = Message::decode(s).unwrap();
            assert_eq!(m.encode().unwrap(), s);
        }
        let Body::PacketIn(p) = Message::decode(include_bytes!(
            "../../../fuzz/seeds/openflow_decode/packet_in"
        ))
        .unwrap()
        .body
        else {
            panic!("not a packet-in")
        };
        assert_eq!((p.matches.in_port(), p.data.len()), (Some(1), 60));
        let two = include_bytes!("../../../fuzz/seeds/openflow_decode/echo_hello");
        let n = frame_len(two).unwrap().unwrap();
        assert!(Message::decode(&two[..n]).is_ok() && Message::decode(&two[n..]).is_ok());
    }
}
