//! The paper's app API (§6.1, Table 1) in Rust: what an app sees when the
//! switch asks it to decide a packet the cache missed, and how its answer
//! becomes outputs and (at most) one cache entry.
//!
//! * [`App`]: the switch calls [`App::on_packet`] on a miss (and
//!   [`App::on_tick`] as time passes, for timeouts). An app is a
//!   deterministic function of the packet's header and its own state.
//! * [`InPkt`]: the packet that missed. `mark(bit_pos, len)`,
//!   [`InPkt::mark_ingress`], `unmark`, `clear` say which header bits (and
//!   whether the ingress port) the decision used; [`InPkt::field`] and
//!   [`InPkt::bytes`] read and mark in one call. A mark past the frame's
//!   header poisons the packet: it is dropped with
//!   [`DropReason::MarkBeyondHeader`].
//! * [`OutPkt`]: what to send (`new_out_pkt` copies the in-packet):
//!   `register(state_id)`, `add_destination(port)`, `clear`, header
//!   rewrites ([`OutPkt::set_bytes`]) and the cache's arithmetic
//!   primitives ([`OutPkt::push_primitive`]), so that what is sent equals
//!   what the cached entry will do to later packets.
//!   [`OutPkt::raw`] is a packet the app made up (an ARP reply): never cached.
//! * `send(out_pkt, final)` ([`InPkt::send`]).
//! * [`Control`]: `new_state_id`, `removed(state_id)`, `get_ports`,
//!   `add_port`/`del_port`, `set_properties`/`get_properties`,
//!   `get_stats`, the clock, and proactive decisions
//!   ([`Control::new_in_pkt`], [`Control::push`]).
//!
//! [`decide`] runs an app on one packet and turns its answer into a
//! [`Reply`]: the frames to send now and the [`Decision`] to cache, if the
//! answer can be cached. A decision is cacheable when every out-packet was
//! derived from the in-packet and they differ only in their destinations
//! (the cache holds one set of rewrites per entry); its marks become the
//! entry's mask and the union of the registered state ids its
//! dependencies. A decision with no marks and no state is not cached
//! ([`DecisionCache::install`] says so). [`Switch`] is the whole switch on
//! one thread (cache in front of the app); the data-plane pipeline in
//! `nexthop-dataplane` runs the app on its own thread instead.

mod l2;
mod router;
mod slice;
mod switch;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::Duration;

use smallvec::SmallVec;
use thiserror::Error;

use crate::action::{Actions, Outcome, Primitive};
use crate::cache::{Counters, Decision, DecisionCache, InstallError, Installed, StateId};
use crate::key::{HeaderKey, Mask, PortId, KEY_BITS, KEY_BYTES};

pub use l2::{L2Config, L2Switch};
pub use router::{parse_routes, Iface, Prefix, Route, RouteError, Router};
pub use slice::{
    plan_slices, vlan_of, PlannedSlice, SliceCounters, SliceDemux, SliceError, SliceMatch,
    SlicePlan, SliceSpec, SlicedSwitch, MAX_SLICES,
};
pub use switch::{Switch, SwitchCounters};

/// Ports a switch may have at most (physical and tunnel together).
pub const MAX_SWITCH_PORTS: usize = 4096;
/// Properties one port may hold at most.
pub const MAX_PROPERTIES: usize = 64;

/// An app: the forwarding logic the cache imitates.
///
/// `Send`: the data-plane pipeline runs it on a thread of its own.
pub trait App: Send {
    /// The app's name (logs, counters).
    fn name(&self) -> &str;

    /// Decide for a packet the cache missed: mark what was read, build
    /// out-packets, register the state used, send. Returning without a
    /// final `send` finishes the decision with what was sent (nothing:
    /// a drop). An error drops the packet, counted and logged.
    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError>;

