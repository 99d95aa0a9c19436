//! NDNLPv2 link-layer packets, and the any-packet decoder.
//!
//! ```text
//! LpPacket = LP-PACKET-TYPE TLV-LENGTH *LpHeaderField [Fragment]
//! ```
//!
//! Header fields decoded: Sequence, FragIndex, FragCount, PitToken, Nack
//! (with NackReason), IncomingFaceId, NextHopFaceId, CachePolicy (bytes),
//! CongestionMark, Ack (repeatable), TxSequence, NonDiscovery,
//! PrefixAnnouncement (bytes). An unknown header is skipped only when its
//! TLV-TYPE is in 800..=959 with the two low bits 00; any other unknown
//! header is an error. Fragment must be the last element. A known header
//! may appear once (Ack any number of times); headers are not required to
//! be in a particular order, and are encoded in increasing TLV-TYPE order.

use super::data::Data;
use super::error::NdnError;
use super::interest::Interest;
use super::tlv;
use super::tt;
use super::view::{LpView, NetPacketView, PacketView};

/// NackReason codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NackReason {
    /// 50: the upstream is congested.
    Congestion,
    /// 100: a duplicate Nonce was seen.
    Duplicate,
    /// 150: no route.
    NoRoute,
    /// Any other code (0 is "none").
    Other(u64),
}

impl NackReason {
    /// The code on the wire.
    pub fn code(self) -> u64 {
        match self {
            NackReason::Congestion => 50,
            NackReason::Duplicate => 100,
            NackReason::NoRoute => 150,
            NackReason::Other(c) => c,
        }
    }
    /// The reason for a code.
    pub fn from_code(c: u64) -> Self {
        match c {
            50 => NackReason::Congestion,
            100 => NackReason::Duplicate,
            150 => NackReason::NoRoute,
            c => NackReason::Other(c),
        }
    }
}

/// A Nack header (the Fragment carries the Interest being refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Nack {
    /// NackReason (absent: unspecified).
    pub reason: Option<NackReason>,
}

/// An NDNLPv2 LpPacket.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LpPacket {
    /// Sequence (8-byte fixed-width).
    pub sequence: Option<u64>,
    /// FragIndex.
    pub frag_index: Option<u64>,
    /// FragCount.
    pub frag_count: Option<u64>,
    /// PitToken (1 to 32 bytes).
    pub pit_token: Option<Vec<u8>>,
    /// Nack.
    pub nack: Option<Nack>,
    /// IncomingFaceId.
    pub incoming_face_id: Option<u64>,
    /// NextHopFaceId.
    pub next_hop_face_id: Option<u64>,
    /// CachePolicy's TLV-VALUE, not interpreted.
    pub cache_policy: Option<Vec<u8>>,
    /// CongestionMark.
    pub congestion_mark: Option<u64>,
    /// Ack (8-byte fixed-width each), in order.
    pub acks: Vec<u64>,
    /// TxSequence (8-byte fixed-width).
    pub tx_sequence: Option<u64>,
    /// NonDiscovery.
    pub non_discovery: bool,
    /// PrefixAnnouncement's TLV-VALUE, not interpreted.
    pub prefix_announcement: Option<Vec<u8>>,
    /// Fragment: a whole network-layer packet or a piece of one.
    pub fragment: Option<Vec<u8>>,
}

/// Whether an unknown NDNLPv2 header may be ignored.
#[inline]
pub const fn lp_header_ignorable(typ: u32) -> bool {
    800 <= typ && typ <= 959 && typ & 3 == 0
}

impl LpPacket {
    /// An LpPacket carrying `fragment` (a whole encoded Interest or Data).
    pub fn wrap(fragment: Vec<u8>) -> Self {
        LpPacket {
            fragment: Some(fragment),
            ..Default::default()
        }
    }

    /// A Nack of `interest` with `reason`.
    pub fn nack(interest: &Interest, reason: Option<NackReason>) -> Self {
        LpPacket {
            nack: Some(Nack { reason }),
            fragment: Some(interest.to_wire()),
            ..Default::default()
        }
    }

    /// Decode a whole LpPacket element; `wire` must hold exactly it. The
    /// one walk of the element is [`LpView::parse`]; this copies its fields
    /// out.
    pub fn decode(wire: &[u8]) -> Result<Self, NdnError> {
        LpView::parse(wire).map(|v| v.to_owned())
    }

