//! The NDN forwarding pipeline with NFD's semantics, no I/O.
//!
//! A [`Forwarder`] takes packets received on numbered faces (encoded
//! bytes: a bare Interest or Data, or an NDNLPv2 LpPacket carrying a
//! PitToken and maybe a Nack) and returns [`Actions`]: packets to send on
//! faces, each with the PitToken the caller must put in its LpPacket (and
//! the NackReason for a Nack), plus the drops with their reasons. The
//! caller owns sockets, clocks and threads: `now` is passed in, the FIB is
//! passed by reference on every call (it is shared, read-only, between
//! forwarding threads), and the forwarder owns its PIT and Content Store
//! partition.
//!
//! * Interest: HopLimit (0 on arrival: dropped; decremented; not sent on
//!   with 0), missing Nonce (one is assigned, as ndn-cxx does), PIT insert
//!   with duplicate-nonce and dead-nonce loop detection (Nack Duplicate to
//!   the downstream), Content Store lookup for a new entry (a hit answers
//!   with the downstream's token), FIB longest-prefix match, the strategy
//!   chosen for the name (best-route or multicast, [`strategy`]); no route
//!   is answered with Nack NoRoute.
//! * Data: PIT match (exact name, CanBePrefix, implicit digest), Content
//!   Store insert under its admission policy, a copy to every downstream
//!   with its own token; unsolicited Data are dropped and counted (or
//!   cached, with [`FwConfig::cache_unsolicited`]).
//! * Nack from an upstream: the out-record is marked; best-route tries an
//!   unused next hop; when no upstream is pending, the least severe reason
//!   goes back to every downstream and the entry is removed.
//! * Core mode ([`PitMode::Fingerprint`]): the fingerprint PIT of §5.4
//!   stores no names, nonces or tokens, so there is no aggregation and no
//!   loop detection (every Interest is forwarded, Algorithm 1), Data go to
//!   the face bit-vector without tokens (a CS hit still echoes the
//!   Interest's token), colliding names are all delivered and the entry
//!   lives to its expiry; a Nack goes to the matched faces and consumes the
//!   entry like a Data.
//!
//! Batches: [`Forwarder::process_batch`] with [`FwConfig::batch_prefetch`]
//! set decodes a batch, prefetches the table lines of all its packets (FIB
//! buckets on the names' cached prefix hashes, Content Store and
//! fingerprint PIT candidate buckets, then what those point to: FIB
//! entries, exact PIT slots, the Content Store record and buffer a Data
//! will overwrite), then runs the pipeline packet by
//! packet in arrival order (prefetching changes no state, so results equal
//! one call per packet). The default is [`Prefetch::All`](crate::fib::Prefetch::All), the fastest in
//! the crate README's figures; [`Prefetch::None`](crate::fib::Prefetch::None) processes packet by
//! packet.
//!
//! Untrusted input never panics: a packet that does not decode, an
//! Interest or Data with a zero-component name, a fragment (reassembly is
//! the face's job), a face id out of range, PIT caps, unmatched Data and
//! Nacks are each dropped and counted by [`DropReason`].

mod actions;
mod batch;
mod config;
pub mod strategy;

pub use actions::{Action, ActionKind, Actions};
pub use config::{DropCounters, DropReason, FaceCounters, FwConfig, FwCounters, PitMode};

