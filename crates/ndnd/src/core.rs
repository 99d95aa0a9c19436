//! The forwarder core, no I/O: NDNLPv2 reassembly, management commands,
//! routes, and the forwarding pipeline.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use nexthop_ndn::control::FibControl;
use nexthop_ndn::cs::{CsConfig, Policy};
use nexthop_ndn::fib::Config as FibConfig;
use nexthop_ndn::fw::{
    ActionKind, Actions, FaceCounters, Forwarder, FwConfig, FwCounters, PitMode, Strategy,
};
use nexthop_ndn::nexthop::NextHop;
use nexthop_ndn::pit::{ExactPitConfig, FaceId, FingerprintPitConfig, Millis, PitToken};
use nexthop_wire::ndn::{
    tt, Interest, InterestView, LpView, LpWrap, Nack, Name, NameComponent, PacketView,
};

use crate::config::{CsPolicy, NdndConfig, PitKind, MAX_PACKET};
use crate::dataset::{self, FaceStatus, FibEntry, GeneralStatus, StrategyChoiceEntry};
use crate::mgmt::{self, ControlParameters};
use crate::reasm::{ReasmCounters, Reassembler};

/// Counters of the core (the pipeline's own are in [`Core::fw_counters`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CoreCounters {
    /// Packets received from faces.
    pub packets_in: u64,
    /// Bytes received from faces.
    pub bytes_in: u64,
    /// Packets over [`MAX_PACKET`], dropped.
    pub oversized: u64,
    /// LpPackets that do not decode, dropped.
    pub bad_lp: u64,
    /// Management commands answered (any status).
    pub commands: u64,
    /// Management commands refused (status other than 200).
    pub commands_refused: u64,
    /// Status dataset segments served.
    pub dataset_segments: u64,
    /// Status dataset Interests not answered: from a non-local face, or
    /// for a version no longer held.
    pub dataset_misses: u64,
    /// Interests sent to the face their NextHopFaceId named.
    pub next_hop_face_id: u64,
}

/// What the core knows of an open face (the daemon tells it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaceInfo {
    /// The remote end as an NFD face URI (`udp4://IP:PORT`, `fd://N`).
    pub uri: String,
    /// Our end (`udp4://IP:PORT`, `unix:///path`).
    pub local_uri: String,
    /// A local face (Unix, or a loopback peer).
    pub local: bool,
    /// The MTU of a datagram face.
    pub mtu: Option<u64>,
}

/// Per-face counters kept by the core (besides the pipeline's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaceBytes {
    /// Bytes received.
    pub in_bytes: u64,
    /// Bytes sent (as handed to the face).
    pub out_bytes: u64,
}

#[derive(Debug)]
struct FaceEntry {
    info: FaceInfo,
    flags: u64,
    /// The pipeline's counters of this id when the face opened (ids are
    /// reused; the pipeline's counters are per id).
    base: FaceCounters,
    bytes: FaceBytes,
}

/// Most dataset versions held for segment fetches.
const DATASETS_HELD: usize = 8;
/// Most bytes of held dataset segments; older versions go first (the
/// newest is always held).
const DATASETS_HELD_BYTES: usize = 16 << 20;
/// The face id NFD gives the Content Store in IncomingFaceId.
pub const FACE_ID_CONTENT_STORE: u64 = 254;
/// The strategies by NFD name and version.
const STRATEGIES: [(&str, u64, Strategy); 2] = [
    ("best-route", 5, Strategy::BestRoute),
    ("multicast", 4, Strategy::Multicast),
];

/// A change of the state every forwarding thread holds a copy of, made by
/// management on the polling thread and applied by each forwarding thread
/// in the order of its queue (so before any packet received after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A face opened.
    FaceOpened(FaceId, FaceInfo),
    /// A face closed (its routes go too).
    FaceClosed(FaceId),
    /// A face's flags (`faces/update`).
    FaceFlags(FaceId, u64),
    /// Route a prefix to a face with a cost.
    Route(Name, FaceId, u32),
    /// Remove a face from a prefix's routes.
    Unroute(Name, FaceId),
    /// Set (`Some`) or unset the strategy of a prefix.
    Strategy(Name, Option<Strategy>),
}

/// What a forwarding thread publishes for the polling thread's counters
/// and status datasets (summed with its own there).
#[derive(Debug, Clone, Default)]
pub struct ThreadStats {
    /// Packets this thread took from its queue.
    pub packets: u64,
    /// Its core counters.
    pub core: CoreCounters,
    /// Its pipeline's counters.
    pub fw: FwCounters,
    /// Its ForwarderStatus (counters, PIT and CS entries).
    pub general: GeneralStatus,
    /// Its counters of the open faces.
    pub faces: Vec<FaceStatus>,
}

/// Add `b`'s pipeline counters to `a`.
pub fn add_fw_counters(a: &mut FwCounters, b: &FwCounters) {
    for (x, y) in a.drops.0.iter_mut().zip(b.drops.0) {
        *x += y;
    }
    a.cs_hits += b.cs_hits;
    a.cs_misses += b.cs_misses;
    a.satisfied += b.satisfied;
    a.suppressed += b.suppressed;
    a.nack_retries += b.nack_retries;
    a.nonces_assigned += b.nonces_assigned;
}

