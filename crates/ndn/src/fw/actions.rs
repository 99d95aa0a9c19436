//! What one call of the forwarder asks its caller to do.

use nexthop_wire::ndn::{LpWrap, Nack, NackReason};

use super::DropReason;
use crate::pit::{FaceId, PitToken};

/// What an [`Action`] sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionKind {
    /// An Interest.
    Interest,
    /// A Data.
    Data,
    /// A Nack with this reason; the packet is the Interest it refuses.
    Nack(NackReason),
}

/// Send a network-layer packet on a face.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    /// The face.
    pub face: FaceId,
    /// What it is.
    pub kind: ActionKind,
    /// The PitToken to put in the LpPacket (`None`: no token).
    pub token: Option<PitToken>,
    start: u32,
    end: u32,
}

/// The output of one call: packets to send (their bytes in one buffer
/// reused across calls) and the drops. Clear it between calls or let
/// actions accumulate over a batch.
#[derive(Clone, Debug, Default)]
pub struct Actions {
    list: Vec<Action>,
    bytes: Vec<u8>,
    drops: Vec<(FaceId, DropReason)>,
}

impl Actions {
    /// Empty.
    pub fn new() -> Actions {
        Actions::default()
    }
    /// Forget every action and drop, keeping the buffers.
    pub fn clear(&mut self) {
        self.list.clear();
        self.bytes.clear();
        self.drops.clear();
    }
    /// The sends, in order.
    pub fn sends(&self) -> &[Action] {
        &self.list
    }
    /// The drops `(incoming face, reason)`, in order.
    pub fn drops(&self) -> &[(FaceId, DropReason)] {
        &self.drops
    }
    /// The encoded Interest or Data of `a` (for a Nack: the Interest).
    pub fn packet(&self, a: &Action) -> &[u8] {
        self.bytes
            .get(a.start as usize..a.end as usize)
            .unwrap_or(&[])
    }
    /// `a` as a whole NDNLPv2 LpPacket (PitToken and Nack header set), or
    /// the bare packet when it needs neither.
    pub fn to_wire(&self, a: &Action) -> Vec<u8> {
        let p = self.packet(a);
        let nack = match a.kind {
            ActionKind::Nack(r) => Some(Nack { reason: Some(r) }),
            _ => None,
        };
        if a.token.is_none() && nack.is_none() {
            return p.to_vec();
        }
        LpWrap {
            pit_token: a.token.as_ref().map(PitToken::as_bytes),
            nack,
            incoming_face_id: None,
        }
        .to_wire(p)
    }
    /// Append encoded bytes; returns their range.
    pub(super) fn push_bytes(&mut self, f: impl FnOnce(&mut Vec<u8>)) -> (u32, u32) {
        let start = self.bytes.len() as u32;
        f(&mut self.bytes);
        (start, self.bytes.len() as u32)
    }
    pub(super) fn push(
        &mut self,
        face: FaceId,
        kind: ActionKind,
        token: Option<PitToken>,
        r: (u32, u32),
    ) {
        self.list.push(Action {
            face,
            kind,
            token,
            start: r.0,
            end: r.1,
        });
    }
}

impl Actions {
    /// Record a drop of a packet from `face`.
    pub(super) fn push_drop(&mut self, face: FaceId, r: DropReason) {
        self.drops.push((face, r));
    }
}