use nexthop_wire::ndn::{
    implicit_digest, Data, DataView, Interest, InterestView, NackReason, Name, NetPacketView,
    PacketView,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::cs::{ContentStore, CsQuery};
use crate::fib::{Fib, Trace};
use crate::pit::{
    ConfigError, DataMatch, Downstream, ExactPit, FaceId, FingerprintPit, FpInsert, InsertOutcome,
    InterestIn, Millis, PitId, PitToken,
};
use batch::BatchScratch;
use strategy::{after_nack, best_route, multicast, Decision};
pub use strategy::{Strategy, StrategyChoice};

#[derive(Debug)]
enum Pit {
    Exact(ExactPit),
    Fp(FingerprintPit),
}

/// One packet of the owned-packet entry points ([`Forwarder::interest`],
/// [`Forwarder::data`], [`Forwarder::nack`]): the Interest with its
/// PitToken, the Data's name, FreshnessPeriod and encoding, the Nack's
/// Interest and reason.
enum Input<'a> {
    Interest(Interest, Option<PitToken>),
    Data(Name, Option<u64>, &'a [u8]),
    Nack(Interest, Option<NackReason>),
    Bad(DropReason),
}

/// A packet parsed and taken out of its NDNLPv2 header: the one place the
/// pipeline reads an LpPacket, for [`Forwarder::process_view`] and the
/// batch path alike. The byte slices are the network-layer packet's own
/// encoding (the whole input, or the LpPacket's Fragment).
enum Parsed<'a> {
    Interest(InterestView<'a>, Option<PitToken>, &'a [u8]),
    Data(DataView<'a>, &'a [u8]),
    Nack(InterestView<'a>, Option<NackReason>),
}

impl<'a> Parsed<'a> {
    /// `view` is `PacketView::parse(wire)`'s result.
    #[inline]
    fn of(view: PacketView<'a>, wire: &'a [u8]) -> Result<Parsed<'a>, DropReason> {
        let (frag, token, nack) = match view {
            PacketView::Interest(v) => return Ok(Parsed::Interest(v, None, wire)),
            PacketView::Data(v) => return Ok(Parsed::Data(v, wire)),
            PacketView::Lp(lp) => match lp.fragment {
                Some(f) if lp.is_whole() => (f, lp.pit_token.and_then(PitToken::new), lp.nack),
                _ => return Err(DropReason::NotWhole),
            },
        };
        match NetPacketView::parse(frag) {
            Err(e) => Err(DropReason::of(&e)),
            Ok(NetPacketView::Interest(v)) => Ok(match nack {
                Some(n) => Parsed::Nack(v, n.reason),
                None => Parsed::Interest(v, token, frag),
            }),
            Ok(NetPacketView::Data(_)) if nack.is_some() => Err(DropReason::Malformed),
            Ok(NetPacketView::Data(v)) => Ok(Parsed::Data(v, frag)),
        }
    }
}

/// The forwarding pipeline of one forwarding thread. See the module docs.
#[derive(Debug)]
pub struct Forwarder {
    cfg: FwConfig,
    pit: Pit,
    cs: Option<ContentStore>,
    choice: StrategyChoice,
    counters: FwCounters,
    faces: Vec<FaceCounters>,
    rng: Xoshiro256PlusPlus,
    faces_scratch: Vec<FaceId>,
    down_scratch: Vec<Downstream>,
    /// What [`Forwarder::process`] decodes an Interest into (its buffers
    /// reused from packet to packet; an `Option` so that taking it out
    /// while the pipeline runs leaves `None`, not a freshly allocated stand-in).
    interest_scratch: Option<Interest>,
    /// What [`Forwarder::process`] copies a Data's name into.
    name_scratch: Option<Name>,
    /// What [`Forwarder::process_batch`] decodes a batch into.
    batch: BatchScratch,
}

