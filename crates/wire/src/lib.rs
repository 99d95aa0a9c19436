//! Packet formats for nexthop's forwarders: checked, zero-copy views over
//! untrusted bytes.
//!
//! Each header type follows the same two-step shape (after smoltcp's
//! `src/wire/`):
//!
//! * a **checked view** (`EthernetFrame::new_checked`, `Ipv4Packet::new_checked`,
//!   ...) validates every length the accessors rely on once, so that no
//!   accessor can panic or read past the buffer afterwards;
//! * where building headers is useful, a **`Repr`** with `parse`, `emit` and
//!   `buffer_len` ([`EthernetRepr`]).
//!
//! Field offsets live in a private `mod field` of each module as
//! `Range<usize>` constants. Errors are the typed [`WireError`]: how many
//! bytes were needed and how many there were, or which field was malformed.
//!
//! | format | view | notes |
//! | --- | --- | --- |
//! | Ethernet II | [`EthernetFrame`] | up to two VLAN tags (802.1Q `0x8100`, 802.1ad `0x88a8`, legacy `0x9100`) |
//! | IPv4 | [`Ipv4Packet`] | options skipped via IHL, payload trimmed to the total length |
//! | IPv6 | [`Ipv6Packet`] | extension headers walked by [`Ipv6Packet::upper_layer`] |
//! | TCP | [`TcpSegment`] | data offset checked |
//! | UDP | [`UdpDatagram`] | length field checked |
//! | flow keys | [`five_tuple`], [`five_tuple_v6`] | canonical byte forms for flat-name lookups |
//! | little-endian files and messages | [`cursor::Reader`], [`cursor::Writer`] | the Othello, LPM and NDN FIB files, control messages |
//! | NDN v0.3 / NDNLPv2 | [`ndn`] | TLV codec, [`Name`] with cached prefix hashes, Interest, Data, LpPacket |
//!
//! Apart from the owned NDN types ([`ndn`]), nothing here allocates, and
//! nothing here uses `unsafe`.
#![forbid(unsafe_code)]

pub mod cursor;
mod error;
pub mod ethernet;
pub mod flow;
pub mod ip;
pub mod l4;
mod mac;
pub mod ndn;

pub use error::WireError;
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, VlanTag, MAX_VLAN_TAGS};
pub use flow::{five_tuple, five_tuple_v6, FIVE_TUPLE_LEN, FIVE_TUPLE_V6_LEN};
pub use ip::{IpProtocol, Ipv4Packet, Ipv6Packet, UpperLayer};
pub use l4::{TcpSegment, UdpDatagram};
pub use mac::{MacAddr, ParseMacError};
pub use ndn::{Name, NameComponent, NameRef, NdnError};

/// Read a big-endian `u16` at `at`, if the two bytes are there.
#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> Option<u16> {
    match b.get(at..at.checked_add(2)?) {
        Some(&[hi, lo]) => Some(u16::from_be_bytes([hi, lo])),
        _ => None,
    }
}
