//! Borrowed views of Interest, Data and LpPacket: the one decoder walk of
//! each packet type.
//!
//! [`InterestView::parse`], [`DataView::parse`], [`LpView::parse`] and
//! [`PacketView::parse`] validate a packet and allocate nothing: the name
//! is a [`NameRef`] (component boundaries found by one validating pass, no
//! `Vec` per name or component), byte fields are slices of the received
//! buffer. The owned decoders ([`Interest::decode`], [`Data::decode`],
//! [`LpPacket::decode`], [`Packet::decode`]) are `parse` followed by
//! `to_owned`, so they accept and reject the same bytes with the same
//! errors by construction; [`InterestView::write_into`] and
//! [`super::Name::assign`] refill an owned packet reusing its buffers,
//! which is how the forwarding pipeline decodes without allocating once
//! its scratch buffers have grown (`tests/ndn_codec.rs` checks the refill
//! against `to_owned`).

use super::data::{KeyLocator, MetaInfo, SignatureInfo};
use super::error::NdnError;
use super::lp::{lp_header_ignorable, Nack, NackReason};
use super::name::{component_type as ct, ComponentRef, NameRef};
use super::tlv::{self, Element, TlvReader};
use super::{tt, Data, Interest, LpPacket, NetPacket, Packet};

/// Place of a known Interest element after Name in the order the owned
/// decoder requires (CanBePrefix, MustBeFresh, ForwardingHint, Nonce,
/// InterestLifetime, HopLimit, ApplicationParameters,
/// InterestSignatureInfo, InterestSignatureValue); `None`: not one.
#[inline]
fn interest_order(t: u32) -> Option<usize> {
    Some(match t {
        tt::CAN_BE_PREFIX => 0,
        tt::MUST_BE_FRESH => 1,
        tt::FORWARDING_HINT => 2,
        tt::NONCE => 3,
        tt::INTEREST_LIFETIME => 4,
        tt::HOP_LIMIT => 5,
        tt::APPLICATION_PARAMETERS => 6,
        tt::INTEREST_SIGNATURE_INFO => 7,
        tt::INTEREST_SIGNATURE_VALUE => 8,
        _ => return None,
    })
}

/// Read the next element and check it is the Name that must come first;
/// `on_type` gets every component's TLV-TYPE.
#[inline]
fn read_leading_name_ref<'a>(
    r: &mut TlvReader<'a>,
    context: &'static str,
    on_type: impl FnMut(u16),
) -> Result<NameRef<'a>, NdnError> {
    match r.peek_type()? {
        Some(tt::NAME) => {
            let e = r.read()?;
            NameRef::from_value_with(e.value, on_type)
        }
        _ => Err(NdnError::Missing {
            context,
            field: "Name (first element)",
        }),
    }
}

/// Handle an element that is unknown or out of place: skip it if it is not
/// critical.
fn unrecognized(typ: u32, known: bool, context: &'static str) -> Result<(), NdnError> {
    if !tlv::is_critical(typ) {
        Ok(())
    } else if known {
        Err(NdnError::OutOfOrder { typ, context })
    } else {
        Err(NdnError::UnknownCritical { typ, context })
    }
}

fn empty_flag(value: &[u8], what: &'static str) -> Result<bool, NdnError> {
    if value.is_empty() {
        Ok(true)
    } else {
        Err(NdnError::Malformed(what))
    }
}

/// A validated Interest over its wire bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterestView<'a> {
    /// The name.
    pub name: NameRef<'a>,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
    /// ForwardingHint's TLV-VALUE (validated: Name elements, at least one,
    /// and non-critical others); see [`Self::forwarding_hint`].
    pub forwarding_hint_value: Option<&'a [u8]>,
    /// Nonce, read big-endian.
    pub nonce: Option<u32>,
    /// InterestLifetime in milliseconds.
    pub lifetime_ms: Option<u64>,
    /// HopLimit.
    pub hop_limit: Option<u8>,
    /// Offset in the parsed buffer of the HopLimit value byte.
    pub hop_limit_at: Option<usize>,
    /// ApplicationParameters' TLV-VALUE.
    pub app_parameters: Option<&'a [u8]>,
    /// Offset in the parsed buffer where the ApplicationParameters element
    /// starts: the parameters digest covers the buffer from there to its
    /// end ([`super::params_digest_ok_wire`]).
    pub params_at: Option<usize>,
    /// InterestSignatureInfo's TLV-VALUE.
    pub signature_info: Option<&'a [u8]>,
    /// InterestSignatureValue's TLV-VALUE.
    pub signature_value: Option<&'a [u8]>,
}

