//! NDNLPv2 fragmentation on send (datagram faces): a packet larger than
//! the face's MTU goes out as LpPackets with consecutive Sequence numbers,
//! FragIndex and FragCount, the NDNLPv2 headers (PitToken, Nack,
//! IncomingFaceId, ...) on the first fragment only, as NFD's
//! `LpFragmenter` does. [`crate::reasm::Reassembler`] (and NFD,
//! python-ndn) put them back together.

use nexthop_wire::ndn::{tt, LpPacket};

use crate::reasm::MAX_FRAGMENTS;

/// Smallest MTU accepted: a largest packet (8800 bytes) still fits in
/// [`MAX_FRAGMENTS`] fragments.
pub const MIN_MTU: usize = 256;

/// Bytes of an LpPacket around a fragment's piece besides the headers:
/// LpPacket TL (4), Sequence (10), FragIndex (4), FragCount (4),
/// Fragment TL (4), with room to spare.
const OVERHEAD: usize = 32;

/// A per-face Sequence counter and the fragmenter.
#[derive(Debug, Clone, Default)]
pub struct Fragmenter {
    next_seq: u64,
    /// Packets sent as fragments.
    pub fragmented: u64,
    /// Packets that could not be fragmented (more than [`MAX_FRAGMENTS`]
    /// pieces, or an LpPacket that does not decode), dropped.
    pub failed: u64,
}

impl Fragmenter {
    /// A fragmenter whose first Sequence is `seed`.
    pub fn new(seed: u64) -> Fragmenter {
        Fragmenter {
            next_seq: seed,
            ..Fragmenter::default()
        }
    }

    /// `packet` (a bare network packet or a whole LpPacket) as the
    /// datagrams to send under `mtu`: itself when it fits, else its
    /// fragments; none when it cannot be fragmented.
    pub fn fragment(&mut self, packet: Vec<u8>, mtu: usize) -> Vec<Vec<u8>> {
        if packet.len() <= mtu {
            return vec![packet];
        }
        let (mut headers, payload) = if packet.first() == Some(&(tt::LP_PACKET as u8)) {
            match LpPacket::decode(&packet) {
                Ok(mut lp) if lp.frag_count.unwrap_or(1) <= 1 => match lp.fragment.take() {
                    Some(f) => (lp, f),
                    None => {
                        self.failed += 1;
                        return Vec::new();
                    }
                },
                _ => {
                    self.failed += 1;
                    return Vec::new();
                }
            }
        } else {
            (LpPacket::default(), packet)
        };
        let header_len = LpPacket {
            fragment: Some(Vec::new()),
            ..headers.clone()
        }
        .to_wire()
        .len();
        let Some(room) = mtu.checked_sub(OVERHEAD + header_len).filter(|&r| r >= 64) else {
            self.failed += 1;
            return Vec::new();
        };
        let count = payload.len().div_ceil(room) as u64;
        if count > MAX_FRAGMENTS {
            self.failed += 1;
            return Vec::new();
        }
        self.fragmented += 1;
        let base = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(count);
        payload
            .chunks(room)
            .enumerate()
            .map(|(i, piece)| {
                let h = if i == 0 {
                    std::mem::take(&mut headers)
                } else {
                    LpPacket::default()
                };
                LpPacket {
                    sequence: Some(base.wrapping_add(i as u64)),
                    frag_index: Some(i as u64),
                    frag_count: Some(count),
                    fragment: Some(piece.to_vec()),
                    ..h
                }
                .to_wire()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reasm::Reassembler;
    use nexthop_wire::ndn::{Data, Name};

    fn big_data(len: usize) -> Vec<u8> {
        let mut d = Data::new(Name::from_uri("/big/1").unwrap(), vec![0xab; len]);
        d.sign_digest_sha256();
        d.to_wire()
    }

    #[test]
    fn fragments_fit_the_mtu_and_reassemble_with_the_first_headers() {
        let whole = big_data(8000);
        let lp = LpPacket {
            pit_token: Some(vec![1, 2, 3]),
            incoming_face_id: Some(9),
            ..LpPacket::wrap(whole.clone())
        }
        .to_wire();
        let mut f = Fragmenter::new(1000);
        let frags = f.fragment(lp, 1400);
        assert!(frags.len() >= 6, "{}", frags.len());
        assert!(frags.iter().all(|x| x.len() <= 1400));
        let mut r = Reassembler::new(4, 1000);
        let mut done = None;
        for (i, x) in frags.iter().enumerate().rev() {
            let p = LpPacket::decode(x).unwrap();
            assert_eq!(p.sequence, Some(1000 + i as u64));
            assert_eq!(p.pit_token.is_some(), i == 0, "headers on the first only");
            done = r.push(7, p, 0).or(done);
        }
        let done = done.expect("reassembled");
        assert_eq!(done.fragment.as_deref(), Some(whole.as_slice()));
        assert_eq!(done.pit_token, Some(vec![1, 2, 3]));
        assert_eq!(done.incoming_face_id, Some(9));
        // The next packet continues the Sequence.
        let next = f.fragment(big_data(3000), 1400);
        assert_eq!(
            LpPacket::decode(&next[0]).unwrap().sequence,
            Some(1000 + frags.len() as u64)
        );
        assert_eq!(f.fragmented, 2);
    }

    #[test]
    fn small_packets_pass_and_impossible_ones_are_counted() {
        let mut f = Fragmenter::new(0);
        let small = big_data(100);
        assert_eq!(f.fragment(small.clone(), 1400), vec![small]);
        assert!(f.fragment(big_data(8000), 100).is_empty(), "MTU too small");
        assert!(f.fragment(vec![100, 3, 1, 2], 2).is_empty(), "bad LpPacket");
        assert_eq!(f.failed, 2);
        assert_eq!(f.fragmented, 0);
    }
}