    /// Append the whole LpPacket element (headers in increasing TLV-TYPE
    /// order, Fragment last).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::new();
        if let Some(s) = self.sequence {
            tlv::write_tlv(&mut v, tt::SEQUENCE, &s.to_be_bytes());
        }
        if let Some(i) = self.frag_index {
            tlv::write_nni_tlv(&mut v, tt::FRAG_INDEX, i);
        }
        if let Some(c) = self.frag_count {
            tlv::write_nni_tlv(&mut v, tt::FRAG_COUNT, c);
        }
        LpWrap {
            pit_token: self.pit_token.as_deref(),
            nack: self.nack,
            incoming_face_id: self.incoming_face_id,
        }
        .write_headers(&mut v);
        if let Some(f) = self.next_hop_face_id {
            tlv::write_nni_tlv(&mut v, tt::NEXT_HOP_FACE_ID, f);
        }
        if let Some(c) = &self.cache_policy {
            tlv::write_tlv(&mut v, tt::CACHE_POLICY, c);
        }
        if let Some(c) = self.congestion_mark {
            tlv::write_nni_tlv(&mut v, tt::CONGESTION_MARK, c);
        }
        for a in &self.acks {
            tlv::write_tlv(&mut v, tt::ACK, &a.to_be_bytes());
        }
        if let Some(s) = self.tx_sequence {
            tlv::write_tlv(&mut v, tt::TX_SEQUENCE, &s.to_be_bytes());
        }
        if self.non_discovery {
            tlv::write_tlv(&mut v, tt::NON_DISCOVERY, &[]);
        }
        if let Some(p) = &self.prefix_announcement {
            tlv::write_tlv(&mut v, tt::PREFIX_ANNOUNCEMENT, p);
        }
        if let Some(f) = &self.fragment {
            tlv::write_tlv(&mut v, tt::FRAGMENT, f);
        }
        tlv::write_tlv(out, tt::LP_PACKET, &v);
    }

    /// The whole LpPacket element.
    pub fn to_wire(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }

    /// Whether the Fragment is a whole network-layer packet (no
    /// fragmentation, or FragCount 1).
    pub fn is_whole(&self) -> bool {
        self.frag_count.is_none_or_one()
    }

    /// The network-layer packet in the Fragment: `None` for an IDLE packet
    /// (no Fragment) or a piece of a fragmented packet.
    pub fn network_packet(&self) -> Result<Option<NetPacket>, NdnError> {
        match &self.fragment {
            Some(f) if self.is_whole() => NetPacket::decode(f).map(Some),
            _ => Ok(None),
        }
    }
}

/// The NDNLPv2 headers a forwarder puts on a packet it sends (PitToken,
/// Nack, IncomingFaceId), borrowed: [`LpWrap::encode`] writes the
/// LpPacket around a fragment with one exact-size reservation, copying
/// nothing but the bytes themselves into the output (what
/// `LpPacket { pit_token, nack, incoming_face_id, ..LpPacket::wrap(f) }`
/// encodes to, without building that packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LpWrap<'a> {
    /// PitToken (1 to 32 bytes).
    pub pit_token: Option<&'a [u8]>,
    /// Nack.
    pub nack: Option<Nack>,
    /// IncomingFaceId.
    pub incoming_face_id: Option<u64>,
}

fn nack_value_len(n: Nack) -> usize {
    n.reason
        .map_or(0, |r| tlv::tlv_len(tt::NACK_REASON, tlv::nni_len(r.code())))
}