/// Add `b`'s core counters to `a`.
pub fn add_core_counters(a: &mut CoreCounters, b: &CoreCounters) {
    a.packets_in += b.packets_in;
    a.bytes_in += b.bytes_in;
    a.oversized += b.oversized;
    a.bad_lp += b.bad_lp;
    a.commands += b.commands;
    a.commands_refused += b.commands_refused;
    a.dataset_segments += b.dataset_segments;
    a.dataset_misses += b.dataset_misses;
    a.next_hop_face_id += b.next_hop_face_id;
}

/// The PitToken a forwarding thread puts on the Interests it sends
/// upstream: a marker byte and the thread's index.
pub fn thread_token(thread: u8) -> PitToken {
    PitToken::new(&[THREAD_TOKEN_MARK, thread]).unwrap_or_else(|| unreachable!())
}

/// The thread a PitToken from [`thread_token`] names.
pub fn token_thread(token: &[u8]) -> Option<u8> {
    match token {
        [THREAD_TOKEN_MARK, t] => Some(*t),
        _ => None,
    }
}

const THREAD_TOKEN_MARK: u8 = 0xd7;

/// Routes registered per prefix: `(face, cost)` pairs.
type Rib = BTreeMap<Vec<u8>, (Name, Vec<NextHop>)>;

/// One forwarding thread's state. See the module docs.
#[derive(Debug)]
pub struct Core {
    fw: Forwarder,
    fib: FibControl,
    rib: Rib,
    reasm: Reassembler,
    actions: Actions,
    counters: CoreCounters,
    faces: BTreeMap<FaceId, FaceEntry>,
    /// Strategy choices besides `/`, mirrored for `strategy-choice/list`.
    choices: BTreeMap<Vec<u8>, (Name, Strategy)>,
    datasets: VecDeque<(Name, Vec<Vec<u8>>)>,
    last_version: u64,
    start_ms: u64,
    /// Record management's changes for the forwarding threads.
    record: bool,
    changes: Vec<Change>,
    /// The forwarding threads' published counters, summed into the
    /// status datasets.
    peers: Vec<Arc<Mutex<ThreadStats>>>,
}