impl<'a> InterestView<'a> {
    /// View a whole Interest element; `wire` must hold exactly it.
    pub fn parse(wire: &'a [u8]) -> Result<Self, NdnError> {
        const CX: &str = "Interest";
        let e = tlv::read_single(wire, tt::INTEREST)?;
        let mut r = TlvReader::with_base(e.value, e.value_at);
        let mut params_digests = 0usize;
        let mut i = InterestView {
            name: read_leading_name_ref(&mut r, CX, |t| {
                params_digests += usize::from(t == ct::PARAMETERS_SHA256_DIGEST)
            })?,
            can_be_prefix: false,
            must_be_fresh: false,
            forwarding_hint_value: None,
            nonce: None,
            lifetime_ms: None,
            hop_limit: None,
            hop_limit_at: None,
            app_parameters: None,
            params_at: None,
            signature_info: None,
            signature_value: None,
        };
        let mut next = 0usize;
        while !r.is_empty() {
            let e = r.read()?;
            let pos = interest_order(e.typ);
            let Some(idx) = pos.filter(|&p| p >= next) else {
                unrecognized(e.typ, pos.is_some() || e.typ == tt::NAME, CX)?;
                continue;
            };
            next = idx + 1;
            match e.typ {
                tt::CAN_BE_PREFIX => {
                    i.can_be_prefix = empty_flag(e.value, "CanBePrefix is not empty")?
                }
                tt::MUST_BE_FRESH => {
                    i.must_be_fresh = empty_flag(e.value, "MustBeFresh is not empty")?
                }
                tt::FORWARDING_HINT => {
                    let mut h = e.reader();
                    let mut names = 0usize;
                    while !h.is_empty() {
                        let d = h.read()?;
                        if d.typ == tt::NAME {
                            NameRef::from_value(d.value)?;
                            names += 1;
                        } else {
                            unrecognized(d.typ, false, "ForwardingHint")?;
                        }
                    }
                    if names == 0 {
                        return Err(NdnError::Malformed("ForwardingHint holds no Name"));
                    }
                    i.forwarding_hint_value = Some(e.value);
                }
                tt::NONCE => {
                    let b: [u8; 4] = e
                        .value
                        .try_into()
                        .map_err(|_| NdnError::Malformed("Nonce is not 4 bytes"))?;
                    i.nonce = Some(u32::from_be_bytes(b));
                }
                tt::INTEREST_LIFETIME => i.lifetime_ms = Some(e.nni()?),
                tt::HOP_LIMIT => match e.value {
                    [h] => {
                        i.hop_limit = Some(*h);
                        i.hop_limit_at = Some(e.value_at);
                    }
                    _ => return Err(NdnError::Malformed("HopLimit is not 1 byte")),
                },
                tt::APPLICATION_PARAMETERS => {
                    i.app_parameters = Some(e.value);
                    i.params_at = Some(e.at);
                }
                tt::INTEREST_SIGNATURE_INFO => i.signature_info = Some(e.value),
                tt::INTEREST_SIGNATURE_VALUE => i.signature_value = Some(e.value),
                _ => {}
            }
        }
        if i.signature_info.is_some() && i.app_parameters.is_none() {
            return Err(NdnError::Malformed(
                "InterestSignatureInfo without ApplicationParameters",
            ));
        }
        if i.signature_info.is_some() != i.signature_value.is_some() {
            return Err(NdnError::Malformed(
                "InterestSignatureInfo and InterestSignatureValue must come together",
            ));
        }
        if params_digests != usize::from(i.app_parameters.is_some()) {
            return Err(NdnError::Malformed(
                "Interest name must hold one ParametersSha256DigestComponent iff it has ApplicationParameters",
            ));
        }
        Ok(i)
    }

    /// The ForwardingHint's delegation names, in order.
    pub fn forwarding_hint(&self) -> impl Iterator<Item = NameRef<'a>> + 'a {
        let mut r = TlvReader::new(self.forwarding_hint_value.unwrap_or(&[]));
        // Validated by `parse`: every read succeeds and every Name is
        // valid; stop rather than panic if not.
        std::iter::from_fn(move || loop {
            let d = r.read().ok()?;
            if d.typ == tt::NAME {
                return NameRef::from_value(d.value).ok();
            }
        })
    }

