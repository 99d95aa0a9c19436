//! NDNLPv2 reassembly, bounded in memory and time.

use std::collections::HashMap;

use nexthop_ndn::pit::{FaceId, Millis};
use nexthop_wire::ndn::LpPacket;

use crate::config::MAX_PACKET;

/// Most fragments of one packet.
pub const MAX_FRAGMENTS: u64 = 64;

/// Reassembly counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReasmCounters {
    /// Packets completed from fragments.
    pub completed: u64,
    /// Fragments dropped: no Sequence, FragIndex >= FragCount, FragCount
    /// over [`MAX_FRAGMENTS`], a duplicate or inconsistent piece, or a
    /// packet over [`MAX_PACKET`].
    pub bad: u64,
    /// Partial packets dropped because the partial-packet cap was reached.
    pub cap_drops: u64,
    /// Partial packets dropped at their timeout.
    pub timeouts: u64,
}

#[derive(Debug)]
struct Partial {
    count: u64,
    pieces: Vec<Option<Vec<u8>>>,
    have: u64,
    bytes: usize,
    first: Option<LpPacket>,
    born: Millis,
}

/// Partial packets keyed by face and the Sequence of their first fragment.
#[derive(Debug)]
pub struct Reassembler {
    max_partial: usize,
    timeout: Millis,
    partial: HashMap<(FaceId, u64), Partial>,
    /// Counters.
    pub counters: ReasmCounters,
}

impl Reassembler {
    /// Empty, with at most `max_partial` partial packets, each living at
    /// most `timeout` ms.
    pub fn new(max_partial: usize, timeout: Millis) -> Reassembler {
        Reassembler {
            max_partial,
            timeout,
            partial: HashMap::new(),
            counters: ReasmCounters::default(),
        }
    }

    /// Partial packets held.
    pub fn len(&self) -> usize {
        self.partial.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.partial.is_empty()
    }

    /// Take one fragment (`frag_count > 1`). Returns the whole LpPacket
    /// (the first fragment's headers with the reassembled Fragment) once
    /// every piece arrived.
    pub fn push(&mut self, face: FaceId, mut lp: LpPacket, now: Millis) -> Option<LpPacket> {
        let count = lp.frag_count.unwrap_or(1);
        let index = lp.frag_index.unwrap_or(0);
        let (Some(seq), Some(frag)) = (lp.sequence, lp.fragment.take()) else {
            self.counters.bad += 1;
            return None;
        };
        if count > MAX_FRAGMENTS || index >= count || seq < index {
            self.counters.bad += 1;
            return None;
        }
        let key = (face, seq - index);
        if !self.partial.contains_key(&key) {
            self.expire(now);
            if self.partial.len() >= self.max_partial {
                self.counters.cap_drops += 1;
                return None;
            }
            self.partial.insert(
                key,
                Partial {
                    count,
                    pieces: vec![None; count as usize],
                    have: 0,
                    bytes: 0,
                    first: None,
                    born: now,
                },
            );
        }
        let p = self.partial.get_mut(&key)?;
        let slot = p.pieces.get_mut(index as usize);
        let ok = p.count == count && p.bytes + frag.len() <= MAX_PACKET + 64;
        match slot {
            Some(s @ None) if ok => {
                p.bytes += frag.len();
                *s = Some(frag);
                p.have += 1;
            }
            _ => {
                self.counters.bad += 1;
                self.partial.remove(&key);
                return None;
            }
        }
        if index == 0 {
            p.first = Some(lp);
        }
        if p.have < p.count {
            return None;
        }
        let p = self.partial.remove(&key)?;
        let mut whole = Vec::with_capacity(p.bytes);
        for piece in p.pieces.into_iter().flatten() {
            whole.extend_from_slice(&piece);
        }
        let first = p.first.unwrap_or_default();
        self.counters.completed += 1;
        // The first fragment's headers (PitToken, Nack, NextHopFaceId, ...).
        Some(LpPacket {
            sequence: None,
            frag_index: None,
            frag_count: None,
            fragment: Some(whole),
            ..first
        })
    }

    /// Drop the partial packets older than the timeout.
    pub fn expire(&mut self, now: Millis) {
        let timeout = self.timeout;
        let before = self.partial.len();
        self.partial
            .retain(|_, p| now.saturating_sub(p.born) < timeout);
        self.counters.timeouts += (before - self.partial.len()) as u64;
    }

    /// Forget the partial packets of a closed face.
    pub fn face_closed(&mut self, face: FaceId) {
        self.partial.retain(|k, _| k.0 != face);
    }
}
