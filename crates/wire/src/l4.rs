//! TCP and UDP headers: enough to read ports and find the payload.

use std::fmt;

use crate::error::WireError;

mod tcp {
    use std::ops::Range;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    /// Data offset (high nibble) and the NS flag.
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
    pub const MIN_HEADER_LEN: usize = URGENT.end;
}

/// A checked view of a TCP segment.
#[derive(Clone, Copy)]
pub struct TcpSegment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpSegment<T> {
    /// View `buffer` as a TCP segment.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when the buffer ends before the header
    /// (options included); [`WireError::Malformed`] for a data offset
    /// below 5.
    pub fn new_checked(buffer: T) -> Result<TcpSegment<T>, WireError> {
        let b = buffer.as_ref();
        WireError::need(b, tcp::MIN_HEADER_LEN)?;
        let hl = (b[tcp::DATA_OFF] >> 4) as usize * 4;
        if hl < tcp::MIN_HEADER_LEN {
            return Err(WireError::Malformed("TCP: data offset below 5 (20 bytes)"));
        }
        WireError::need(b, hl)?;
        Ok(TcpSegment { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = self.b();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = self.b();
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(tcp::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(tcp::DST_PORT.start)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        self.u32_at(tcp::SEQ.start)
    }

    /// Acknowledgement number.
    pub fn ack(&self) -> u32 {
        self.u32_at(tcp::ACK.start)
    }

    /// Flags byte: FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10,
    /// URG 0x20, ECE 0x40, CWR 0x80.
    pub fn flags(&self) -> u8 {
        self.b()[tcp::FLAGS]
    }

    /// Receive window.
    pub fn window(&self) -> u16 {
        self.u16_at(tcp::WINDOW.start)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(tcp::CHECKSUM.start)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        (self.b()[tcp::DATA_OFF] >> 4) as usize * 4
    }

    /// Bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for TcpSegment<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpSegment")
            .field("src_port", &self.src_port())
            .field("dst_port", &self.dst_port())
            .field("flags", &format_args!("{:#04x}", self.flags()))
            .finish()
    }
}

mod udp {
    use std::ops::Range;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const HEADER_LEN: usize = CHECKSUM.end;
}

/// A checked view of a UDP datagram.
#[derive(Clone, Copy)]
pub struct UdpDatagram<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    /// View `buffer` as a UDP datagram.
    ///
    /// # Errors
    /// [`WireError::Truncated`] when the buffer ends before the header or
    /// before the length field says; [`WireError::Malformed`] for a length
    /// below 8.
    pub fn new_checked(buffer: T) -> Result<UdpDatagram<T>, WireError> {
        let b = buffer.as_ref();
        WireError::need(b, udp::HEADER_LEN)?;
        let len = crate::be16(b, udp::LENGTH.start).unwrap_or(0) as usize;
        if len < udp::HEADER_LEN {
            return Err(WireError::Malformed("UDP: length below 8"));
        }
        WireError::need(b, len)?;
        Ok(UdpDatagram { buffer })
    }

    fn u16_at(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(udp::SRC_PORT.start)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(udp::DST_PORT.start)
    }

    /// Length field (header and payload).
    pub fn len(&self) -> usize {
        self.u16_at(udp::LENGTH.start) as usize
    }

    /// Whether the datagram carries no payload.
    pub fn is_empty(&self) -> bool {
        self.len() == udp::HEADER_LEN
    }

    /// Checksum field (0: none, over IPv4).
    pub fn checksum(&self) -> u16 {
        self.u16_at(udp::CHECKSUM.start)
    }

    /// Bytes after the header, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[udp::HEADER_LEN..self.len()]
    }
}

impl<T: AsRef<[u8]>> fmt::Debug for UdpDatagram<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpDatagram")
            .field("src_port", &self.src_port())
            .field("dst_port", &self.dst_port())
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 443 -> 51000, seq 1, ack 2, data offset 6 (4 option bytes), SYN+ACK,
    /// then 3 payload bytes.
    const TCP_SYNACK: [u8; 27] = [
        0x01, 0xbb, 0xc7, 0x38, // ports
        0, 0, 0, 1, // seq
        0, 0, 0, 2, // ack
        0x60, 0x12, 0xff, 0xff, // data offset 6, SYN|ACK, window
        0x12, 0x34, 0x00, 0x00, // checksum, urgent
        0x02, 0x04, 0x05, 0xb4, // MSS option
        b'a', b'b', b'c',
    ];

    #[test]
    fn tcp_fields_options_and_payload() {
        let t = TcpSegment::new_checked(&TCP_SYNACK[..]).unwrap();
        assert_eq!(t.src_port(), 443);
        assert_eq!(t.dst_port(), 51000);
        assert_eq!(t.seq(), 1);
        assert_eq!(t.ack(), 2);
        assert_eq!(t.flags(), 0x12);
        assert_eq!(t.window(), 0xffff);
        assert_eq!(t.checksum(), 0x1234);
        assert_eq!(t.header_len(), 24);
        assert_eq!(t.payload(), b"abc");
    }

    #[test]
    fn tcp_rejects_short_headers_and_small_data_offsets() {
        assert_eq!(
            TcpSegment::new_checked(&TCP_SYNACK[..19]).unwrap_err(),
            WireError::Truncated {
                needed: 20,
                got: 19
            }
        );
        assert_eq!(
            TcpSegment::new_checked(&TCP_SYNACK[..23]).unwrap_err(),
            WireError::Truncated {
                needed: 24,
                got: 23
            }
        );
        let mut b = TCP_SYNACK;
        b[12] = 0x40;
        assert!(matches!(
            TcpSegment::new_checked(&b[..]),
            Err(WireError::Malformed(_))
        ));
    }

    /// 53 -> 33000, length 10, checksum 0, 2 payload bytes, 1 padding byte.
    const UDP_DNS: [u8; 11] = [
        0x00, 0x35, 0x80, 0xe8, 0x00, 0x0a, 0x00, 0x00, 0xab, 0xcd, 0xee,
    ];

    #[test]
    fn udp_fields_and_payload_up_to_the_length_field() {
        let u = UdpDatagram::new_checked(&UDP_DNS[..]).unwrap();
        assert_eq!(u.src_port(), 53);
        assert_eq!(u.dst_port(), 33000);
        assert_eq!(u.len(), 10);
        assert!(!u.is_empty());
        assert_eq!(u.checksum(), 0);
        assert_eq!(u.payload(), &[0xab, 0xcd]);
    }

    #[test]
    fn udp_rejects_short_buffers_and_bad_lengths() {
        assert_eq!(
            UdpDatagram::new_checked(&UDP_DNS[..7]).unwrap_err(),
            WireError::Truncated { needed: 8, got: 7 }
        );
        assert_eq!(
            UdpDatagram::new_checked(&UDP_DNS[..9]).unwrap_err(),
            WireError::Truncated { needed: 10, got: 9 }
        );
        let mut b = UDP_DNS;
        b[5] = 7;
        assert_eq!(
            UdpDatagram::new_checked(&b[..]).unwrap_err(),
            WireError::Malformed("UDP: length below 8")
        );
    }
}