/// A packet past [`Core::admit`].
enum Admitted<'a> {
    /// The packet as received, with its NDNLPv2 header when it has one
    /// (a view of the received bytes: nothing copied).
    Whole(Option<LpView<'a>>),
    /// A packet completed from fragments: the whole LpPacket's bytes.
    Reassembled(Vec<u8>),
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn strategy_name(s: Strategy) -> Name {
    let (n, v, _) = STRATEGIES
        .iter()
        .find(|x| x.2 == s)
        .copied()
        .unwrap_or(STRATEGIES[0]);
    let mut name = Name::from_components(
        [b"localhost".as_slice(), b"nfd", b"strategy", n.as_bytes()]
            .into_iter()
            .map(NameComponent::generic),
    );
    name.push(&NameComponent::version(v));
    name
}

/// The strategy a `strategy-choice/set` name asks for
/// (`/localhost/nfd/strategy/<name>[/<version>]`).
fn strategy_of(name: &Name) -> Option<Strategy> {
    let c = |k: usize| name.get(k).map(|c| c.value());
    if c(0)? != b"localhost" || c(1)? != b"nfd" || c(2)? != b"strategy" {
        return None;
    }
    let (_, v, s) = STRATEGIES
        .iter()
        .find(|x| x.0.as_bytes() == c(3).unwrap_or_default())?;
    match name.len() {
        4 => Some(*s),
        5 if name.get(4)?.as_version() == Some(*v) => Some(*s),
        _ => None,
    }
}

impl Core {
    /// A core with an empty FIB.
    pub fn new(cfg: &NdndConfig) -> Result<Core, String> {
        Core::with_token(cfg, None)
    }

    /// The core of forwarding thread `thread`: its Interests go upstream
    /// with [`thread_token`]`(thread)`.
    pub fn for_thread(cfg: &NdndConfig, thread: u8) -> Result<Core, String> {
        Core::with_token(cfg, Some(thread_token(thread)))
    }

    /// The polling thread's core of a multi-threaded forwarder: management
    /// and datasets, recording the [`Change`]s for the forwarding threads
    /// and summing their `peers` counters; no Content Store of its own.
    pub fn for_dispatch(
        cfg: &NdndConfig,
        peers: Vec<Arc<Mutex<ThreadStats>>>,
    ) -> Result<Core, String> {
        let mut c = Core::with_token(
            &NdndConfig {
                cs_packets: 0,
                ..cfg.clone()
            },
            None,
        )?;
        c.record = true;
        c.peers = peers;
        Ok(c)
    }

    fn with_token(cfg: &NdndConfig, upstream_token: Option<PitToken>) -> Result<Core, String> {
        let fw_cfg = FwConfig {
            pit: match cfg.pit {
                PitKind::Exact => PitMode::Exact(ExactPitConfig::default()),
                PitKind::Fingerprint => PitMode::Fingerprint(FingerprintPitConfig {
                    faces: cfg.max_faces,
                    ..FingerprintPitConfig::default()
                }),
            },
            cs: (cfg.cs_packets > 0).then(|| CsConfig {
                capacity_packets: cfg.cs_packets,
                capacity_bytes: cfg.cs_packets.saturating_mul(MAX_PACKET).min(1 << 32),
                policy: match cfg.cs_policy {
                    CsPolicy::Lru => Policy::Lru,
                    CsPolicy::Lfu => Policy::Lfu,
                },
                admit_after: cfg.cs_admit_after,
                ..CsConfig::default()
            }),
            max_faces: cfg.max_faces,
            upstream_token,
            ..FwConfig::default()
        };
        let fw = Forwarder::new(fw_cfg).map_err(|e| format!("forwarder config: {e}"))?;
        let fib = FibControl::new(FibConfig {
            max_components: 32,
            ..FibConfig::default()
        })
        .map_err(|e| format!("fib config: {e}"))?;
        Ok(Core {
            fw,
            fib,
            rib: Rib::new(),
            reasm: Reassembler::new(cfg.reasm_max_partial, cfg.reasm_timeout_ms),
            actions: Actions::new(),
            counters: CoreCounters::default(),
            faces: BTreeMap::new(),
            choices: BTreeMap::new(),
            datasets: VecDeque::new(),
            last_version: 0,
            start_ms: wall_ms(),
            record: false,
            changes: Vec::new(),
            peers: Vec::new(),
        })
    }

    /// The changes recorded since the last call (polling thread of a
    /// multi-threaded forwarder), in order.
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// Apply a change recorded by the polling thread's core.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::FaceOpened(id, info) => self.face_opened(id, info),
            Change::FaceClosed(id) => self.face_closed(id),
            Change::FaceFlags(id, flags) => {
                if let Some(f) = self.faces.get_mut(&id) {
                    f.flags = flags;
                }
            }
            // The polling thread's FIB accepted the same change; a FIB
            // refusing it here would refuse it there too.
            Change::Route(name, face, cost) => {
                let _ = self.add_route(&name, face, cost);
            }
            Change::Unroute(name, face) => {
                let _ = self.remove_route(&name, face);
            }
            Change::Strategy(name, Some(s)) => {
                if self.fw.strategy_choice_mut().set(&name, s) && !name.is_empty() {
                    self.choices.insert(name.value().to_vec(), (name, s));
                }
            }
            Change::Strategy(name, None) => {
                self.fw.strategy_choice_mut().unset(&name);
                self.choices.remove(name.value());
            }
        }
    }

    /// What this core publishes as a forwarding thread.
    pub fn thread_stats(&self, packets: u64) -> ThreadStats {
        ThreadStats {
            packets,
            core: self.counters,
            fw: *self.fw.counters(),
            general: self.own_general_status(),
            faces: self.own_face_statuses(),
        }
    }

    /// What each forwarding thread last published (empty on a core with
    /// no forwarding threads).
    pub fn peer_thread_stats(&self) -> Vec<ThreadStats> {
        self.peer_stats()
    }

    fn peer_stats(&self) -> Vec<ThreadStats> {
        self.peers
            .iter()
            .map(|p| p.lock().map(|s| s.clone()).unwrap_or_default())
            .collect()
    }

    /// The core counters, the forwarding threads' added.
    pub fn total_counters(&self) -> CoreCounters {
        let mut c = self.counters;
        for p in self.peer_stats() {
            add_core_counters(&mut c, &p.core);
        }
        c
    }

    /// The pipeline counters, the forwarding threads' added.
    pub fn total_fw_counters(&self) -> FwCounters {
        let mut c = *self.fw.counters();
        for p in self.peer_stats() {
            add_fw_counters(&mut c, &p.fw);
        }
        c
    }

    /// PIT entries, the forwarding threads' added.
    pub fn total_pit_len(&self) -> usize {
        self.peer_stats()
            .iter()
            .fold(self.fw.pit_len(), |n, p| n + p.general.pit_entries as usize)
    }

    /// Packets each forwarding thread took from its queue (empty with one
    /// thread).
    pub fn thread_packets(&self) -> Vec<u64> {
        self.peer_stats().iter().map(|p| p.packets).collect()
    }

    /// A face opened: it is listed in `faces/list` until [`Self::face_closed`].
    pub fn face_opened(&mut self, face: FaceId, info: FaceInfo) {
        if self.record {
            self.changes.push(Change::FaceOpened(face, info.clone()));
        }
        let base = self.fw.face_counters(face);
        self.faces.insert(
            face,
            FaceEntry {
                info,
                flags: 0,
                base,
                bytes: FaceBytes::default(),
            },
        );
    }

    /// Take one packet received on `face` (`local`: a Unix face, or a
    /// TCP/UDP face whose peer is a loopback address). Appends what to
    /// send as `(face, bytes)` to `send`.
    pub fn receive(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        self.counters.packets_in += 1;
        self.counters.bytes_in += wire.len() as u64;
        if let Some(f) = self.faces.get_mut(&face) {
            f.bytes.in_bytes += wire.len() as u64;
        }
        let first_send = send.len();
        self.receive_inner(face, local, wire, now, send);
        self.count_out(&send[first_send..]);
    }

    fn receive_inner(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        match self.admit(face, local, wire, now, send) {
            None => {}
            Some(Admitted::Whole(lp)) => self.pipeline(face, lp, wire, now, send),
            Some(Admitted::Reassembled(whole)) => self.forward_parsed(face, &whole, now, send),
        }
    }

    /// The first half of [`Self::receive`]: size check, NDNLPv2 header
    /// (a view of `wire`), reassembly, management. `None` when the packet
    /// was consumed. Only fragments are copied (they outlive the datagram
    /// in the reassembler).
    fn admit<'a>(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &'a [u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) -> Option<Admitted<'a>> {
        if wire.len() > MAX_PACKET {
            self.counters.oversized += 1;
            return None;
        }
        if wire.first() != Some(&(tt::LP_PACKET as u8)) {
            return (!self.try_command(face, local, wire, None, send))
                .then_some(Admitted::Whole(None));
        }
        let Ok(lp) = LpView::parse(wire) else {
            self.counters.bad_lp += 1;
            return None;
        };
        if lp.frag_count.unwrap_or(1) <= 1 {
            return (!self.try_command(face, local, wire, Some(&lp), send))
                .then_some(Admitted::Whole(Some(lp)));
        }
        let whole = self.reasm.push(face, lp.to_owned(), now)?.to_wire();
        // The reassembler built `whole` from fragments that each decoded.
        let Ok(lp) = LpView::parse(&whole) else {
            self.counters.bad_lp += 1;
            return None;
        };
        if self.try_command(face, local, &whole, Some(&lp), send) {
            return None;
        }
        Some(Admitted::Reassembled(whole))
    }

    /// The dispatching half of [`Self::receive`] on the polling thread of
    /// a multi-threaded forwarder: counts the packet, reassembles it and
    /// answers management; `None` when the packet was consumed here.
    ///
    /// `pick` chooses the forwarding thread from the packet's NDNLPv2
    /// header (a view, when it has one) and its bytes; the result is the
    /// thread and the bytes to hand it (copied: they outlive the
    /// datagram).
    pub fn dispatch(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
        pick: impl FnOnce(Option<&LpView<'_>>, &[u8]) -> usize,
    ) -> Option<(usize, Vec<u8>)> {
        self.counters.packets_in += 1;
        self.counters.bytes_in += wire.len() as u64;
        if let Some(f) = self.faces.get_mut(&face) {
            f.bytes.in_bytes += wire.len() as u64;
        }
        let first_send = send.len();
        let a = self.admit(face, local, wire, now, send);
        self.count_out(&send[first_send..]);
        match a? {
            Admitted::Whole(lp) => Some((pick(lp.as_ref(), wire), wire.to_vec())),
            Admitted::Reassembled(whole) => {
                let lp = LpView::parse(&whole).ok();
                Some((pick(lp.as_ref(), &whole), whole))
            }
        }
    }

    /// The forwarding half of [`Self::receive`] on a forwarding thread:
    /// `wire` was counted, reassembled and checked for management by
    /// [`Self::dispatch`].
    pub fn forward(
        &mut self,
        face: FaceId,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        let first_send = send.len();
        self.forward_parsed(face, wire, now, send);
        self.count_out(&send[first_send..]);
    }

    /// The pipeline on an admitted packet, its NDNLPv2 header read here.
    fn forward_parsed(
        &mut self,
        face: FaceId,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        let lp = if wire.first() == Some(&(tt::LP_PACKET as u8)) {
            match LpView::parse(wire) {
                Ok(lp) => Some(lp),
                Err(_) => {
                    self.counters.bad_lp += 1;
                    return;
                }
            }
        } else {
            None
        };
        self.pipeline(face, lp, wire, now, send);
    }

    fn count_out(&mut self, sent: &[(FaceId, Vec<u8>)]) {
        for (f, bytes) in sent {
            if let Some(f) = self.faces.get_mut(f) {
                f.bytes.out_bytes += bytes.len() as u64;
            }
        }
    }

    /// The pipeline: Interest, Data or Nack through the forwarder. `lp`
    /// is the NDNLPv2 header of `wire` when it is an LpPacket (handed on
    /// to the forwarder, which does not read it again).
    fn pipeline(
        &mut self,
        face: FaceId,
        lp: Option<LpView<'_>>,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        self.actions.clear();
        let is_interest = match &lp {
            Some(lp) => {
                lp.nack.is_none()
                    && lp.fragment.and_then(|f| f.first()) == Some(&(tt::INTEREST as u8))
            }
            None => wire.first() == Some(&(tt::INTEREST as u8)),
        };
        let next_hop = lp
            .filter(|_| is_interest && self.local_fields(face))
            .and_then(|lp| Some((lp.next_hop_face_id?, lp)));
        match (next_hop, lp) {
            (Some((nh, lp)), _) => self.forward_to_next_hop_face(face, &lp, wire, nh, now),
            (None, Some(lp)) => {
                let fib = self.fib.fib();
                let view = PacketView::Lp(lp);
                self.fw
                    .process_view(fib, face, view, wire, now, &mut self.actions);
            }
            (None, None) => {
                let fib = self.fib.fib();
                self.fw.process(fib, face, wire, now, &mut self.actions);
            }
        }
        for a in self.actions.sends() {
            let out = if self.local_fields(a.face) {
                // A Data answering an Interest came from the Content Store.
                let incoming = if is_interest && a.kind == ActionKind::Data {
                    FACE_ID_CONTENT_STORE
                } else {
                    u64::from(face)
                };
                LpWrap {
                    pit_token: a.token.as_ref().map(PitToken::as_bytes),
                    nack: match a.kind {
                        ActionKind::Nack(r) => Some(Nack { reason: Some(r) }),
                        _ => None,
                    },
                    incoming_face_id: Some(incoming),
                }
                .to_wire(self.actions.packet(a))
            } else {
                self.actions.to_wire(a)
            };
            send.push((a.face, out));
        }
    }

    /// Whether `face` enabled NDNLPv2 local fields (`faces/update`).
    fn local_fields(&self, face: FaceId) -> bool {
        self.faces
            .get(&face)
            .is_some_and(|f| f.flags & dataset::FLAG_LOCAL_FIELDS != 0)
    }

    /// An Interest whose NextHopFaceId names `nh`: through the pipeline
    /// (CS, PIT, loop detection) with a FIB of one route, to `nh`; Nack
    /// NoRoute when no face `nh` is open.
    fn forward_to_next_hop_face(
        &mut self,
        face: FaceId,
        lp: &LpView<'_>,
        input: &[u8],
        nh: u64,
        now: Millis,
    ) {
        let Some(Ok(interest)) = lp.fragment.map(Interest::decode) else {
            let fib = self.fib.fib();
            self.fw.process(fib, face, input, now, &mut self.actions);
            return;
        };
        let token = lp.pit_token.and_then(PitToken::new);
        let Ok(mut one) = FibControl::new(FibConfig {
            max_components: 1,
            ..FibConfig::default()
        }) else {
            return;
        };
        let target = FaceId::try_from(nh)
            .ok()
            .filter(|f| self.faces.contains_key(f));
        if let Some(t) = target {
            if one
                .insert(&interest.name.prefix(1), &[NextHop { face: t, cost: 0 }])
                .is_ok()
            {
                self.counters.next_hop_face_id += 1;
            }
        }
        self.fw
            .interest(one.fib(), face, interest, token, now, &mut self.actions);
    }

    /// Answer a management command or dataset Interest; `false` when
    /// `wire` is not one.
    fn try_command(
        &mut self,
        face: FaceId,
        local: bool,
        wire: &[u8],
        lp: Option<&LpView<'_>>,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) -> bool {
        let (frag, token, nack) = match lp {
            Some(lp) => match lp.fragment {
                Some(f) => (f, lp.pit_token, lp.nack.is_some()),
                None => return false,
            },
            None => (wire, None, false),
        };
        if nack || frag.first() != Some(&(tt::INTEREST as u8)) {
            return false;
        }
        // Most Interests are not management: look at the name through the
        // borrowed view, and decode the owned Interest only for commands.
        let Ok(view) = InterestView::parse(frag) else {
            return false;
        };
        if !mgmt::is_management_name(view.name) {
            return false;
        }
        let interest = view.to_owned();
        let with_token = |data: Vec<u8>| match token {
            Some(t) => LpWrap {
                pit_token: Some(t),
                ..LpWrap::default()
            }
            .to_wire(&data),
            None => data,
        };
        if let Some(kind) = Dataset::of(&interest.name) {
            match self.dataset(kind, local, &interest) {
                Some(seg) => {
                    self.counters.dataset_segments += 1;
                    send.push((face, with_token(seg)));
                }
                None => self.counters.dataset_misses += 1,
            }
            return true;
        }
        self.counters.commands += 1;
        let (code, text, body) = self.command(face, local, &interest);
        if code != 200 {
            self.counters.commands_refused += 1;
        }
        send.push((
            face,
            with_token(mgmt::response(&interest, code, &text, body.as_ref())),
        ));
        true
    }

    /// The segment a dataset Interest asks for: a new version for
    /// `/localhost/nfd/<module>/<dataset>`, a held one for
    /// `.../<version>/<segment>`; `None` (no answer, as NFD) from a
    /// non-local face or for a version no longer held.
    fn dataset(&mut self, kind: Dataset, local: bool, interest: &Interest) -> Option<Vec<u8>> {
        let n = &interest.name;
        if !local || n.get(0)?.value() != b"localhost" {
            return None;
        }
        match n.len() {
            4 => {
                let content = self.dataset_content(kind);
                let version = wall_ms().max(self.last_version + 1);
                self.last_version = version;
                let segs = dataset::segment(n, version, &content);
                let first = segs.first().cloned();
                let mut held = n.clone();
                held.push(&NameComponent::version(version));
                self.datasets.push_back((held, segs));
                let bytes = |d: &VecDeque<(Name, Vec<Vec<u8>>)>| -> usize {
                    d.iter().flat_map(|(_, s)| s).map(Vec::len).sum()
                };
                while self.datasets.len() > DATASETS_HELD
                    || (self.datasets.len() > 1 && bytes(&self.datasets) > DATASETS_HELD_BYTES)
                {
                    self.datasets.pop_front();
                }
                first
            }
            6 => {
                let seg = n.get(5)?.as_segment()?;
                n.get(4)?.as_version()?;
                let prefix = n.prefix(5);
                let (_, segs) = self.datasets.iter().find(|(p, _)| *p == prefix)?;
                segs.get(usize::try_from(seg).ok()?).cloned()
            }
            _ => None,
        }
    }

    fn dataset_content(&self, kind: Dataset) -> Vec<u8> {
        let mut v = Vec::new();
        match kind {
            Dataset::General => v = self.general_status().encode(),
            Dataset::Faces => {
                for f in self.face_statuses() {
                    f.encode(&mut v);
                }
            }
            Dataset::Fib => {
                for e in self.fib_entries() {
                    e.encode(&mut v);
                }
            }
            Dataset::StrategyChoice => {
                for e in self.strategy_choices() {
                    e.encode(&mut v);
                }
            }
        }
        v
    }

    /// ForwarderStatus now, the forwarding threads' counters added.
    pub fn general_status(&self) -> GeneralStatus {
        let mut g = self.own_general_status();
        for p in self.peer_stats() {
            let o = &p.general;
            g.pit_entries += o.pit_entries;
            g.cs_entries += o.cs_entries;
            g.in_interests += o.in_interests;
            g.in_data += o.in_data;
            g.in_nacks += o.in_nacks;
            g.out_interests += o.out_interests;
            g.out_data += o.out_data;
            g.out_nacks += o.out_nacks;
            g.satisfied += o.satisfied;
            g.unsatisfied += o.unsatisfied;
        }
        g
    }

    fn own_general_status(&self) -> GeneralStatus {
        let mut sum = FaceCounters::default();
        for id in 0..self.fw.config().max_faces {
            let c = self.fw.face_counters(id);
            sum.in_interests += c.in_interests;
            sum.in_data += c.in_data;
            sum.in_nacks += c.in_nacks;
            sum.out_interests += c.out_interests;
            sum.out_data += c.out_data;
            sum.out_nacks += c.out_nacks;
        }
        let fw = self.fw.counters();
        GeneralStatus {
            version: format!("nexthop {}", env!("CARGO_PKG_VERSION")),
            start_ms: self.start_ms,
            current_ms: wall_ms(),
            name_tree_entries: (self.rib.len() + self.choices.len() + 1) as u64,
            fib_entries: self.rib.len() as u64,
            pit_entries: self.fw.pit_len() as u64,
            measurement_entries: 0,
            cs_entries: self.fw.content_store().map_or(0, |c| c.len()) as u64,
            in_interests: sum.in_interests,
            in_data: sum.in_data,
            in_nacks: sum.in_nacks,
            out_interests: sum.out_interests,
            out_data: sum.out_data,
            out_nacks: sum.out_nacks,
            satisfied: fw.satisfied,
            unsatisfied: self.fw.exact_pit().map_or(0, |p| p.stats().expired),
        }
    }

    /// FaceStatus of every open face, in id order, the forwarding
    /// threads' counters added.
    pub fn face_statuses(&self) -> Vec<FaceStatus> {
        let mut own = self.own_face_statuses();
        for p in self.peer_stats() {
            for o in &p.faces {
                let Some(f) = own.iter_mut().find(|f| f.face_id == o.face_id) else {
                    continue;
                };
                f.in_interests += o.in_interests;
                f.in_data += o.in_data;
                f.in_nacks += o.in_nacks;
                f.out_interests += o.out_interests;
                f.out_data += o.out_data;
                f.out_nacks += o.out_nacks;
                f.in_bytes += o.in_bytes;
                f.out_bytes += o.out_bytes;
            }
        }
        own
    }

    fn own_face_statuses(&self) -> Vec<FaceStatus> {
        self.faces
            .iter()
            .map(|(&id, f)| {
                let c = self.fw.face_counters(id);
                let b = &f.base;
                FaceStatus {
                    face_id: u64::from(id),
                    uri: f.info.uri.clone(),
                    local_uri: f.info.local_uri.clone(),
                    scope: u64::from(f.info.local),
                    persistency: 1,
                    link_type: 0,
                    mtu: f.info.mtu,
                    in_interests: c.in_interests.saturating_sub(b.in_interests),
                    in_data: c.in_data.saturating_sub(b.in_data),
                    in_nacks: c.in_nacks.saturating_sub(b.in_nacks),
                    out_interests: c.out_interests.saturating_sub(b.out_interests),
                    out_data: c.out_data.saturating_sub(b.out_data),
                    out_nacks: c.out_nacks.saturating_sub(b.out_nacks),
                    in_bytes: f.bytes.in_bytes,
                    out_bytes: f.bytes.out_bytes,
                    flags: f.flags,
                }
            })
            .collect()
    }

    /// FibEntry of every route, in name order, next hops by cost.
    pub fn fib_entries(&self) -> Vec<FibEntry> {
        self.routes()
            .map(|(n, hops)| {
                let mut h: Vec<(u64, u64)> = hops
                    .iter()
                    .map(|h| (u64::from(h.face), u64::from(h.cost)))
                    .collect();
                h.sort_by_key(|&(f, c)| (c, f));
                FibEntry {
                    name: n.clone(),
                    next_hops: h,
                }
            })
            .collect()
    }

    /// StrategyChoice of `/` and every prefix set, in name order.
    pub fn strategy_choices(&self) -> Vec<StrategyChoiceEntry> {
        let root = self.fw.strategy_choice().find(&Name::new());
        std::iter::once((Name::new(), root))
            .chain(self.choices.values().cloned())
            .map(|(name, s)| StrategyChoiceEntry {
                name,
                strategy: strategy_name(s),
            })
            .collect()
    }

    fn command(
        &mut self,
        face: FaceId,
        local: bool,
        interest: &Interest,
    ) -> (u64, String, Option<ControlParameters>) {
        let n = &interest.name;
        let comp = |k: usize| n.get(k).map(|c| c.value());
        if comp(0) == Some(b"localhost".as_slice()) && !local {
            return (403, "/localhost command from a non-local face".into(), None);
        }
        let known = matches!(
            (comp(2), comp(3)),
            (Some(b"rib"), Some(b"register" | b"unregister"))
                | (Some(b"strategy-choice"), Some(b"set" | b"unset"))
                | (Some(b"faces"), Some(b"update"))
        );
        if !known {
            return (501, "unsupported command".into(), None);
        }
        let cmd = match mgmt::parse_command(interest) {
            Ok(c) => c,
            Err((code, text)) => return (code, text, None),
        };
        match cmd.module.as_slice() {
            b"strategy-choice" => self.strategy_command(&cmd),
            b"faces" => self.faces_update(face, &cmd),
            _ => self.rib_command(face, &cmd),
        }
    }

    fn rib_command(
        &mut self,
        face: FaceId,
        cmd: &mgmt::Command,
    ) -> (u64, String, Option<ControlParameters>) {
        let Some(name) = cmd.params.name.clone() else {
            return (400, "ControlParameters without a Name".into(), None);
        };
        let target = match cmd.params.face_id {
            None | Some(0) => face,
            Some(f) => match FaceId::try_from(f) {
                Ok(f) if f < self.fw.config().max_faces => f,
                _ => return (410, "no such face".into(), None),
            },
        };
        let cost = cmd.params.cost.unwrap_or(0);
        let mut body = ControlParameters {
            name: Some(name.clone()),
            face_id: Some(u64::from(target)),
            origin: Some(cmd.params.origin.unwrap_or(0)),
            cost: Some(cost),
            flags: Some(cmd.params.flags.unwrap_or(1)),
            expiration_ms: cmd.params.expiration_ms,
            ..ControlParameters::default()
        };
        let r = if cmd.verb == b"register" {
            let Ok(cost) = u32::try_from(cost) else {
                return (400, "cost out of range".into(), None);
            };
            self.add_route(&name, target, cost)
        } else {
            body.cost = None;
            body.flags = None;
            self.remove_route(&name, target)
        };
        match r {
            Ok(()) => (200, "OK".into(), Some(body)),
            Err(e) => (400, e, None),
        }
    }

    /// `strategy-choice/set` (Name, Strategy) and `unset` (Name).
    fn strategy_command(
        &mut self,
        cmd: &mgmt::Command,
    ) -> (u64, String, Option<ControlParameters>) {
        let Some(name) = cmd.params.name.clone() else {
            return (400, "ControlParameters without a Name".into(), None);
        };
        let key = name.value().to_vec();
        if cmd.verb == b"unset" {
            if name.is_empty() {
                return (400, "the strategy of / cannot be unset".into(), None);
            }
            self.fw.strategy_choice_mut().unset(&name);
            self.choices.remove(&key);
            if self.record {
                self.changes.push(Change::Strategy(name.clone(), None));
            }
            let body = ControlParameters {
                name: Some(name),
                ..ControlParameters::default()
            };
            return (200, "OK".into(), Some(body));
        }
        let Some(sname) = &cmd.params.strategy else {
            return (400, "ControlParameters without a Strategy".into(), None);
        };
        let Some(s) = strategy_of(sname) else {
            return (404, "strategy not found".into(), None);
        };
        if !self.fw.strategy_choice_mut().set(&name, s) {
            return (504, "too many strategy choices".into(), None);
        }
        if !name.is_empty() {
            self.choices.insert(key, (name.clone(), s));
        }
        if self.record {
            self.changes.push(Change::Strategy(name.clone(), Some(s)));
        }
        let body = ControlParameters {
            name: Some(name),
            strategy: Some(strategy_name(s)),
            ..ControlParameters::default()
        };
        (200, "OK".into(), Some(body))
    }

    /// `faces/update` (FaceId, Flags, Mask): the LocalFieldsEnabled bit.
    fn faces_update(
        &mut self,
        face: FaceId,
        cmd: &mgmt::Command,
    ) -> (u64, String, Option<ControlParameters>) {
        let target = match cmd.params.face_id {
            None | Some(0) => Some(face),
            Some(f) => FaceId::try_from(f).ok(),
        };
        let Some((id, f)) = target.and_then(|t| Some((t, self.faces.get_mut(&t)?))) else {
            return (404, "no such face".into(), None);
        };
        let (flags, mask) = (cmd.params.flags, cmd.params.mask);
        if flags.is_some() != mask.is_some() {
            return (409, "Flags and Mask go together".into(), None);
        }
        if let (Some(flags), Some(mask)) = (flags, mask) {
            let want = flags & mask & dataset::FLAG_LOCAL_FIELDS != 0;
            if mask & dataset::FLAG_LOCAL_FIELDS != 0 && want && !f.info.local {
                return (409, "LocalFieldsEnabled on a non-local face".into(), None);
            }
            if mask & dataset::FLAG_LOCAL_FIELDS != 0 {
                f.flags =
                    (f.flags & !dataset::FLAG_LOCAL_FIELDS) | (flags & dataset::FLAG_LOCAL_FIELDS);
                if self.record {
                    self.changes.push(Change::FaceFlags(id, f.flags));
                }
            }
        }
        let body = ControlParameters {
            face_id: Some(u64::from(id)),
            flags: Some(f.flags),
            face_persistency: Some(1),
            ..ControlParameters::default()
        };
        (200, "OK".into(), Some(body))
    }

    /// Route `prefix` to `face` with `cost` (replacing its cost).
    pub fn add_route(&mut self, prefix: &Name, face: FaceId, cost: u32) -> Result<(), String> {
        let key = prefix.value().to_vec();
        let mut hops = self.rib.get(&key).map(|e| e.1.clone()).unwrap_or_default();
        hops.retain(|h| h.face != face);
        hops.push(NextHop { face, cost });
        self.fib.insert(prefix, &hops).map_err(|e| e.to_string())?;
        self.rib.insert(key, (prefix.clone(), hops));
        if self.record {
            self.changes.push(Change::Route(prefix.clone(), face, cost));
        }
        Ok(())
    }

    /// Remove `face` from the routes of `prefix` (no route: not an error).
    pub fn remove_route(&mut self, prefix: &Name, face: FaceId) -> Result<(), String> {
        let key = prefix.value().to_vec();
        if self.record {
            self.changes.push(Change::Unroute(prefix.clone(), face));
        }
        let Some((_, hops)) = self.rib.get_mut(&key) else {
            return Ok(());
        };
        hops.retain(|h| h.face != face);
        if hops.is_empty() {
            self.rib.remove(&key);
            self.fib.remove(prefix).map_err(|e| e.to_string())
        } else {
            let hops = hops.clone();
            self.fib.insert(prefix, &hops).map_err(|e| e.to_string())
        }
    }

    /// A face closed: its routes and partial packets go.
    pub fn face_closed(&mut self, face: FaceId) {
        if self.record {
            self.changes.push(Change::FaceClosed(face));
        }
        let record = std::mem::replace(&mut self.record, false);
        self.faces.remove(&face);
        self.reasm.face_closed(face);
        let prefixes: Vec<Name> = self
            .rib
            .values()
            .filter(|(_, h)| h.iter().any(|h| h.face == face))
            .map(|(n, _)| n.clone())
            .collect();
        for p in prefixes {
            // A removal of a prefix the FIB holds cannot fail for lack of it;
            // any other error leaves the FIB as it was.
            let _ = self.remove_route(&p, face);
        }
        self.record = record;
    }

    /// Periodic work: expire partial packets.
    pub fn tick(&mut self, now: Millis) {
        self.reasm.expire(now);
    }

    /// The routes: `(prefix, next hops)` in name order.
    pub fn routes(&self) -> impl Iterator<Item = (&Name, &[NextHop])> {
        self.rib.values().map(|(n, h)| (n, h.as_slice()))
    }

    /// The core's counters.
    pub fn counters(&self) -> &CoreCounters {
        &self.counters
    }

    /// The pipeline's configuration (PIT mode, Content Store).
    pub fn fw_config(&self) -> &FwConfig {
        self.fw.config()
    }

    /// The pipeline's counters.
    pub fn fw_counters(&self) -> &FwCounters {
        self.fw.counters()
    }

    /// The reassembly counters.
    pub fn reasm_counters(&self) -> &ReasmCounters {
        &self.reasm.counters
    }

    /// PIT entries.
    pub fn pit_len(&self) -> usize {
        self.fw.pit_len()
    }
}

/// The status datasets served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dataset {
    General,
    Faces,
    Fib,
    StrategyChoice,
}

impl Dataset {
    /// The dataset `/<scope>/nfd/<module>/<dataset>[/...]` names.
    fn of(name: &Name) -> Option<Dataset> {
        let c = |k: usize| name.get(k).map(|c| c.value());
        Some(match (c(2)?, c(3)?) {
            (b"status", b"general") => Dataset::General,
            (b"faces", b"list") => Dataset::Faces,
            (b"fib", b"list") => Dataset::Fib,
            (b"strategy-choice", b"list") => Dataset::StrategyChoice,
            _ => return None,
        })
    }
}