    /// Refill `out` with this Interest, reusing its name's buffers (no
    /// allocation once they are large enough, unless the Interest has a
    /// ForwardingHint, parameters or a signature).
    pub fn write_into(&self, out: &mut Interest) {
        out.name.assign(self.name);
        out.can_be_prefix = self.can_be_prefix;
        out.must_be_fresh = self.must_be_fresh;
        out.forwarding_hint.clear();
        out.forwarding_hint
            .extend(self.forwarding_hint().map(|n| n.to_name()));
        out.nonce = self.nonce;
        out.lifetime_ms = self.lifetime_ms;
        out.hop_limit = self.hop_limit;
        refill(&mut out.app_parameters, self.app_parameters);
        refill(&mut out.signature_info, self.signature_info);
        refill(&mut out.signature_value, self.signature_value);
    }

    /// The owned Interest ([`Interest::decode`]'s result).
    pub fn to_owned(&self) -> Interest {
        let mut i = Interest::default();
        self.write_into(&mut i);
        i
    }
}

/// Set an optional byte field, reusing its buffer.
fn refill(slot: &mut Option<Vec<u8>>, v: Option<&[u8]>) {
    match (slot.as_mut(), v) {
        (Some(buf), Some(v)) => {
            buf.clear();
            buf.extend_from_slice(v);
        }
        (None, Some(v)) => *slot = Some(v.to_vec()),
        (_, None) => *slot = None,
    }
}

/// A KeyLocator inside a [`DataView`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLocatorRef<'a> {
    /// The name of the key.
    Name(NameRef<'a>),
    /// KeyDigest bytes.
    KeyDigest(&'a [u8]),
}

/// A validated Data over its wire bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataView<'a> {
    /// The name.
    pub name: NameRef<'a>,
    /// Whether the packet holds a MetaInfo element.
    pub has_meta_info: bool,
    /// MetaInfo ContentType.
    pub content_type: Option<u64>,
    /// MetaInfo FreshnessPeriod in milliseconds.
    pub freshness_period_ms: Option<u64>,
    /// MetaInfo FinalBlockId.
    pub final_block_id: Option<ComponentRef<'a>>,
    /// Content's TLV-VALUE (`None`: absent).
    pub content: Option<&'a [u8]>,
    /// SignatureType.
    pub signature_type: u64,
    /// KeyLocator.
    pub key_locator: Option<KeyLocatorRef<'a>>,
    /// The SignatureInfo fields after SignatureType and KeyLocator, as TLV
    /// bytes (validated as TLV, not interpreted).
    pub signature_other: &'a [u8],
    /// SignatureValue's TLV-VALUE.
    pub signature_value: &'a [u8],
    /// The signed portion: Name through SignatureInfo, as bytes of the
    /// parsed buffer.
    pub signed_portion: &'a [u8],
}

impl<'a> DataView<'a> {
    /// View a whole Data element; `wire` must hold exactly it.
    pub fn parse(wire: &'a [u8]) -> Result<Self, NdnError> {
        const CX: &str = "Data";
        const ORDER: [u32; 4] = [
            tt::META_INFO,
            tt::CONTENT,
            tt::SIGNATURE_INFO,
            tt::SIGNATURE_VALUE,
        ];
        let e = tlv::read_single(wire, tt::DATA)?;
        let mut r = e.reader();
        let mut d = DataView {
            name: read_leading_name_ref(&mut r, CX, |_| {})?,
            has_meta_info: false,
            content_type: None,
            freshness_period_ms: None,
            final_block_id: None,
            content: None,
            signature_type: 0,
            key_locator: None,
            signature_other: &[],
            signature_value: &[],
            signed_portion: &[],
        };
        let mut next = 0;
        let mut signed_end = None;
        let mut have_value = false;
        while !r.is_empty() {
            let f = r.read()?;
            let pos = ORDER.iter().position(|&t| t == f.typ);
            let Some(idx) = pos.filter(|&p| p >= next) else {
                unrecognized(f.typ, pos.is_some() || f.typ == tt::NAME, CX)?;
                continue;
            };
            next = idx + 1;
            match f.typ {
                tt::META_INFO => d.meta_info(&f)?,
                tt::CONTENT => d.content = Some(f.value),
                tt::SIGNATURE_INFO => {
                    d.signature_info(&f)?;
                    signed_end = Some(f.at + f.tlv.len() - e.value_at);
                }
                _ => {
                    d.signature_value = f.value;
                    have_value = true;
                }
            }
        }
        let Some(signed_end) = signed_end else {
            return Err(NdnError::Missing {
                context: CX,
                field: "SignatureInfo",
            });
        };
        if !have_value {
            return Err(NdnError::Missing {
                context: CX,
                field: "SignatureValue",
            });
        }
        d.signed_portion = e.value.get(..signed_end).unwrap_or(e.value);
        Ok(d)
    }