    /// Time passed ([`Control::now`]): expire state, revoking what
    /// depended on it. Called by the switch between packets.
    fn on_tick(&mut self, _ctl: &mut Control<'_>) {}

    /// Which missed frames are control traffic, served from the control
    /// queue with weighted priority over data misses. Asked once, when the
    /// switch starts; by default ARP ([`ControlFilter::default`]).
    fn control_filter(&self) -> ControlFilter {
        ControlFilter::default()
    }
}

/// Which frames an app counts as control traffic ([`App::control_filter`]):
/// those of one of `ethertypes` (the EtherType after at most one 802.1Q
/// tag) or sent to one of `dst_macs` (the switch's own addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlFilter {
    /// EtherTypes that are control.
    pub ethertypes: Vec<u16>,
    /// Destination MAC addresses that are control.
    pub dst_macs: Vec<[u8; 6]>,
}

impl Default for ControlFilter {
    /// ARP.
    fn default() -> Self {
        ControlFilter {
            ethertypes: vec![ControlFilter::ARP],
            dst_macs: Vec::new(),
        }
    }
}

impl ControlFilter {
    /// The EtherType of ARP.
    pub const ARP: u16 = 0x0806;

    /// No frame is control.
    pub fn none() -> ControlFilter {
        ControlFilter {
            ethertypes: Vec::new(),
            dst_macs: Vec::new(),
        }
    }

