//! [`Forwarder::process_batch`]: decode a batch, prefetch its table lines
//! in software-pipelined stages, run the pipeline packet by packet.

use nexthop_wire::ndn::{Interest, InterestView, NackReason, Name, PacketView};

use super::{Actions, DropReason, Forwarder, Parsed, Pit};
use crate::cs::CsRecord;
use crate::fib::{Fib, Prefetch};
use crate::pit::{FaceId, Millis, PitToken};

/// One packet of a [`Forwarder::process_batch`] call, decoded into the
/// forwarder's reused pools: `slot` indexes the Interest pool (Interest,
/// Nack) or the name pool (Data); `frag` is the byte range of the
/// network-layer packet inside the batch entry's bytes.
#[derive(Clone, Copy, Debug)]
enum BatchItem {
    Interest {
        slot: usize,
        token: Option<PitToken>,
        frag: (usize, usize),
    },
    Data {
        slot: usize,
        fresh: Option<u64>,
        frag: (usize, usize),
    },
    Nack {
        slot: usize,
        reason: Option<NackReason>,
    },
    Bad(DropReason),
}

/// The byte range of `part` (a sub-slice of `whole`) inside `whole`.
fn range_in(whole: &[u8], part: &[u8]) -> (usize, usize) {
    let start = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    (start, start + part.len())
}

/// Decoded packets of a batch, kept across calls so that a steady stream
/// of batches allocates nothing: the pools only grow to the largest batch.
#[derive(Debug, Default)]
pub(super) struct BatchScratch {
    items: Vec<BatchItem>,
    interests: Vec<Interest>,
    names: Vec<Name>,
    /// Per Data (by its `names` slot): the Content Store record the second
    /// prefetch stage loaded, for the third.
    records: Vec<Option<CsRecord>>,
}

impl BatchScratch {
    /// A decoded packet's name and, for an Interest, its CanBePrefix and
    /// MustBeFresh (what the tables' prefetches key on).
    fn key(&self, item: &BatchItem) -> Option<(&Name, Option<(bool, bool)>)> {
        match *item {
            BatchItem::Interest { slot, .. } => {
                let i = self.interests.get(slot)?;
                Some((&i.name, Some((i.can_be_prefix, i.must_be_fresh))))
            }
            BatchItem::Data { slot, .. } => Some((self.names.get(slot)?, None)),
            _ => None,
        }
    }
}

/// Packets between a packet's first prefetch stage and its second, and
/// between its second and its processing, in
/// [`Forwarder::process_batch`].
const PIPELINE_AHEAD: usize = 4;

/// Bytes of a packet [`Forwarder::process_batch`] prefetches before
/// decoding it (the headers the decoder walks; a Data's Content is copied,
/// not read).
const DECODE_PREFETCH_BYTES: usize = 256;