    fn meta_info(&mut self, e: &Element<'a>) -> Result<(), NdnError> {
        const CX: &str = "MetaInfo";
        const ORDER: [u32; 3] = [tt::CONTENT_TYPE, tt::FRESHNESS_PERIOD, tt::FINAL_BLOCK_ID];
        // A repeated MetaInfo is out of order, so this runs at most once.
        self.has_meta_info = true;
        let mut r = e.reader();
        let mut next = 0;
        while !r.is_empty() {
            let f = r.read()?;
            let pos = ORDER.iter().position(|&t| t == f.typ);
            let Some(idx) = pos.filter(|&p| p >= next) else {
                unrecognized(f.typ, pos.is_some(), CX)?;
                continue;
            };
            next = idx + 1;
            match f.typ {
                tt::CONTENT_TYPE => self.content_type = Some(f.nni()?),
                tt::FRESHNESS_PERIOD => self.freshness_period_ms = Some(f.nni()?),
                _ => {
                    let mut c = f.reader();
                    let comp = c.read()?;
                    c.finish()?;
                    u16::try_from(comp.typ).map_err(|_| {
                        NdnError::Malformed("FinalBlockId component type above 65535")
                    })?;
                    // The owned decoder's check (digest components hold 32
                    // bytes) on the component TLV, without a copy.
                    self.final_block_id = NameRef::from_value(comp.tlv)?.components().next();
                }
            }
        }
        Ok(())
    }

    fn signature_info(&mut self, e: &Element<'a>) -> Result<(), NdnError> {
        let mut r = e.reader();
        let Some(t) = r.read_if(tt::SIGNATURE_TYPE)? else {
            return Err(NdnError::Missing {
                context: "SignatureInfo",
                field: "SignatureType (first element)",
            });
        };
        self.signature_type = t.nni()?;
        if let Some(k) = r.read_if(tt::KEY_LOCATOR)? {
            let mut kr = k.reader();
            let inner = kr.read()?;
            kr.finish()?;
            self.key_locator = Some(match inner.typ {
                tt::NAME => KeyLocatorRef::Name(NameRef::from_value(inner.value)?),
                tt::KEY_DIGEST => KeyLocatorRef::KeyDigest(inner.value),
                t => {
                    return Err(NdnError::UnknownCritical {
                        typ: t,
                        context: "KeyLocator",
                    })
                }
            });
        }
        let rest = r.remaining();
        let mut check = TlvReader::with_base(rest, r.position());
        while !check.is_empty() {
            check.read()?;
        }
        self.signature_other = rest;
        Ok(())
    }

    /// The owned Data ([`Data::decode`]'s result).
    pub fn to_owned(&self) -> Data {
        let meta_info = MetaInfo {
            content_type: self.content_type,
            freshness_period_ms: self.freshness_period_ms,
            final_block_id: self.final_block_id.map(|c| c.to_owned()),
            keep_empty: self.has_meta_info
                && self.content_type.is_none()
                && self.freshness_period_ms.is_none()
                && self.final_block_id.is_none(),
        };
        Data {
            name: self.name.to_name(),
            meta_info,
            content: self.content.map(<[u8]>::to_vec),
            signature_info: SignatureInfo {
                signature_type: self.signature_type,
                key_locator: self.key_locator.map(|k| match k {
                    KeyLocatorRef::Name(n) => KeyLocator::Name(n.to_name()),
                    KeyLocatorRef::KeyDigest(d) => KeyLocator::KeyDigest(d.to_vec()),
                }),
                other: self.signature_other.to_vec(),
            },
            signature_value: self.signature_value.to_vec(),
        }
    }
}