    /// Whether `frame` (any bytes) is control.
    pub fn matches(&self, frame: &[u8]) -> bool {
        let dst_is_ours = frame
            .get(..6)
            .is_some_and(|d| self.dst_macs.iter().any(|m| m[..] == *d));
        if dst_is_ours {
            return true;
        }
        let at = |i: usize| {
            frame
                .get(i..i + 2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
        };
        let ethertype = match at(12) {
            Some(0x8100) => at(16),
            t => t,
        };
        ethertype.is_some_and(|t| self.ethertypes.contains(&t))
    }
}

/// An app's own failure: the packet is dropped with
/// [`DropReason::AppError`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct AppError(pub String);

/// A call the API refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// A mark (or a read) reaches past the frame's header (its first
    /// `min(len, KEY_BYTES)` bytes).
    #[error("bits {bit_pos}..{bit_pos}+{len} lie past the {header}-byte header")]
    MarkBeyondHeader {
        /// First bit.
        bit_pos: usize,
        /// Bits.
        len: usize,
        /// Header bytes of the frame.
        header: usize,
    },
    /// A read of more than 64 bits with [`InPkt::field`].
    #[error("a field is at most 64 bits, {0} asked")]
    FieldTooWide(usize),
    /// A port the switch does not have.
    #[error("port {0} does not exist")]
    UnknownPort(PortId),
    /// A rewrite or primitive the cache cannot hold.
    #[error("{0}")]
    Action(#[from] crate::action::ActionError),
    /// `send` after a final `send`.
    #[error("the decision was already final")]
    AlreadyFinal,
    /// No more state ids (the cache's `max_state_ids`).
    #[error("{0}")]
    State(#[from] crate::cache::StateError),
    /// No more ports ([`MAX_SWITCH_PORTS`]) or properties
    /// ([`MAX_PROPERTIES`]).
    #[error("too many {0}")]
    TooMany(&'static str),
    /// A proactive decision the cache refused.
    #[error("{0}")]
    Install(#[from] InstallError),
    /// A proactive decision that would have dropped its packet for this
    /// reason.
    #[error("the decision is refused: {}", .0.name())]
    Refused(DropReason),
}

impl From<ApiError> for AppError {
    fn from(e: ApiError) -> AppError {
        AppError(e.to_string())
    }
}

/// Why a packet that went to the app was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DropReason {
    /// The app marked or read bits past the frame's header.
    MarkBeyondHeader,
    /// The app sent to a port the switch does not have.
    UnknownPort,
    /// A rewrite or primitive past the frame or the header key.
    BadAction,
    /// The app returned an error.
    AppError,
    /// The app panicked.
    AppPanic,
    /// A TTL / hop-limit primitive found 0 or 1.
    TtlExpired,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 6] = [
        DropReason::MarkBeyondHeader,
        DropReason::UnknownPort,
        DropReason::BadAction,
        DropReason::AppError,
        DropReason::AppPanic,
        DropReason::TtlExpired,
    ];

    /// The name used in counters and JSON.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::MarkBeyondHeader => "mark_beyond_header",
            DropReason::UnknownPort => "unknown_port",
            DropReason::BadAction => "bad_action",
            DropReason::AppError => "app_error",
            DropReason::AppPanic => "app_panic",
            DropReason::TtlExpired => "ttl_expired",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counts per [`DropReason`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts([u64; 6]);

impl DropCounts {
    /// Count one drop.
    pub fn add(&mut self, r: DropReason) {
        self.0[r.index()] += 1;
    }

    /// Drops for `r`.
    pub fn get(&self, r: DropReason) -> u64 {
        self.0[r.index()]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Add `other`'s counts.
    pub fn merge(&mut self, other: &DropCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// `(reason, count)` for every reason.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.into_iter().map(|r| (r, self.get(r)))
    }
}

/// A packet the cache missed, as the app sees it.
#[derive(Debug)]
pub struct InPkt {
    frame: Vec<u8>,
    in_port: PortId,
    mask: Mask,
    /// Inline for the usual one (no allocation per decision).
    outs: SmallVec<[OutPkt; 1]>,
    final_sent: bool,
    poisoned: Option<DropReason>,
}

impl InPkt {
    /// `frame` received on `in_port`.
    pub fn new(frame: Vec<u8>, in_port: PortId) -> InPkt {
        InPkt {
            frame,
            in_port,
            mask: Mask::new(),
            outs: SmallVec::new(),
            final_sent: false,
            poisoned: None,
        }
    }

    /// The whole frame. Reading it marks nothing: mark what the decision
    /// used (or read through [`Self::field`] / [`Self::bytes`]).
    pub fn data(&self) -> &[u8] {
        &self.frame
    }

    /// The frame's length.
    pub fn len(&self) -> usize {
        self.frame.len()
    }

    /// Whether the frame is empty.
    pub fn is_empty(&self) -> bool {
        self.frame.is_empty()
    }

    /// Header bytes the cache sees (`min(len, KEY_BYTES)`): marks must lie
    /// within them.
    pub fn header_len(&self) -> usize {
        self.frame.len().min(KEY_BYTES)
    }

    /// The ingress port, without marking it (the decision must not depend
    /// on it unless [`Self::mark_ingress`] is called).
    pub fn in_port(&self) -> PortId {
        self.in_port
    }

    /// The marks so far.
    pub fn mask(&self) -> &Mask {
        &self.mask
    }

    fn check(&mut self, bit_pos: usize, len: usize) -> Result<(), ApiError> {
        let header = self.header_len();
        match bit_pos.checked_add(len) {
            Some(end) if end <= header * 8 && end <= KEY_BITS => Ok(()),
            _ => {
                self.poisoned = Some(DropReason::MarkBeyondHeader);
                Err(ApiError::MarkBeyondHeader {
                    bit_pos,
                    len,
                    header,
                })
            }
        }
    }

    /// Mark `len` bits from bit `bit_pos` (bit 0: the most significant bit
    /// of byte 0) as used by the decision. Past the header: an error, and
    /// the packet will be dropped ([`DropReason::MarkBeyondHeader`]).
    pub fn mark(&mut self, bit_pos: usize, len: usize) -> Result<(), ApiError> {
        self.check(bit_pos, len)?;
        self.mask
            .mark(bit_pos, len)
            .map_err(|_| ApiError::MarkBeyondHeader {
                bit_pos,
                len,
                header: self.header_len(),
            })
    }

    /// Unmark `len` bits from `bit_pos`.
    pub fn unmark(&mut self, bit_pos: usize, len: usize) -> Result<(), ApiError> {
        self.check(bit_pos, len)?;
        self.mask
            .unmark(bit_pos, len)
            .map_err(|_| ApiError::MarkBeyondHeader {
                bit_pos,
                len,
                header: self.header_len(),
            })
    }

    /// Mark the ingress port as used and return it.
    pub fn mark_ingress(&mut self) -> PortId {
        self.mask.mark_ingress();
        self.in_port
    }

    /// Unmark everything (bits and ingress port).
    pub fn clear(&mut self) {
        self.mask.clear();
    }

    /// The decision depended on the frame having at least `len` header
    /// bytes ([`Mask::require_len`]); past the header: an error (and a
    /// drop).
    pub fn require_len(&mut self, len: usize) -> Result<(), ApiError> {
        self.check(0, len.saturating_mul(8))?;
        self.mask
            .require_len(len)
            .map_err(|_| ApiError::MarkBeyondHeader {
                bit_pos: 0,
                len: len.saturating_mul(8),
                header: self.header_len(),
            })
    }

    /// Mark and read `len` ≤ 64 bits from `bit_pos`, as an unsigned
    /// number (big-endian bit order).
    pub fn field(&mut self, bit_pos: usize, len: usize) -> Result<u64, ApiError> {
        if len > 64 {
            return Err(ApiError::FieldTooWide(len));
        }
        self.mark(bit_pos, len)?;
        let mut v = 0u64;
        for bit in bit_pos..bit_pos + len {
            let b = (self.frame[bit / 8] >> (7 - bit % 8)) & 1;
            v = v << 1 | u64::from(b);
        }
        Ok(v)
    }

    /// Mark and read bytes `start..start + len`.
    pub fn bytes(&mut self, start: usize, len: usize) -> Result<&[u8], ApiError> {
        let (Some(pos), Some(n)) = (start.checked_mul(8), len.checked_mul(8)) else {
            self.poisoned = Some(DropReason::MarkBeyondHeader);
            return Err(ApiError::MarkBeyondHeader {
                bit_pos: usize::MAX,
                len,
                header: self.header_len(),
            });
        };
        self.mark(pos, n)?;
        Ok(&self.frame[start..start + len])
    }

    /// A copy of this packet to send (the paper's `new_out_pkt`): no
    /// destinations, no registrations.
    pub fn new_out_pkt(&self) -> OutPkt {
        OutPkt {
            raw: None,
            actions: Actions::drop(),
            states: SmallVec::new(),
            poisoned: None,
        }
    }

    /// Send `out` (the paper's `send(out_pkt, final)`); `final_` ends the
    /// decision. A send after the final one is refused.
    pub fn send(&mut self, out: OutPkt, final_: bool) -> Result<(), ApiError> {
        if self.final_sent {
            return Err(ApiError::AlreadyFinal);
        }
        self.outs.push(out);
        self.final_sent = final_;
        Ok(())
    }
}

/// A packet to send: a copy of the in-packet with rewrites and
/// primitives, or a packet the app made up ([`OutPkt::raw`]).
#[derive(Clone, Debug)]
pub struct OutPkt {
    raw: Option<Vec<u8>>,
    actions: Actions,
    /// Inline up to 4 (no allocation per decision).
    states: SmallVec<[StateId; 4]>,
    poisoned: Option<DropReason>,
}

impl OutPkt {
    /// A packet the app made up (a reply it answers itself). A decision
    /// that sends one is never cached.
    pub fn raw(frame: Vec<u8>) -> OutPkt {
        OutPkt {
            raw: Some(frame),
            actions: Actions::drop(),
            states: SmallVec::new(),
            poisoned: None,
        }
    }

    /// The decision depended on `id` (the paper's `register`): when the app
    /// calls [`Control::removed`] for it, the cached entry goes.
    pub fn register(&mut self, id: StateId) {
        if !self.states.contains(&id) {
            self.states.push(id);
        }
    }

    /// Send to `port` (the paper's `add_destination`). The port is checked
    /// against the switch's ports when the decision is made.
    pub fn add_destination(&mut self, port: PortId) {
        if self.actions.add_port(port).is_err() {
            self.poisoned = Some(DropReason::BadAction);
        }
    }

    /// Also send to the control port.
    pub fn to_controller(&mut self) {
        self.actions.set_controller(true);
    }

    /// Forget the destinations, registrations, rewrites and primitives.
    pub fn clear(&mut self) {
        self.actions = Actions::drop();
        self.states.clear();
        self.poisoned = None;
    }

    /// Overwrite `bytes` at byte `at` of the header.
    pub fn set_bytes(&mut self, at: usize, bytes: &[u8]) -> Result<(), ApiError> {
        self.actions.set_bytes(at, bytes).map_err(|e| {
            self.poisoned = Some(DropReason::BadAction);
            ApiError::from(e)
        })
    }

    /// Apply an arithmetic primitive (TTL / hop-limit decrement with the
    /// checksum update; see [`Primitive::ip_ttl_for`]).
    pub fn push_primitive(&mut self, p: Primitive) -> Result<(), ApiError> {
        self.actions.push_primitive(p).map_err(|e| {
            self.poisoned = Some(DropReason::BadAction);
            ApiError::from(e)
        })
    }

    /// The destinations so far.
    pub fn destinations(&self) -> &[PortId] {
        self.actions.ports()
    }

    /// The registered state ids.
    pub fn states(&self) -> &[StateId] {
        &self.states
    }
}

/// A port of the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Its number.
    pub id: PortId,
    /// What it is.
    pub kind: PortKind,
    /// The app's key/value properties ([`Control::set_properties`]).
    pub properties: BTreeMap<String, String>,
}

/// What a port is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PortKind {
    /// A port of the data plane (an interface, a pcap file).
    Physical,
    /// A port the app added ([`Control::add_port`]); the app's tunnels.
    Tunnel,
}

/// The switch's ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ports {
    ports: BTreeMap<PortId, PortInfo>,
}

impl Ports {
    /// Physical ports `ids` (duplicates merged; at most
    /// [`MAX_SWITCH_PORTS`] are kept).
    pub fn physical(ids: &[PortId]) -> Ports {
        let mut ports = BTreeMap::new();
        for &id in ids.iter().take(MAX_SWITCH_PORTS) {
            ports.insert(
                id,
                PortInfo {
                    id,
                    kind: PortKind::Physical,
                    properties: BTreeMap::new(),
                },
            );
        }
        Ports { ports }
    }

    /// Whether port `id` exists.
    pub fn contains(&self, id: PortId) -> bool {
        self.ports.contains_key(&id)
    }

    /// Every port number, sorted.
    pub fn ids(&self) -> Vec<PortId> {
        self.ports.keys().copied().collect()
    }

    /// Port `id`.
    pub fn get(&self, id: PortId) -> Option<&PortInfo> {
        self.ports.get(&id)
    }
}

/// Counters of the app side of a switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppCounters {
    /// Packets given to [`App::on_packet`].
    pub app_calls: u64,
    /// Decisions that could be cached (one derived out-packet set).
    pub cacheable: u64,
    /// Decisions that could not be (made-up packets, out-packets that
    /// differ in more than destinations).
    pub uncacheable: u64,
    /// Decisions the cache refused as wrong ([`InstallError`]).
    pub install_errors: u64,
    /// Packets dropped, by reason.
    pub drops: DropCounts,
    /// Proactive decisions pushed ([`Control::push`]).
    pub proactive: u64,
}

impl AppCounters {
    /// Add `o` (another app's, in another slice) to these.
    pub fn merge(&mut self, o: &AppCounters) {
        self.app_calls += o.app_calls;
        self.cacheable += o.cacheable;
        self.uncacheable += o.uncacheable;
        self.install_errors += o.install_errors;
        self.drops.merge(&o.drops);
        self.proactive += o.proactive;
    }
}

enum CacheRef<'a> {
    Owned(&'a mut DecisionCache),
    Shared(&'a Mutex<DecisionCache>),
}

impl CacheRef<'_> {
    fn with<R>(&mut self, f: impl FnOnce(&mut DecisionCache) -> R) -> R {
        match self {
            CacheRef::Owned(c) => f(c),
            // A worker that panicked while holding the lock left the cache
            // as consistent as any single call leaves it: keep going.
            CacheRef::Shared(m) => f(&mut m.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

/// What the app may do besides deciding a packet (the paper's Control
/// calls), for the duration of one app call.
pub struct Control<'a> {
    cache: CacheRef<'a>,
    ports: &'a mut Ports,
    counters: &'a mut AppCounters,
    now: Duration,
    /// Proactive decisions go into the cache only when the switch caches.
    caching: bool,
}

impl std::fmt::Debug for Control<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("ports", &self.ports)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// A snapshot of the switch's counters ([`Control::get_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// The cache's counters.
    pub cache: Counters,
    /// Cached entries now.
    pub entries: usize,
    /// Masks (subtables) now.
    pub masks: usize,
    /// Live state ids now.
    pub state_ids: usize,
    /// The app side's counters.
    pub app: AppCounters,
}

impl<'a> Control<'a> {
    /// Control over a cache the caller owns.
    pub fn owned(
        cache: &'a mut DecisionCache,
        ports: &'a mut Ports,
        counters: &'a mut AppCounters,
        now: Duration,
        caching: bool,
    ) -> Control<'a> {
        Control {
            cache: CacheRef::Owned(cache),
            ports,
            counters,
            now,
            caching,
        }
    }

    /// Control over a cache shared with the workers: each call locks it
    /// briefly (never while the app computes).
    pub fn shared(
        cache: &'a Mutex<DecisionCache>,
        ports: &'a mut Ports,
        counters: &'a mut AppCounters,
        now: Duration,
    ) -> Control<'a> {
        Control {
            cache: CacheRef::Shared(cache),
            ports,
            counters,
            now,
            caching: true,
        }
    }

    /// The switch's clock: time since it started (a [`Switch`] is given
    /// its time by [`Switch::tick`]).
    pub fn now(&self) -> Duration {
        self.now
    }

    /// A new piece of state for decisions to register.
    pub fn new_state_id(&mut self) -> Result<StateId, ApiError> {
        Ok(self.cache.with(|c| c.new_state_id())?)
    }

    /// The state `id` changed or is gone: revoke every cached decision
    /// that registered it; the id is dead afterwards. Returns the entries
    /// revoked.
    pub fn removed(&mut self, id: StateId) -> usize {
        self.cache.with(|c| c.removed(id))
    }

    /// Every port number, sorted.
    pub fn get_ports(&self) -> Vec<PortId> {
        self.ports.ids()
    }

    /// A new tunnel port, numbered after the highest port.
    pub fn add_port(&mut self, kind: PortKind) -> Result<PortId, ApiError> {
        if self.ports.ports.len() >= MAX_SWITCH_PORTS {
            return Err(ApiError::TooMany("ports"));
        }
        let id = match self.ports.ports.keys().next_back() {
            None => 0,
            Some(&p) => p.checked_add(1).ok_or(ApiError::TooMany("ports"))?,
        };
        self.ports.ports.insert(
            id,
            PortInfo {
                id,
                kind,
                properties: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    /// Remove port `id`. Decisions that send to it must be revoked by the
    /// app (they registered the state that chose the port).
    pub fn del_port(&mut self, id: PortId) -> Result<(), ApiError> {
        self.ports
            .ports
            .remove(&id)
            .map(|_| ())
            .ok_or(ApiError::UnknownPort(id))
    }

    /// Set property `key` of port `id` to `value`.
    pub fn set_properties(&mut self, id: PortId, key: &str, value: &str) -> Result<(), ApiError> {
        let p = self
            .ports
            .ports
            .get_mut(&id)
            .ok_or(ApiError::UnknownPort(id))?;
        if !p.properties.contains_key(key) && p.properties.len() >= MAX_PROPERTIES {
            return Err(ApiError::TooMany("properties"));
        }
        p.properties.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    /// Port `id`'s properties.
    pub fn get_properties(&self, id: PortId) -> Result<&BTreeMap<String, String>, ApiError> {
        self.ports
            .get(id)
            .map(|p| &p.properties)
            .ok_or(ApiError::UnknownPort(id))
    }

    /// The switch's counters now.
    pub fn get_stats(&mut self) -> Stats {
        let app = *self.counters;
        self.cache.with(|c| Stats {
            cache: *c.counters(),
            entries: c.len(),
            masks: c.masks(),
            state_ids: c.state_ids(),
            app,
        })
    }

    /// A synthetic packet for a proactive decision (the paper's
    /// `new_in_pkt(in_port)`): the app writes the header it decides for,
    /// marks, sends, and hands it to [`Self::push`].
    pub fn new_in_pkt(&self, in_port: PortId, header: Vec<u8>) -> InPkt {
        InPkt::new(header, in_port)
    }

    /// Install the decision made on a synthetic packet: nothing is sent;
    /// later packets that match its marks hit it. Returns whether it was
    /// cached (a switch without cache never caches).
    pub fn push(&mut self, mut pkt: InPkt) -> Result<bool, ApiError> {
        let key = HeaderKey::from_frame(&pkt.frame, pkt.in_port);
        let mut reply = Reply::default();
        if !finish(&mut pkt, self.ports, &mut reply) {
            reply.decision = None;
        }
        if let Some(r) = reply.drop {
            return Err(match (r, reply.bad_port) {
                (DropReason::UnknownPort, Some(p)) => ApiError::UnknownPort(p),
                _ => ApiError::Refused(r),
            });
        }
        self.counters.proactive += 1;
        let Some(d) = reply.decision else {
            return Ok(false);
        };
        if !self.caching {
            return Ok(false);
        }
        let installed = self.cache.with(|c| c.install(&key, &d))?;
        Ok(matches!(installed, Installed::Cached(_)))
    }
}

/// A frame to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emit {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Output ports (sorted).
    pub ports: SmallVec<[PortId; 4]>,
    /// Also to the control port.
    pub controller: bool,
}

/// The frames one decision sends: inline when there is one (most
/// decisions), so a decision allocates no vector for them.
pub type Emits = SmallVec<[Emit; 1]>;

/// What the app decided for one packet.
#[derive(Clone, Debug, Default)]
pub struct Reply {
    /// Frames to send now.
    pub emits: Emits,
    /// The decision to cache, when the answer can be cached.
    pub decision: Option<Decision>,
    /// The packet was dropped for this reason (nothing is sent or cached).
    pub drop: Option<DropReason>,
    /// The app's error message, for the log.
    pub message: Option<String>,
    bad_port: Option<PortId>,
}

/// Run `app` on `frame` received on `in_port` and build the [`Reply`]
/// (counted in `ctl`'s counters). Never panics on the app's behalf: a
/// panic in the app is caught and becomes [`DropReason::AppPanic`].
pub fn decide(app: &mut dyn App, ctl: &mut Control<'_>, frame: Vec<u8>, in_port: PortId) -> Reply {
    let mut reply = Reply::default();
    decide_into(app, ctl, frame, in_port, &mut reply);
    reply
}

/// [`decide`] into `reply`, which is overwritten whole (what it held
/// before is not part of the answer). A caller deciding many packets
/// keeps one `Reply` per packet slot and saves the moves of a few hundred
/// bytes per decision: the decision is built where it stays.
pub fn decide_into(
    app: &mut dyn App,
    ctl: &mut Control<'_>,
    frame: Vec<u8>,
    in_port: PortId,
    reply: &mut Reply,
) {
    reply.emits.clear();
    reply.drop = None;
    reply.message = None;
    reply.bad_port = None;
    ctl.counters.app_calls += 1;
    let mut pkt = InPkt::new(frame, in_port);
    let r = catch_unwind(AssertUnwindSafe(|| app.on_packet(&mut pkt, ctl)));
    // A bad mark is the packet's fate whether or not the app went on.
    let r = match (r, pkt.poisoned) {
        (Err(_) | Ok(Err(_)), Some(_)) => Ok(Ok(())),
        (r, _) => r,
    };
    let cacheable = match r {
        Ok(Ok(())) => finish(&mut pkt, ctl.ports, reply),
        Ok(Err(e)) => {
            reply.drop = Some(DropReason::AppError);
            reply.message = Some(e.0);
            false
        }
        Err(_) => {
            reply.drop = Some(DropReason::AppPanic);
            reply.message = Some(format!("app {} panicked", app.name()));
            false
        }
    };
    if !cacheable {
        reply.decision = None;
    }
    if let Some(r) = reply.drop {
        ctl.counters.drops.add(r);
        reply.emits.clear();
    } else if cacheable {
        ctl.counters.cacheable += 1;
    } else {
        ctl.counters.uncacheable += 1;
    }
}

/// Turn a decided packet into `reply` (its emits, drop reason and, when it
/// can be cached, its decision, built in `reply.decision`'s room if it
/// has one); whether it can be cached (when not, the caller clears the
/// decision).
fn finish(pkt: &mut InPkt, ports: &Ports, reply: &mut Reply) -> bool {
    if let Some(r) = pkt.poisoned {
        reply.drop = Some(r);
        return false;
    }
    for o in &pkt.outs {
        if let Some(r) = o.poisoned {
            reply.drop = Some(r);
            return false;
        }
        if let Some(&p) = o.actions.ports().iter().find(|&&p| !ports.contains(p)) {
            reply.drop = Some(DropReason::UnknownPort);
            reply.message = Some(format!("port {p} does not exist"));
            reply.bad_port = Some(p);
            return false;
        }
    }
    // The last out-packet derived from the frame takes the frame itself
    // (one copy less per decision: most decisions have one).
    let last_derived = pkt.outs.iter().rposition(|o| o.raw.is_none());
    let mut frame = std::mem::take(&mut pkt.frame);
    for (i, o) in pkt.outs.iter().enumerate() {
        let mut bytes = match &o.raw {
            Some(b) => b.clone(),
            None if Some(i) == last_derived => std::mem::take(&mut frame),
            None => frame.clone(),
        };
        if o.raw.is_none() {
            match o.actions.apply(&mut bytes) {
                Outcome::Forward => {}
                Outcome::Expired => {
                    reply.drop = Some(DropReason::TtlExpired);
                    return false;
                }
                Outcome::TooShort => {
                    reply.drop = Some(DropReason::BadAction);
                    return false;
                }
            }
        }
        if o.actions.is_drop() {
            continue;
        }
        reply.emits.push(Emit {
            bytes,
            ports: o.actions.ports().iter().copied().collect(),
            controller: o.actions.controller(),
        });
    }
    // One entry holds one set of rewrites: cacheable when nothing was made
    // up and every out-packet carries the same rewrites and primitives.
    let derived = pkt.outs.iter().all(|o| o.raw.is_none());
    let same = pkt.outs.windows(2).all(|w| {
        w[0].actions.rewrites() == w[1].actions.rewrites()
            && w[0].actions.primitives() == w[1].actions.primitives()
    });
    if !(derived && same) {
        return false;
    }
    let d = reply.decision.get_or_insert_with(Decision::default);
    match pkt.outs.first() {
        Some(o) => d.actions.clone_from(&o.actions),
        None => d.actions = Actions::default(),
    }
    d.states.clear();
    for o in &pkt.outs {
        for &p in o.actions.ports() {
            if d.actions.add_port(p).is_err() {
                return false;
            }
        }
        if o.actions.controller() {
            d.actions.set_controller(true);
        }
        for s in &o.states {
            if !d.states.contains(s) {
                d.states.push(*s);
            }
        }
    }
    d.mask.clone_from(&pkt.mask);
    true
}

/// Apply a cached entry's actions to `frame`: the frame to send, or why
/// not (the cache-hit twin of [`decide`]).
pub fn apply_cached(actions: &Actions, frame: &[u8]) -> Result<Option<Emit>, DropReason> {
    let mut bytes = frame.to_vec();
    match actions.apply(&mut bytes) {
        Outcome::Forward => {}
        Outcome::Expired => return Err(DropReason::TtlExpired),
        Outcome::TooShort => return Err(DropReason::BadAction),
    }
    if actions.is_drop() {
        return Ok(None);
    }
    Ok(Some(Emit {
        bytes,
        ports: actions.ports().iter().copied().collect(),
        controller: actions.controller(),
    }))
}

#[cfg(test)]
mod tests;