impl Forwarder {
    /// A forwarder with empty PIT and Content Store.
    pub fn new(cfg: FwConfig) -> Result<Forwarder, ConfigError> {
        cfg.validate()?;
        let pit = match cfg.pit {
            PitMode::Exact(c) => Pit::Exact(ExactPit::new(c)?),
            PitMode::Fingerprint(c) => Pit::Fp(FingerprintPit::new(c)?),
        };
        let cs = cfg.cs.map(ContentStore::new).transpose()?;
        Ok(Forwarder {
            choice: StrategyChoice::new(cfg.default_strategy),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.nonce_seed),
            cfg,
            pit,
            cs,
            counters: FwCounters::default(),
            faces: Vec::new(),
            faces_scratch: Vec::new(),
            down_scratch: Vec::new(),
            interest_scratch: None,
            name_scratch: None,
            batch: BatchScratch::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &FwConfig {
        &self.cfg
    }
    /// The strategy-choice table.
    pub fn strategy_choice(&self) -> &StrategyChoice {
        &self.choice
    }
    /// The strategy-choice table, to change.
    pub fn strategy_choice_mut(&mut self) -> &mut StrategyChoice {
        &mut self.choice
    }
    /// Forwarder-wide counters.
    pub fn counters(&self) -> &FwCounters {
        &self.counters
    }
    /// Counters of `face` (zero for a face never seen).
    pub fn face_counters(&self, face: FaceId) -> FaceCounters {
        self.faces.get(face as usize).copied().unwrap_or_default()
    }
    /// The exact PIT (edge mode).
    pub fn exact_pit(&self) -> Option<&ExactPit> {
        match &self.pit {
            Pit::Exact(p) => Some(p),
            Pit::Fp(_) => None,
        }
    }
    /// The fingerprint PIT (core mode).
    pub fn fingerprint_pit(&self) -> Option<&FingerprintPit> {
        match &self.pit {
            Pit::Fp(p) => Some(p),
            Pit::Exact(_) => None,
        }
    }
    /// The Content Store.
    pub fn content_store(&self) -> Option<&ContentStore> {
        self.cs.as_ref()
    }
    /// Pending Interests.
    pub fn pit_len(&self) -> usize {
        match &self.pit {
            Pit::Exact(p) => p.len(),
            Pit::Fp(p) => p.len(),
        }
    }

    fn face_mut(&mut self, face: FaceId) -> &mut FaceCounters {
        let i = face as usize;
        if i >= self.faces.len() {
            self.faces.resize(i + 1, FaceCounters::default());
        }
        &mut self.faces[i]
    }

    fn drop_pkt(&mut self, face: FaceId, r: DropReason, out: &mut Actions) {
        self.counters.drops.0[r as usize] += 1;
        if face < self.cfg.max_faces {
            self.face_mut(face).dropped += 1;
        }
        out.push_drop(face, r);
    }

    fn emit(
        &mut self,
        face: FaceId,
        kind: ActionKind,
        token: Option<PitToken>,
        r: (u32, u32),
        out: &mut Actions,
    ) {
        let fc = self.face_mut(face);
        match kind {
            ActionKind::Interest => fc.out_interests += 1,
            ActionKind::Data => fc.out_data += 1,
            ActionKind::Nack(_) => fc.out_nacks += 1,
        }
        out.push(face, kind, token, r);
    }

    /// Process one packet received on `face`.
    ///
    /// The packet is parsed as borrowed views ([`PacketView`]: the name a
    /// [`nexthop_wire::ndn::NameRef`] over `wire`, the LpPacket's fragment
    /// and PitToken slices of it) and copied into scratch buffers the
    /// forwarder keeps, so decoding allocates nothing once they have grown:
    /// an Interest's name (and its prefix hashes) into a reused
    /// [`Interest`], a Data's name into a reused [`Name`] (its Content and
    /// signature are not copied; the CS and the downstreams get `wire`).
    /// Results equal [`Self::interest`], [`Self::data`] and [`Self::nack`]
    /// on the owned decoder's packets.
    pub fn process(
        &mut self,
        fib: &Fib,
        face: FaceId,
        wire: &[u8],
        now: Millis,
        out: &mut Actions,
    ) {
        if face >= self.cfg.max_faces {
            return self.drop_pkt(face, DropReason::BadFace, out);
        }
        match PacketView::parse(wire) {
            Err(e) => self.drop_pkt(face, DropReason::of(&e), out),
            Ok(view) => self.process_view(fib, face, view, wire, now, out),
        }
    }

    /// [`Self::process`] on a packet its caller parsed already: `view` is
    /// `PacketView::parse(wire)`'s result (a face that read the NDNLPv2
    /// header hands it on instead of the pipeline walking it again).
    pub fn process_view(
        &mut self,
        fib: &Fib,
        face: FaceId,
        view: PacketView<'_>,
        wire: &[u8],
        now: Millis,
        out: &mut Actions,
    ) {
        if face >= self.cfg.max_faces {
            return self.drop_pkt(face, DropReason::BadFace, out);
        }
        match Parsed::of(view, wire) {
            Err(r) => self.drop_pkt(face, r, out),
            Ok(Parsed::Interest(v, token, w)) => {
                self.interest_view(fib, face, &v, token, w, now, out)
            }
            Ok(Parsed::Data(v, w)) => self.data_view(face, &v, w, now, out),
            Ok(Parsed::Nack(v, r)) => {
                self.face_mut(face).in_nacks += 1;
                let mut i = self.interest_scratch.take().unwrap_or_default();
                v.write_into(&mut i);
                self.on_nack(fib, face, &mut i, r, now, out);
                self.interest_scratch = Some(i);
            }
        }
    }

    /// An Interest parsed by [`Self::process`]: into the scratch Interest.
    #[allow(clippy::too_many_arguments)]
    fn interest_view(
        &mut self,
        fib: &Fib,
        face: FaceId,
        v: &InterestView<'_>,
        token: Option<PitToken>,
        wire: &[u8],
        now: Millis,
        out: &mut Actions,
    ) {
        self.face_mut(face).in_interests += 1;
        let mut i = self.interest_scratch.take().unwrap_or_default();
        v.write_into(&mut i);
        self.on_interest(fib, face, &mut i, Some(wire), token, now, out);
        self.interest_scratch = Some(i);
    }

    /// A Data parsed by [`Self::process`]: its name into the scratch name.
    fn data_view(
        &mut self,
        face: FaceId,
        v: &DataView<'_>,
        wire: &[u8],
        now: Millis,
        out: &mut Actions,
    ) {
        self.face_mut(face).in_data += 1;
        let mut name = self.name_scratch.take().unwrap_or_default();
        name.assign(v.name);
        self.on_data(face, &name, v.freshness_period_ms, wire, now, out);
        self.name_scratch = Some(name);
    }

    /// Process an Interest already decoded (from `face`, with the PitToken
    /// of its LpPacket).
    pub fn interest(
        &mut self,
        fib: &Fib,
        face: FaceId,
        interest: Interest,
        token: Option<PitToken>,
        now: Millis,
        out: &mut Actions,
    ) {
        let input = if face >= self.cfg.max_faces {
            Input::Bad(DropReason::BadFace)
        } else {
            Input::Interest(interest, token)
        };
        self.dispatch(fib, face, input, now, out);
    }

    /// Process a Data already decoded; `wire` is its encoding.
    pub fn data(
        &mut self,
        fib: &Fib,
        face: FaceId,
        data: Data,
        wire: &[u8],
        now: Millis,
        out: &mut Actions,
    ) {
        let input = if face >= self.cfg.max_faces {
            Input::Bad(DropReason::BadFace)
        } else {
            Input::Data(data.name, data.meta_info.freshness_period_ms, wire)
        };
        self.dispatch(fib, face, input, now, out);
    }

    /// Process a Nack already decoded (the Interest it refuses and its
    /// reason).
    pub fn nack(
        &mut self,
        fib: &Fib,
        face: FaceId,
        interest: Interest,
        reason: Option<NackReason>,
        now: Millis,
        out: &mut Actions,
    ) {
        let input = if face >= self.cfg.max_faces {
            Input::Bad(DropReason::BadFace)
        } else {
            Input::Nack(interest, reason)
        };
        self.dispatch(fib, face, input, now, out);
    }

    fn dispatch(
        &mut self,
        fib: &Fib,
        face: FaceId,
        input: Input<'_>,
        now: Millis,
        out: &mut Actions,
    ) {
        match input {
            Input::Bad(r) => self.drop_pkt(face, r, out),
            Input::Interest(mut i, token) => {
                self.face_mut(face).in_interests += 1;
                self.on_interest(fib, face, &mut i, None, token, now, out)
            }
            Input::Data(name, fresh, wire) => {
                self.face_mut(face).in_data += 1;
                self.on_data(face, &name, fresh, wire, now, out)
            }
            Input::Nack(mut i, r) => {
                self.face_mut(face).in_nacks += 1;
                self.on_nack(fib, face, &mut i, r, now, out)
            }
        }
    }

    /// Send `i` (as received) back to `face` as a Nack.
    fn nack_back(
        &mut self,
        face: FaceId,
        i: &Interest,
        reason: NackReason,
        token: Option<PitToken>,
        out: &mut Actions,
    ) {
        let r = out.push_bytes(|b| i.encode(b));
        self.emit(face, ActionKind::Nack(reason), token, r, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_interest(
        &mut self,
        fib: &Fib,
        face: FaceId,
        i: &mut Interest,
        wire: Option<&[u8]>,
        token: Option<PitToken>,
        now: Millis,
        out: &mut Actions,
    ) {
        // Forward the received bytes (HopLimit patched) unless the
        // Interest had to change otherwise.
        let mut wire = wire;
        if i.name.is_empty() {
            return self.drop_pkt(face, DropReason::ZeroComponentName, out);
        }
        if let Some(h) = i.hop_limit {
            if h == 0 {
                return self.drop_pkt(face, DropReason::HopLimitZero, out);
            }
            i.hop_limit = Some(h - 1);
        }
        let nonce = match i.nonce {
            Some(n) => n,
            None => {
                let n = self.rng.gen::<u32>();
                i.nonce = Some(n);
                wire = None;
                self.counters.nonces_assigned += 1;
                n
            }
        };
        let strategy = self.choice.find(&i.name);
        let lookup = |i: &Interest| fib.lookup_name(&i.name, &mut Trace::default());
        let mut faces = std::mem::take(&mut self.faces_scratch);
        faces.clear();
        match &mut self.pit {
            Pit::Exact(pit) => {
                let ii = InterestIn {
                    name: &i.name,
                    can_be_prefix: i.can_be_prefix,
                    must_be_fresh: i.must_be_fresh,
                    nonce,
                    lifetime_ms: i.lifetime_ms,
                    face,
                    token,
                    multi_access: false,
                };
                let id = match pit.insert(&ii, now) {
                    InsertOutcome::DuplicateNonce { .. } => {
                        self.counters.drops.0[DropReason::DuplicateNonce as usize] += 1;
                        self.face_mut(face).dropped += 1;
                        out.push_drop(face, DropReason::DuplicateNonce);
                        self.nack_back(face, i, NackReason::Duplicate, token, out);
                        self.faces_scratch = faces;
                        return;
                    }
                    InsertOutcome::Full => {
                        self.faces_scratch = faces;
                        return self.drop_pkt(face, DropReason::PitFull, out);
                    }
                    InsertOutcome::RecordsFull => {
                        self.faces_scratch = faces;
                        return self.drop_pkt(face, DropReason::PitRecordsFull, out);
                    }
                    InsertOutcome::ChainFull => {
                        self.faces_scratch = faces;
                        return self.drop_pkt(face, DropReason::PitChainFull, out);
                    }
                    InsertOutcome::New(id) => {
                        if self.cs_answer(face, i, token, now, out) {
                            if let Pit::Exact(pit) = &mut self.pit {
                                pit.remove(id, now);
                            }
                            self.faces_scratch = faces;
                            return;
                        }
                        id
                    }
                    InsertOutcome::Aggregated(id) | InsertOutcome::Retransmitted(id) => id,
                };
                let m = lookup(i);
                let entry = match &self.pit {
                    Pit::Exact(pit) => pit.entry(id),
                    Pit::Fp(_) => None,
                };
                let outs = entry.map(|e| e.out_records()).unwrap_or(&[]);
                let retx = entry.is_some_and(|e| e.has_pending_upstream(now));
                let sup = match entry.map(|e| e.retx_interval()) {
                    Some(ms) if ms > 0 => ms,
                    _ => self.cfg.retx_suppression_ms,
                };
                let hops = m.map(|m| fib.next_hops(m.nh)).unwrap_or(&[]);
                let d = match strategy {
                    Strategy::BestRoute => best_route(hops, face, outs, now, sup, &mut faces),
                    Strategy::Multicast => multicast(hops, face, outs, now, sup, &mut faces),
                };
                match d {
                    Decision::Send => {
                        if retx {
                            // A forwarded retransmission: the next one
                            // waits twice as long (up to the maximum).
                            let next = sup.saturating_mul(2).min(self.cfg.retx_suppression_max_ms);
                            if let Pit::Exact(pit) = &mut self.pit {
                                pit.set_retx_interval(id, next);
                            }
                        }
                        self.send_interest(Some(id), i, wire, &faces, face, now, out)
                    }
                    Decision::Suppressed | Decision::Wait => self.counters.suppressed += 1,
                    Decision::NoRoute => {
                        self.drop_pkt(face, DropReason::NoRoute, out);
                        self.reject(id, i, NackReason::NoRoute, now, out);
                    }
                }
            }
            Pit::Fp(_) => {
                if self.cs_answer(face, i, token, now, out) {
                    self.faces_scratch = faces;
                    return;
                }
                let hops = lookup(i).map(|m| fib.next_hops(m.nh)).unwrap_or(&[]);
                let sup = self.cfg.retx_suppression_ms;
                let d = match strategy {
                    Strategy::BestRoute => best_route(hops, face, &[], now, sup, &mut faces),
                    Strategy::Multicast => multicast(hops, face, &[], now, sup, &mut faces),
                };
                if d != Decision::Send {
                    self.drop_pkt(face, DropReason::NoRoute, out);
                    self.nack_back(face, i, NackReason::NoRoute, token, out);
                } else {
                    let ins = match &mut self.pit {
                        Pit::Fp(pit) => pit.insert(i.name.value(), face, i.lifetime_ms, now),
                        Pit::Exact(_) => FpInsert::BadFace,
                    };
                    match ins {
                        FpInsert::Forward { .. } => {
                            self.send_interest(None, i, wire, &faces, face, now, out)
                        }
                        FpInsert::Full => self.drop_pkt(face, DropReason::PitFull, out),
                        FpInsert::BadFace => self.drop_pkt(face, DropReason::BadFace, out),
                    }
                }
            }
        }
        self.faces_scratch = faces;
    }

    /// Answer from the Content Store; returns whether it did.
    fn cs_answer(
        &mut self,
        face: FaceId,
        i: &Interest,
        token: Option<PitToken>,
        now: Millis,
        out: &mut Actions,
    ) -> bool {
        let Some(cs) = &mut self.cs else {
            return false;
        };
        let q = CsQuery {
            name: &i.name,
            can_be_prefix: i.can_be_prefix,
            must_be_fresh: i.must_be_fresh,
        };
        match cs.lookup(&q, now) {
            Some(wire) => {
                let r = out.push_bytes(|b| b.extend_from_slice(wire));
                self.counters.cs_hits += 1;
                self.emit(face, ActionKind::Data, token, r, out);
                true
            }
            None => {
                self.counters.cs_misses += 1;
                false
            }
        }
    }

    /// Send `i` to `faces` (recording out-records in edge mode): `wire`,
    /// its received encoding, with the HopLimit byte set to `i`'s, or `i`
    /// encoded afresh.
    #[allow(clippy::too_many_arguments)]
    fn send_interest(
        &mut self,
        id: Option<PitId>,
        i: &Interest,
        wire: Option<&[u8]>,
        faces: &[FaceId],
        in_face: FaceId,
        now: Millis,
        out: &mut Actions,
    ) {
        if i.hop_limit == Some(0) {
            return self.drop_pkt(in_face, DropReason::HopLimitExhausted, out);
        }
        let patched = wire.and_then(|w| {
            let at = match i.hop_limit {
                Some(_) => Some(hop_limit_at(w)?),
                None => None,
            };
            Some((w, at))
        });
        let r = match patched {
            Some((w, at)) => out.push_bytes(|b| {
                let base = b.len();
                b.extend_from_slice(w);
                if let (Some(at), Some(h)) = (at, i.hop_limit) {
                    b[base + at] = h;
                }
            }),
            None => out.push_bytes(|b| i.encode(b)),
        };
        let nonce = i.nonce.unwrap_or(0);
        for &f in faces {
            if let (Some(id), Pit::Exact(pit)) = (id, &mut self.pit) {
                if !pit.add_out_record(id, f, nonce, i.lifetime_ms, now) {
                    continue;
                }
            }
            let tok = self.cfg.upstream_token;
            self.emit(f, ActionKind::Interest, tok, r, out);
        }
    }

    /// Nack every downstream of `id` with `reason` and remove the entry.
    fn reject(
        &mut self,
        id: PitId,
        i: &mut Interest,
        reason: NackReason,
        now: Millis,
        out: &mut Actions,
    ) {
        let Pit::Exact(pit) = &mut self.pit else {
            return;
        };
        let Some(e) = pit.entry(id) else {
            return;
        };
        let mut nonces: Vec<(Downstream, u32)> = Vec::with_capacity(e.in_records().len());
        for r in e.in_records() {
            if r.expiry > now {
                nonces.push((
                    Downstream {
                        face: r.face,
                        token: r.token,
                    },
                    r.nonce,
                ));
            }
        }
        pit.remove(id, now);
        let keep = i.nonce;
        for (d, n) in nonces {
            i.nonce = Some(n);
            self.nack_back(d.face, i, reason, d.token, out);
        }
        i.nonce = keep;
    }

    /// A Data named `name` with FreshnessPeriod `fresh`; `wire` is its
    /// encoding.
    fn on_data(
        &mut self,
        face: FaceId,
        name: &Name,
        fresh: Option<u64>,
        wire: &[u8],
        now: Millis,
        out: &mut Actions,
    ) {
        if name.is_empty() {
            return self.drop_pkt(face, DropReason::ZeroComponentName, out);
        }
        let mut downs = std::mem::take(&mut self.down_scratch);
        downs.clear();
        let satisfied = match &mut self.pit {
            Pit::Exact(pit) => {
                let dg = pit.needs_digest().then(|| implicit_digest(wire));
                let m = DataMatch {
                    name,
                    digest: dg.as_ref(),
                };
                pit.satisfy(&m, face, now, &mut downs) > 0
            }
            Pit::Fp(pit) => {
                let s = pit.satisfy(name.value(), now);
                let mut faces = s.faces;
                while faces != 0 {
                    let f = faces.trailing_zeros();
                    faces &= faces - 1;
                    if f != face {
                        downs.push(Downstream {
                            face: f,
                            token: None,
                        });
                    }
                }
                s.faces != 0
            }
        };
        if !satisfied {
            if self.cfg.cache_unsolicited {
                if let Some(cs) = &mut self.cs {
                    cs.insert(name, wire, fresh, 1, now);
                }
            }
            self.down_scratch = downs;
            return self.drop_pkt(face, DropReason::UnsolicitedData, out);
        }
        self.counters.satisfied += 1;
        if let Some(cs) = &mut self.cs {
            let requests = downs.len().max(1) as u32;
            cs.insert(name, wire, fresh, requests, now);
        }
        if !downs.is_empty() {
            let r = out.push_bytes(|b| b.extend_from_slice(wire));
            for dn in &downs {
                self.emit(dn.face, ActionKind::Data, dn.token, r, out);
            }
        }
        self.down_scratch = downs;
    }

    fn on_nack(
        &mut self,
        fib: &Fib,
        face: FaceId,
        i: &mut Interest,
        reason: Option<NackReason>,
        now: Millis,
        out: &mut Actions,
    ) {
        if i.name.is_empty() {
            return self.drop_pkt(face, DropReason::ZeroComponentName, out);
        }
        let code = reason.map_or(0, |r| r.code());
        match &mut self.pit {
            Pit::Fp(pit) => {
                let s = pit.satisfy(i.name.value(), now);
                if s.faces == 0 {
                    return self.drop_pkt(face, DropReason::UnmatchedNack, out);
                }
                let r = out.push_bytes(|b| i.encode(b));
                let reason = reason.unwrap_or(NackReason::Other(0));
                for f in 0..64u32 {
                    if s.faces >> f & 1 != 0 && f != face {
                        self.emit(f, ActionKind::Nack(reason), None, r, out);
                    }
                }
            }
            Pit::Exact(pit) => {
                let id = pit.find_entry(i.name.value(), i.can_be_prefix, i.must_be_fresh);
                let pending = match (id, i.nonce) {
                    (Some(id), Some(n)) => pit
                        .nack_with_reason(id, face, n, code, now)
                        .map(|p| (id, p)),
                    _ => None,
                };
                let Some((id, pending)) = pending else {
                    return self.drop_pkt(face, DropReason::UnmatchedNack, out);
                };
                let strategy = self.choice.find(&i.name);
                let hops = fib
                    .lookup_name(&i.name, &mut Trace::default())
                    .map(|m| fib.next_hops(m.nh))
                    .unwrap_or(&[]);
                let Some(e) = pit.entry(id) else {
                    return;
                };
                let downs: Vec<FaceId> = e.in_records().iter().map(|r| r.face).collect();
                let mut faces = std::mem::take(&mut self.faces_scratch);
                faces.clear();
                if after_nack(strategy, hops, &downs, e.out_records(), &mut faces) {
                    self.counters.nack_retries += 1;
                    self.send_interest(Some(id), i, None, &faces, face, now, out);
                } else if !pending {
                    // Every upstream answered with a Nack: the least severe
                    // reason (Congestion < Duplicate < NoRoute) goes down.
                    let worst = e
                        .out_records()
                        .iter()
                        .filter(|o| o.nacked && o.nack_code != 0)
                        .map(|o| o.nack_code)
                        .min()
                        .unwrap_or(code);
                    self.reject(id, i, NackReason::from_code(worst), now, out);
                }
                self.faces_scratch = faces;
            }
        }
    }
}

/// The offset of the HopLimit value byte in an encoded Interest.
fn hop_limit_at(wire: &[u8]) -> Option<usize> {
    use nexthop_wire::ndn::{tlv, tt};
    let e = tlv::read_single(wire, tt::INTEREST).ok()?;
    let mut r = e.reader();
    while !r.is_empty() {
        let c = r.read().ok()?;
        if c.typ == tt::HOP_LIMIT && c.value.len() == 1 {
            return Some(c.value_at);
        }
    }
    None
}