/// A validated NDNLPv2 LpPacket over its wire bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LpView<'a> {
    /// Sequence.
    pub sequence: Option<u64>,
    /// FragIndex.
    pub frag_index: Option<u64>,
    /// FragCount.
    pub frag_count: Option<u64>,
    /// PitToken (1 to 32 bytes).
    pub pit_token: Option<&'a [u8]>,
    /// Nack.
    pub nack: Option<Nack>,
    /// IncomingFaceId.
    pub incoming_face_id: Option<u64>,
    /// NextHopFaceId.
    pub next_hop_face_id: Option<u64>,
    /// CachePolicy's TLV-VALUE.
    pub cache_policy: Option<&'a [u8]>,
    /// CongestionMark.
    pub congestion_mark: Option<u64>,
    /// TxSequence.
    pub tx_sequence: Option<u64>,
    /// NonDiscovery.
    pub non_discovery: bool,
    /// PrefixAnnouncement's TLV-VALUE.
    pub prefix_announcement: Option<&'a [u8]>,
    /// Fragment's TLV-VALUE.
    pub fragment: Option<&'a [u8]>,
    /// The LpPacket's TLV-VALUE (what [`Self::acks`] reads).
    value: &'a [u8],
}

fn fixed_u64(e: &Element<'_>, what: &'static str) -> Result<u64, NdnError> {
    let b: [u8; 8] = e.value.try_into().map_err(|_| NdnError::Malformed(what))?;
    Ok(u64::from_be_bytes(b))
}

fn set_once<T>(slot: &mut Option<T>, v: T, typ: u32) -> Result<(), NdnError> {
    if slot.is_some() {
        return Err(NdnError::OutOfOrder {
            typ,
            context: "LpPacket",
        });
    }
    *slot = Some(v);
    Ok(())
}

impl<'a> LpView<'a> {
    /// View a whole LpPacket element; `wire` must hold exactly it.
    pub fn parse(wire: &'a [u8]) -> Result<Self, NdnError> {
        const CX: &str = "LpPacket";
        let e = tlv::read_single(wire, tt::LP_PACKET)?;
        let mut r = e.reader();
        let mut p = LpView {
            value: e.value,
            ..LpView::default()
        };
        while !r.is_empty() {
            let f = r.read()?;
            if p.fragment.is_some() {
                return Err(NdnError::Malformed("LpPacket field after Fragment"));
            }
            match f.typ {
                tt::FRAGMENT => p.fragment = Some(f.value),
                tt::SEQUENCE => set_once(
                    &mut p.sequence,
                    fixed_u64(&f, "Sequence is not 8 bytes")?,
                    f.typ,
                )?,
                tt::FRAG_INDEX => set_once(&mut p.frag_index, f.nni()?, f.typ)?,
                tt::FRAG_COUNT => set_once(&mut p.frag_count, f.nni()?, f.typ)?,
                tt::PIT_TOKEN => {
                    if f.value.is_empty() || f.value.len() > 32 {
                        return Err(NdnError::Malformed("PitToken is not 1 to 32 bytes"));
                    }
                    set_once(&mut p.pit_token, f.value, f.typ)?
                }
                tt::NACK => {
                    let mut nr = f.reader();
                    let mut nack = Nack::default();
                    while !nr.is_empty() {
                        let x = nr.read()?;
                        if x.typ == tt::NACK_REASON && nack.reason.is_none() {
                            nack.reason = Some(NackReason::from_code(x.nni()?));
                        } else if tlv::is_critical(x.typ) {
                            return Err(NdnError::UnknownCritical {
                                typ: x.typ,
                                context: "Nack",
                            });
                        }
                    }
                    set_once(&mut p.nack, nack, f.typ)?
                }
                tt::INCOMING_FACE_ID => set_once(&mut p.incoming_face_id, f.nni()?, f.typ)?,
                tt::NEXT_HOP_FACE_ID => set_once(&mut p.next_hop_face_id, f.nni()?, f.typ)?,
                tt::CACHE_POLICY => set_once(&mut p.cache_policy, f.value, f.typ)?,
                tt::CONGESTION_MARK => set_once(&mut p.congestion_mark, f.nni()?, f.typ)?,
                tt::ACK => {
                    fixed_u64(&f, "Ack is not 8 bytes")?;
                }
                tt::TX_SEQUENCE => set_once(
                    &mut p.tx_sequence,
                    fixed_u64(&f, "TxSequence is not 8 bytes")?,
                    f.typ,
                )?,
                tt::NON_DISCOVERY => {
                    if p.non_discovery || !f.value.is_empty() {
                        return Err(NdnError::Malformed("NonDiscovery repeated or not empty"));
                    }
                    p.non_discovery = true;
                }
                tt::PREFIX_ANNOUNCEMENT => set_once(&mut p.prefix_announcement, f.value, f.typ)?,
                t if lp_header_ignorable(t) => {}
                t => {
                    return Err(NdnError::UnknownCritical {
                        typ: t,
                        context: CX,
                    })
                }
            }
        }
        if let (Some(i), Some(c)) = (p.frag_index, p.frag_count) {
            if i >= c {
                return Err(NdnError::Malformed("FragIndex is not below FragCount"));
            }
        }
        Ok(p)
    }