impl LpWrap<'_> {
    fn headers_len(&self) -> usize {
        self.pit_token
            .map_or(0, |t| tlv::tlv_len(tt::PIT_TOKEN, t.len()))
            + self
                .nack
                .map_or(0, |n| tlv::tlv_len(tt::NACK, nack_value_len(n)))
            + self
                .incoming_face_id
                .map_or(0, |f| tlv::tlv_len(tt::INCOMING_FACE_ID, tlv::nni_len(f)))
    }

    /// The headers, in increasing TLV-TYPE order (as [`LpPacket::encode`]).
    fn write_headers(&self, out: &mut Vec<u8>) {
        if let Some(t) = self.pit_token {
            tlv::write_tlv(out, tt::PIT_TOKEN, t);
        }
        if let Some(n) = self.nack {
            tlv::write_type_length(out, tt::NACK, nack_value_len(n));
            if let Some(r) = n.reason {
                tlv::write_nni_tlv(out, tt::NACK_REASON, r.code());
            }
        }
        if let Some(f) = self.incoming_face_id {
            tlv::write_nni_tlv(out, tt::INCOMING_FACE_ID, f);
        }
    }

    /// Append the LpPacket with these headers around `fragment`.
    pub fn encode(&self, fragment: &[u8], out: &mut Vec<u8>) {
        let len = self.headers_len() + tlv::tlv_len(tt::FRAGMENT, fragment.len());
        out.reserve(self.wire_len(fragment.len()));
        tlv::write_type_length(out, tt::LP_PACKET, len);
        self.write_headers(out);
        tlv::write_tlv(out, tt::FRAGMENT, fragment);
    }

    /// The length of the LpPacket these headers make around a fragment of
    /// `fragment_len` bytes.
    pub fn wire_len(&self, fragment_len: usize) -> usize {
        let len = self.headers_len() + tlv::tlv_len(tt::FRAGMENT, fragment_len);
        tlv::tlv_len(tt::LP_PACKET, len)
    }

    /// The LpPacket with these headers around `fragment`, in one
    /// allocation of its exact size.
    pub fn to_wire(&self, fragment: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.wire_len(fragment.len()));
        self.encode(fragment, &mut v);
        v
    }
}

trait NoneOrOne {
    fn is_none_or_one(&self) -> bool;
}
impl NoneOrOne for Option<u64> {
    fn is_none_or_one(&self) -> bool {
        matches!(self, None | Some(1))
    }
}

/// A network-layer packet: Interest or Data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetPacket {
    /// An Interest.
    Interest(Interest),
    /// A Data.
    Data(Data),
}

impl NetPacket {
    /// Decode an Interest or Data element ([`NetPacketView::parse`], then
    /// copied out).
    pub fn decode(wire: &[u8]) -> Result<Self, NdnError> {
        NetPacketView::parse(wire).map(|v| v.to_owned())
    }
    /// The whole element.
    pub fn to_wire(&self) -> Vec<u8> {
        match self {
            NetPacket::Interest(i) => i.to_wire(),
            NetPacket::Data(d) => d.to_wire(),
        }
    }
}

/// Any packet a face can receive: a bare Interest or Data, or an LpPacket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// A bare Interest.
    Interest(Interest),
    /// A bare Data.
    Data(Data),
    /// An NDNLPv2 LpPacket.
    Lp(LpPacket),
}