impl Forwarder {
    /// A packet of a batch into the batch pools: the Interest's name with
    /// its prefix hashes (what the prefetch reads), the Data's name only
    /// (Content and signature stay in `wire`). Allocates nothing once the
    /// pools have grown.
    fn decode_into(&self, face: FaceId, wire: &[u8], b: &mut BatchScratch) -> BatchItem {
        if face >= self.cfg.max_faces {
            return BatchItem::Bad(DropReason::BadFace);
        }
        // Matched step by step, not chained through `map_err`/`and_then`:
        // each combinator moved the whole view (a memcpy call).
        let parsed = match PacketView::parse(wire) {
            Ok(v) => Parsed::of(v, wire),
            Err(e) => Err(DropReason::of(&e)),
        };
        let interest_slot = |b: &mut BatchScratch, v: &InterestView<'_>| {
            let slot = b.items.len();
            if b.interests.len() <= slot {
                b.interests.resize_with(slot + 1, Interest::default);
            }
            v.write_into(&mut b.interests[slot]);
            slot
        };
        match parsed {
            Err(r) => BatchItem::Bad(r),
            Ok(Parsed::Interest(v, token, w)) => BatchItem::Interest {
                slot: interest_slot(b, &v),
                token,
                frag: range_in(wire, w),
            },
            Ok(Parsed::Data(v, w)) => {
                let slot = b.items.len();
                if b.names.len() <= slot {
                    b.names.resize_with(slot + 1, Name::default);
                    b.records.resize(slot + 1, None);
                }
                b.records[slot] = None;
                b.names[slot].assign(v.name);
                BatchItem::Data {
                    slot,
                    fresh: v.freshness_period_ms,
                    frag: range_in(wire, w),
                }
            }
            Ok(Parsed::Nack(v, reason)) => BatchItem::Nack {
                slot: interest_slot(b, &v),
                reason,
            },
        }
    }

    /// Process a batch of packets `(face, bytes)` in order, with their
    /// table lines prefetched first when [`FwConfig::batch_prefetch`](super::FwConfig::batch_prefetch) is
    /// set. Results equal one [`Self::process`] call per packet.
    pub fn process_batch(
        &mut self,
        fib: &Fib,
        batch: &[(FaceId, &[u8])],
        now: Millis,
        out: &mut Actions,
    ) {
        if self.cfg.batch_prefetch == Prefetch::None {
            for &(face, wire) in batch {
                self.process(fib, face, wire, now, out);
            }
            return;
        }
        let mut b = std::mem::take(&mut self.batch);
        b.items.clear();
        for (k, &(f, w)) in batch.iter().enumerate() {
            // The packet after next, while this one is decoded (a batch
            // read from a ring or a socket need not be in cache).
            if let Some(&(_, next)) = batch.get(k + 2) {
                nexthop_mem::prefetch_range(next.as_ptr(), next.len().min(DECODE_PREFETCH_BYTES));
            }
            let item = self.decode_into(f, w, &mut b);
            b.items.push(item);
        }
        // Software-pipelined: the loads of packet k + 2 * AHEAD's table
        // lines are issued ([`Self::prefetch_first`]), then what packet
        // k + AHEAD's lines point to is loaded ([`Self::prefetch_second`]),
        // then, for a Data k + AHEAD / 2, the Content Store buffer the
        // second stage's record points to ([`Self::prefetch_third`]), then
        // packet k is run. Each line so has AHEAD packets' work (a few
        // microseconds) to arrive: a miss not prefetched in time costs
        // ~300 ns here (docs/benchmarks.md, "NDN forwarding pipeline"), and
        // issuing a whole batch's loads at once queues them behind each
        // other.
        const FIRST: usize = 2 * PIPELINE_AHEAD;
        const SECOND: usize = PIPELINE_AHEAD;
        const THIRD: usize = PIPELINE_AHEAD / 2;
        for k in 0..FIRST {
            self.prefetch_first(fib, &b, batch, k);
            if let Some(k) = (k + SECOND).checked_sub(FIRST) {
                self.prefetch_second(fib, &mut b, k);
            }
            if let Some(k) = (k + THIRD).checked_sub(FIRST) {
                self.prefetch_third(&b, k);
            }
        }
        for (k, &(face, wire)) in batch.iter().enumerate() {
            self.prefetch_first(fib, &b, batch, k + FIRST);
            self.prefetch_second(fib, &mut b, k + SECOND);
            self.prefetch_third(&b, k + THIRD);
            match b.items[k] {
                BatchItem::Bad(r) => self.drop_pkt(face, r, out),
                BatchItem::Interest { slot, token, frag } => {
                    self.face_mut(face).in_interests += 1;
                    let w = wire.get(frag.0..frag.1);
                    self.on_interest(fib, face, &mut b.interests[slot], w, token, now, out);
                }
                BatchItem::Data { slot, fresh, frag } => {
                    self.face_mut(face).in_data += 1;
                    let w = wire.get(frag.0..frag.1).unwrap_or(wire);
                    self.on_data(face, &b.names[slot], fresh, w, now, out);
                }
                BatchItem::Nack { slot, reason } => {
                    self.face_mut(face).in_nacks += 1;
                    self.on_nack(fib, face, &mut b.interests[slot], reason, now, out);
                }
            }
        }
        self.batch = b;
    }

    /// The first prefetch stage of [`Self::process_batch`] for its `k`-th
    /// packet (nothing past the batch or for a packet that is not an
    /// Interest or Data): the FIB buckets on the name's cached prefix
    /// hashes (Interests), the Content Store candidates, the PIT
    /// candidates.
    #[inline(always)]
    fn prefetch_first(&self, fib: &Fib, b: &BatchScratch, batch: &[(FaceId, &[u8])], k: usize) {
        let (Some(item), Some(&(face, _))) = (b.items.get(k), batch.get(k)) else {
            return;
        };
        let Some((name, flags)) = b.key(item) else {
            return;
        };
        let interest = flags.is_some();
        if interest {
            fib.prefetch_name(name, self.cfg.batch_prefetch);
        }
        if let Some(cs) = &self.cs {
            cs.prefetch(name, !interest);
        }
        match &self.pit {
            Pit::Fp(pit) => pit.prefetch_name(name.value(), interest.then_some(face)),
            Pit::Exact(pit) => pit.prefetch(name, flags),
        }
    }

    /// The second prefetch stage (once the first's lines had time to
    /// arrive): what they point to, the exact PIT's first chain slots and,
    /// with [`Prefetch::All`], the FIB entries along the path the buckets'
    /// fingerprints predict.
    #[inline(always)]
    fn prefetch_second(&self, fib: &Fib, b: &mut BatchScratch, k: usize) {
        let Some(&item) = b.items.get(k) else {
            return;
        };
        let Some((name, flags)) = b.key(&item) else {
            return;
        };
        if let Pit::Exact(pit) = &self.pit {
            pit.prefetch_slot(name, flags);
        }
        if self.cfg.batch_prefetch == Prefetch::All && flags.is_some() {
            fib.prefetch_name_entries(name);
        }
        if let (Some(cs), BatchItem::Data { slot, frag, .. }) = (&self.cs, item) {
            let r = cs.prefetch_record(name, frag.1 - frag.0);
            if let Some(v) = b.records.get_mut(slot) {
                *v = r;
            }
        }
    }

    /// The third stage, for a Data: the Content Store buffer it will be
    /// copied into (the record the second stage loaded says where).
    #[inline(always)]
    fn prefetch_third(&self, b: &BatchScratch, k: usize) {
        let (Some(cs), Some(&BatchItem::Data { slot, frag, .. })) = (&self.cs, b.items.get(k))
        else {
            return;
        };
        if let Some(&Some(r)) = b.records.get(slot) {
            cs.prefetch_buffer(r, frag.1 - frag.0);
        }
    }
}