    /// The Acks, in order.
    pub fn acks(&self) -> impl Iterator<Item = u64> + 'a {
        let mut r = TlvReader::new(self.value);
        // Validated by `parse`; stop rather than panic if not.
        std::iter::from_fn(move || loop {
            let f = r.read().ok()?;
            if f.typ == tt::ACK {
                return fixed_u64(&f, "Ack is not 8 bytes").ok();
            }
        })
    }

    /// Whether the Fragment is a whole network-layer packet (no
    /// fragmentation, or FragCount 1), as [`LpPacket::is_whole`].
    pub fn is_whole(&self) -> bool {
        matches!(self.frag_count, None | Some(1))
    }

    /// The owned LpPacket ([`LpPacket::decode`]'s result).
    pub fn to_owned(&self) -> LpPacket {
        LpPacket {
            sequence: self.sequence,
            frag_index: self.frag_index,
            frag_count: self.frag_count,
            pit_token: self.pit_token.map(<[u8]>::to_vec),
            nack: self.nack,
            incoming_face_id: self.incoming_face_id,
            next_hop_face_id: self.next_hop_face_id,
            cache_policy: self.cache_policy.map(<[u8]>::to_vec),
            congestion_mark: self.congestion_mark,
            acks: self.acks().collect(),
            tx_sequence: self.tx_sequence,
            non_discovery: self.non_discovery,
            prefix_announcement: self.prefix_announcement.map(<[u8]>::to_vec),
            fragment: self.fragment.map(<[u8]>::to_vec),
        }
    }
}

/// A network-layer packet, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetPacketView<'a> {
    /// An Interest.
    Interest(InterestView<'a>),
    /// A Data.
    Data(DataView<'a>),
}

impl<'a> NetPacketView<'a> {
    /// View an Interest or Data element ([`NetPacket::decode`]'s rules).
    #[inline]
    pub fn parse(wire: &'a [u8]) -> Result<Self, NdnError> {
        match TlvReader::new(wire).peek_type()? {
            Some(tt::INTEREST) => InterestView::parse(wire).map(NetPacketView::Interest),
            Some(tt::DATA) => DataView::parse(wire).map(NetPacketView::Data),
            Some(t) => Err(NdnError::UnexpectedType {
                expected: tt::INTEREST,
                found: t,
            }),
            None => Err(NdnError::Truncated { needed: 1, got: 0 }),
        }
    }
    /// The owned packet.
    pub fn to_owned(&self) -> NetPacket {
        match self {
            NetPacketView::Interest(i) => NetPacket::Interest(i.to_owned()),
            NetPacketView::Data(d) => NetPacket::Data(d.to_owned()),
        }
    }
}

/// Any packet a face can receive, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketView<'a> {
    /// A bare Interest.
    Interest(InterestView<'a>),
    /// A bare Data.
    Data(DataView<'a>),
    /// An NDNLPv2 LpPacket.
    Lp(LpView<'a>),
}

impl<'a> PacketView<'a> {
    /// View by the outer TLV-TYPE ([`Packet::decode`]'s rules).
    #[inline]
    pub fn parse(wire: &'a [u8]) -> Result<Self, NdnError> {
        match TlvReader::new(wire).peek_type()? {
            Some(tt::LP_PACKET) => LpView::parse(wire).map(PacketView::Lp),
            Some(tt::INTEREST) => InterestView::parse(wire).map(PacketView::Interest),
            Some(tt::DATA) => DataView::parse(wire).map(PacketView::Data),
            Some(t) => Err(NdnError::UnknownCritical {
                typ: t,
                context: "packet",
            }),
            None => Err(NdnError::Truncated { needed: 1, got: 0 }),
        }
    }
    /// The owned packet.
    pub fn to_owned(&self) -> Packet {
        match self {
            PacketView::Interest(i) => Packet::Interest(i.to_owned()),
            PacketView::Data(d) => Packet::Data(d.to_owned()),
            PacketView::Lp(l) => Packet::Lp(l.to_owned()),
        }
    }
}