impl Packet {
    /// Decode by the outer TLV-TYPE; the buffer must hold exactly one element
    /// ([`PacketView::parse`], then copied out).
    pub fn decode(wire: &[u8]) -> Result<Self, NdnError> {
        PacketView::parse(wire).map(|v| v.to_owned())
    }
    /// The whole element.
    pub fn to_wire(&self) -> Vec<u8> {
        match self {
            Packet::Interest(i) => i.to_wire(),
            Packet::Data(d) => d.to_wire(),
            Packet::Lp(l) => l.to_wire(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndn::Name;

    #[test]
    fn lp_wrap_writes_what_the_owned_packet_encodes_in_one_allocation() {
        let frag = Interest::new(Name::from_uri("/w/x").unwrap()).to_wire();
        let big = vec![7u8; 300];
        for fragment in [&frag[..], &big[..]] {
            for token in [None, Some(&[1u8][..]), Some(&[9u8; 32][..])] {
                for nack in [
                    None,
                    Some(Nack { reason: None }),
                    Some(Nack {
                        reason: Some(NackReason::NoRoute),
                    }),
                    Some(Nack {
                        reason: Some(NackReason::Other(70_000)),
                    }),
                ] {
                    for incoming in [None, Some(0), Some(300), Some(u64::MAX)] {
                        let w = LpWrap {
                            pit_token: token,
                            nack,
                            incoming_face_id: incoming,
                        };
                        let owned = LpPacket {
                            pit_token: token.map(<[u8]>::to_vec),
                            nack,
                            incoming_face_id: incoming,
                            ..LpPacket::wrap(fragment.to_vec())
                        };
                        let bytes = w.to_wire(fragment);
                        assert_eq!(bytes, owned.to_wire());
                        assert_eq!(bytes.capacity(), bytes.len(), "one exact reservation");
                        assert_eq!(LpPacket::decode(&bytes), Ok(owned));
                    }
                }
            }
        }
    }

    #[test]
    fn nack_with_reason_round_trips_and_carries_the_interest() {
        let mut i = Interest::new(Name::from_uri("/n").unwrap());
        i.nonce = Some(7);
        let p = LpPacket::nack(&i, Some(NackReason::NoRoute));
        let w = p.to_wire();
        // Nack header: FD 03 20, length 3, NackReason FD 03 21 01 96.
        assert!(w
            .windows(8)
            .any(|x| x == [0xFD, 3, 0x20, 5, 0xFD, 3, 0x21, 1]));
        let back = LpPacket::decode(&w).unwrap();
        assert_eq!(back, p);
        assert_eq!(back.nack.unwrap().reason, Some(NackReason::NoRoute));
        assert_eq!(back.network_packet().unwrap(), Some(NetPacket::Interest(i)));
    }

    #[test]
    fn pit_token_and_headers_round_trip() {
        let p = LpPacket {
            sequence: Some(0x0102030405060708),
            frag_index: Some(0),
            frag_count: Some(1),
            pit_token: Some(vec![0xAA; 8]),
            next_hop_face_id: Some(300),
            congestion_mark: Some(1),
            acks: vec![1, 2],
            tx_sequence: Some(9),
            non_discovery: true,
            fragment: Some(Data::new(Name::from_uri("/d").unwrap(), vec![]).to_wire()),
            ..Default::default()
        };
        let w = p.to_wire();
        let back = LpPacket::decode(&w).unwrap();
        assert_eq!(back, p);
        assert!(matches!(
            back.network_packet(),
            Ok(Some(NetPacket::Data(_)))
        ));
        assert_eq!(Packet::decode(&w).unwrap(), Packet::Lp(p));
    }

    #[test]
    fn unknown_headers_follow_the_ndnlpv2_rule() {
        // 804 = 0x324: in range, low bits 00 -> ignored.
        let ok = [100, 4, 0xFD, 0x03, 0x24, 0];
        assert_eq!(LpPacket::decode(&ok).unwrap(), LpPacket::default());
        // 805: low bits 01 -> error.
        let bad = [100, 4, 0xFD, 0x03, 0x25, 0];
        assert!(matches!(
            LpPacket::decode(&bad),
            Err(NdnError::UnknownCritical { typ: 805, .. })
        ));
        // 960 (0x3C0): out of range -> error, although even.
        let bad = [100, 4, 0xFD, 0x03, 0xC0, 0];
        assert!(matches!(
            LpPacket::decode(&bad),
            Err(NdnError::UnknownCritical { typ: 960, .. })
        ));
    }

    #[test]
    fn malformed_lp_packets_are_rejected() {
        // Field after Fragment.
        assert!(LpPacket::decode(&[100, 4, 80, 0, 98, 0]).is_err());
        // Empty PitToken.
        assert!(LpPacket::decode(&[100, 2, 98, 0]).is_err());
        // Sequence not 8 bytes.
        assert!(LpPacket::decode(&[100, 3, 81, 1, 0]).is_err());
        // Two PitTokens.
        assert!(LpPacket::decode(&[100, 6, 98, 1, 1, 98, 1, 2]).is_err());
        // FragIndex >= FragCount.
        assert!(LpPacket::decode(&[100, 6, 82, 1, 2, 83, 1, 2]).is_err());
    }

    #[test]
    fn fragments_of_a_larger_packet_are_not_decoded() {
        let p = LpPacket {
            frag_index: Some(0),
            frag_count: Some(2),
            fragment: Some(vec![5, 9]),
            ..Default::default()
        };
        assert_eq!(
            LpPacket::decode(&p.to_wire()).unwrap().network_packet(),
            Ok(None)
        );
        // An IDLE packet has no network packet either.
        assert_eq!(LpPacket::default().network_packet(), Ok(None));
    }

    #[test]
    fn packet_dispatches_on_the_outer_type() {
        let i = Interest::new(Name::from_uri("/x").unwrap());
        assert_eq!(Packet::decode(&i.to_wire()).unwrap(), Packet::Interest(i));
        assert!(matches!(
            Packet::decode(&[9, 0]),
            Err(NdnError::UnknownCritical { typ: 9, .. })
        ));
        assert!(Packet::decode(&[]).is_err());
    }
}
