//! Framing NDN packets on a byte stream (TCP and Unix faces, and the
//! clients that talk to them): each packet is one TLV, its length read
//! from its header.

use nexthop_wire::ndn::tlv::read_var_number;

use crate::config::MAX_PACKET;

/// The length of the TLV at the start of `buf` once its header (type and
/// length) is whole, whether or not its value has arrived yet; `Ok(None)`
/// while the header is incomplete; `Err(total)` when it claims more than
/// [`MAX_PACKET`] bytes (a stream cannot be resynchronised after it).
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, u64> {
    let Ok((_, tl)) = read_var_number(buf, 0) else {
        return Ok(None);
    };
    let Ok((len, ll)) = read_var_number(buf, tl) else {
        return Ok(None);
    };
    let total = (tl + ll) as u64 + len;
    if total > MAX_PACKET as u64 {
        return Err(total);
    }
    Ok(Some(total as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_come_from_whole_headers_and_oversized_claims_are_refused() {
        // Type 5, length 3: a 5-byte packet, known from its 2-byte header.
        assert_eq!(frame_len(&[]), Ok(None));
        assert_eq!(frame_len(&[0x05]), Ok(None));
        assert_eq!(frame_len(&[0x05, 0x03]), Ok(Some(5)));
        assert_eq!(frame_len(&[0x05, 0x03, 1, 2, 3, 9]), Ok(Some(5)));
        // A 3-byte length (0xFD) cut after its first byte.
        assert_eq!(frame_len(&[0x06, 0xFD, 0x01]), Ok(None));
        assert_eq!(frame_len(&[0x06, 0xFD, 0x01, 0x00]), Ok(Some(260)));
        // 1 MiB claimed.
        assert_eq!(
            frame_len(&[0x05, 0xFE, 0x00, 0x10, 0x00, 0x00]),
            Err(6 + (1 << 20))
        );
        let at_cap = (MAX_PACKET - 4) as u16;
        let mut h = vec![0x05, 0xFD];
        h.extend(at_cap.to_be_bytes());
        assert_eq!(frame_len(&h), Ok(Some(MAX_PACKET)));
    }
}
