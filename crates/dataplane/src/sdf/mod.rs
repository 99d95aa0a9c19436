//! The software-defined-forwarding pipeline: workers look frames up in a
//! revocable decision cache ([`nexthop_sdf::DecisionCache`]) in batches;
//! a miss goes to the app's thread through a bounded queue; misses of a
//! flow whose decision is already being made wait for that one decision
//! (the pending-miss table); the decision is installed by the app thread
//! and the waiting frames are sent by their worker.
//!
//! * [`SdfRuntime::start`] starts the app's thread around an
//!   [`App`] and owns the cache they share; [`SdfRuntime::start_sliced`]
//!   starts one app thread and one cache (its share) per slice
//!   ([`SliceSpec`]); [`SdfRuntime::stage`] makes a
//!   worker's stage ([`SdfStage`]), which implements the engine's
//!   [`Stage`](crate::engine::Stage) on Linux and drives
//!   [`forward_pcap_sdf`] offline; [`run_live`] runs one stage per
//!   worker of the forwarder engine over live interfaces (Linux).
//! * [`SdfStage::process`] decides a group of frames: hits are sent at
//!   once (through a [`Sink`]), misses are queued or wait;
//!   [`SdfStage::poll`] sends what decisions came back and expires
//!   pending flows the app did not answer in time; [`SdfStage::flush`]
//!   waits for every pending decision (the end of an offline run).
//!
//! # Threading contract
//!
//! * One app thread per slice owns its app and calls it, one packet at a
//!   time; it locks its slice's cache only to issue or remove state ids
//!   and, once per batch of requests it took, to install the batch's
//!   decisions, never while the app computes.
//! * The hand-over is paid once per batch, not per decision: a worker
//!   stages a group's misses and hands them to each slice's queues under
//!   one lock with at most one wake-up (those beyond the queue's room are
//!   dropped, counted; an app thread that found its queues empty watches
//!   them 50 us before it sleeps, so a busy one needs no wake-up); the app
//!   thread takes up to 64 requests under one lock (prefetching their
//!   frames' header lines), decides them, installs their decisions under
//!   the cache's lock taken once per 16 installs, and answers each worker
//!   with one message on that worker's channel (a request carries only
//!   its worker's number). A decision whose state id a later call of the
//!   batch removed is not installed (the cache refuses a decision that
//!   registers a removed id). An app that hangs holds back
//!   the answers of its batch until their flows time out.
//! * Each worker owns its stage and pending-miss table; it locks each
//!   slice's cache once per group (for that slice's frames) for the
//!   batched lookups and the hits' actions, spinning up to 20 us for it
//!   before sleeping (an app thread holds it for at most 16 installs). A
//!   slow, hung or panicking app never blocks a worker: the request queues
//!   are bounded (a lock held only to push or pop) and full means a
//!   counted drop; a pending flow not answered within `pending_timeout` is
//!   dropped, counted.
//! * Replies go back on a per-worker channel; they are bounded by the
//!   worker's pending flows (one reply per request in flight).
//!
//! # Slices
//!
//! With [`SdfRuntime::start_sliced`] a worker first demultiplexes each
//! frame ([`SliceDemux`]: its VLAN's slice, else its ingress port's); a
//! frame no slice owns is dropped (`no_slice`). Each slice has its own
//! cache (its share of the capacity: a flood of flows in one slice evicts
//! only its own entries), its own app thread and queues (a slow app stalls
//! only its slice's misses) and its own counters
//! ([`SdfRuntime::slice_counters`], [`SdfRuntime::slice_stats`]). Within
//! a group the hits are sent slice by slice (the order of frames of one
//! slice is kept). [`SdfRuntime::start`] is one slice that owns every
//! frame.
//!
//! # The control queue
//!
//! A miss the app's [`ControlFilter`] ([`App::control_filter`], by default
//! ARP) classifies as control goes to the slice's control queue
//! (`control_queue` requests at most), any other to its data queue
//! (`queue`). The app thread serves up to `control_weight` control
//! requests for each data request while both are waiting, so a storm of
//! data misses that fills the data queue neither drops nor delays control
//! frames behind it.
//!
//! # Counters
//!
//! [`SdfCounters`]: hits, misses, requests to the app, packets that waited
//! for a decision in flight (and how they ended), drops by reason. The
//! cache's own counters (hits per level, installs, revocations, masks) and
//! the app side's (calls, drops by the app's fault) are in
//! [`SdfRuntime::stats`]. Each stage publishes its [`SdfCounters`] to the
//! runtime (at most [`PUBLISH_EVERY`] apart while it runs under the
//! engine, and when dropped), so the thread that serves the metrics reads
//! them all merged with [`SdfRuntime::stage_counters`].

mod app_thread;
#[cfg(target_os = "linux")]
mod live;
mod metrics;
mod pcap;
mod report;
mod spare;
#[cfg(target_os = "linux")]
mod stage;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nexthop_sdf::app::{
    decide_into, plan_slices, AppCounters, Control, ControlFilter, DropReason, Emit, Emits, Ports,
    Reply, SliceDemux, SliceError, SliceSpec,
};
use nexthop_sdf::{Actions, Config, ConfigError, Counters as CacheCounters, DecisionCache};
use nexthop_sdf::{HeaderKey, Outcome, BATCH};
use serde::Serialize;

use app_thread::{app_thread, AppQueue, AppSide, CloseOnExit, Refused};
use spare::{Spares, SPARE_FRAMES, SPARE_FRAME_BYTES, SPARE_LISTS};

#[cfg(target_os = "linux")]
pub use live::{
    live_fields, live_ports, ready_line, run_live, sdf_progress_line, SdfLiveError, SdfLivePorts,
    SdfLiveRun,
};
pub use metrics::sdf_metrics;
#[cfg(target_os = "linux")]
pub use metrics::sdf_snapshot;
pub use nexthop_sdf::app::App;
pub use pcap::{forward_pcap_sdf, PcapInput, SdfPcapRun};
pub use report::{app_drops, pcap_summary_line, slice_fields, slice_metrics, SliceReport};
#[cfg(target_os = "linux")]
pub use stage::SdfScratch;

use crate::counters::Counters;

/// Sizes and policies of an SDF pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdfConfig {
    /// The decision cache.
    pub cache: Config,
    /// The switch's ports (what the app's `get_ports` answers and where
    /// it may send).
    pub ports: Vec<u16>,
    /// Data misses queued to the app at most (all workers together; per
    /// slice).
    pub queue: usize,
    /// Control misses queued to the app at most (all workers together;
    /// per slice).
    pub control_queue: usize,
    /// Control requests the app thread serves for each data request while
    /// both queues hold some.
    pub control_weight: u32,
    /// Flows with a decision in flight, per worker.
    pub max_pending_flows: usize,
    /// Frames waiting for one flow's decision.
    pub max_waiting: usize,
    /// Frames waiting for decisions, per worker.
    pub max_waiting_total: usize,
    /// A flow whose decision has not come back after this long (checked
    /// every quarter of it) is dropped with its waiting frames.
    pub pending_timeout: Duration,
    /// How often the app's `on_tick` runs.
    pub tick_every: Duration,
    /// The pending-miss table: misses of a flow whose decision is in
    /// flight wait for it (one app call per flow). Off, every miss is a
    /// request of its own (the miss-path benchmark's baseline).
    pub pending_table: bool,
}

impl Default for SdfConfig {
    fn default() -> Self {
        SdfConfig {
            cache: Config::default(),
            ports: Vec::new(),
            queue: 1024,
            control_queue: 256,
            control_weight: 4,
            max_pending_flows: 4096,
            max_waiting: 64,
            max_waiting_total: 16384,
            pending_timeout: Duration::from_secs(2),
            tick_every: Duration::from_millis(100),
            pending_table: true,
        }
    }
}

/// An SDF pipeline that cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SdfError {
    /// The cache's configuration.
    #[error("cache: {0}")]
    Cache(#[from] ConfigError),
    /// A bound is 0.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// The app thread could not be started.
    #[error("starting the app thread: {0}")]
    Spawn(#[from] std::io::Error),
    /// The slices cannot be laid out.
    #[error("{0}")]
    Slices(#[from] SliceError),
    /// Slices and apps do not pair up.
    #[error("{0} slices but {1} apps")]
    Apps(usize, usize),
}

impl SdfConfig {
    /// Check every field.
    pub fn validate(&self) -> Result<(), SdfError> {
        self.cache.validate()?;
        for (v, name) in [
            (self.queue, "queue"),
            (self.control_queue, "control_queue"),
            (self.control_weight as usize, "control_weight"),
            (self.max_pending_flows, "max_pending_flows"),
            (self.max_waiting_total, "max_waiting_total"),
        ] {
            if v == 0 {
                return Err(SdfError::Zero(name));
            }
        }
        if self.tick_every.is_zero() {
            return Err(SdfError::Zero("tick_every"));
        }
        if self.pending_timeout.is_zero() {
            return Err(SdfError::Zero("pending_timeout"));
        }
        Ok(())
    }
}

/// Where a frame came from, carried with it while it waits (pcap record
/// fields; zero on live ports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// Timestamp seconds.
    pub ts_sec: u32,
    /// Timestamp fraction.
    pub ts_frac: u32,
    /// Original length on the wire.
    pub orig_len: u32,
}

/// Where decided frames go.
pub trait Sink {
    /// Send `frame` to each of `ports` (sorted) and, with `controller`, to
    /// the control port.
    fn emit(&mut self, ports: &[u16], controller: bool, frame: &[u8], stamp: Stamp);
}

/// Drops the pipeline counts, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SdfDrops {
    /// The app's (data) queue was full.
    pub queue_full: u64,
    /// The app's control queue was full.
    pub control_queue_full: u64,
    /// No slice owns the frame (its ingress port and VLAN id).
    pub no_slice: u64,
    /// The worker's pending-flow table was full.
    pub pending_full: u64,
    /// A flow's (or the worker's) waiting frames were at their bound.
    pub waiting_full: u64,
    /// The app did not answer within `pending_timeout`.
    pub app_timeout: u64,
    /// The app thread is gone.
    pub app_gone: u64,
    /// The app's decision was a drop for a fault of the app (marks past
    /// the header, unknown ports, bad actions, errors, panics), or a TTL
    /// expired; frames that waited for such a decision included.
    pub app_fault: u64,
    /// A cached entry's primitive found TTL 0 or 1.
    pub ttl_expired: u64,
}

impl SdfDrops {
    /// Each reason's name (as in the Serialize form) and count.
    pub fn named(&self) -> [(&'static str, u64); 9] {
        [
            ("queue_full", self.queue_full),
            ("control_queue_full", self.control_queue_full),
            ("no_slice", self.no_slice),
            ("pending_full", self.pending_full),
            ("waiting_full", self.waiting_full),
            ("app_timeout", self.app_timeout),
            ("app_gone", self.app_gone),
            ("app_fault", self.app_fault),
            ("ttl_expired", self.ttl_expired),
        ]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.queue_full
            + self.control_queue_full
            + self.no_slice
            + self.pending_full
            + self.waiting_full
            + self.app_timeout
            + self.app_gone
            + self.app_fault
            + self.ttl_expired
    }

    fn merge(&mut self, o: &SdfDrops) {
        self.queue_full += o.queue_full;
        self.control_queue_full += o.control_queue_full;
        self.no_slice += o.no_slice;
        self.pending_full += o.pending_full;
        self.waiting_full += o.waiting_full;
        self.app_timeout += o.app_timeout;
        self.app_gone += o.app_gone;
        self.app_fault += o.app_fault;
        self.ttl_expired += o.ttl_expired;
    }
}

/// A worker's SDF counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SdfCounters {
    /// Frames the cache answered.
    pub hits: u64,
    /// Frames the cache missed.
    pub misses: u64,
    /// Misses sent to the app (one per distinct flow in flight).
    pub app_requests: u64,
    /// Of those, to its control queue.
    pub control_requests: u64,
    /// Misses that waited for a decision already in flight.
    pub pending_waits: u64,
    /// Waiting frames sent by the decision they waited for.
    pub pending_resolved: u64,
    /// Waiting frames sent to the app on their own because the decision
    /// they waited for could not be cached (no marks and no state, or a
    /// made-up reply).
    pub resubmitted: u64,
    /// Decisions that came back after their flow had timed out.
    pub late_replies: u64,
    /// Drops by reason.
    pub drops: SdfDrops,
}

impl SdfCounters {
    /// Add `o` (another worker's) to these.
    pub fn merge(&mut self, o: &SdfCounters) {
        self.hits += o.hits;
        self.misses += o.misses;
        self.app_requests += o.app_requests;
        self.control_requests += o.control_requests;
        self.pending_waits += o.pending_waits;
        self.pending_resolved += o.pending_resolved;
        self.resubmitted += o.resubmitted;
        self.late_replies += o.late_replies;
        self.drops.merge(&o.drops);
    }
}

/// The shared side's counters and gauges ([`SdfRuntime::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SdfStats {
    /// The cache's counters (hits per level, installs, revocations, masks).
    pub cache: CacheCounters,
    /// Cached entries now.
    pub entries: usize,
    /// Masks (subtables) now.
    pub masks: usize,
    /// Live state ids now.
    pub state_ids: usize,
    /// The app side: calls, cacheable decisions, drops by reason.
    pub app: AppCounters,
    /// Requests the app thread took from the control queue.
    pub control_calls: u64,
    /// Requests the app thread took from the data queue.
    pub data_calls: u64,
    /// The cache's capacity (a slice's share).
    pub capacity: usize,
}

impl SdfStats {
    /// Add `o` (another slice's) to these.
    pub fn merge(&mut self, o: &SdfStats) {
        self.cache.merge(&o.cache);
        self.entries += o.entries;
        self.masks += o.masks;
        self.state_ids += o.state_ids;
        self.app.merge(&o.app);
        self.control_calls += o.control_calls;
        self.data_calls += o.data_calls;
        self.capacity += o.capacity;
    }
}

/// One slice's shared side: its cache, its app's counters, its queues.
struct SliceShared {
    name: String,
    cache: Mutex<DecisionCache>,
    app: Mutex<AppSide>,
    queue: AppQueue,
    filter: ControlFilter,
}

/// A stage's published counters: all its slices', and each slice's.
#[derive(Clone, Debug, Default)]
struct Published {
    total: SdfCounters,
    slices: Vec<SdfCounters>,
}

struct Shared {
    slices: Vec<SliceShared>,
    /// Which slice a frame belongs to (`None`: one slice owns all).
    demux: Option<SliceDemux>,
    /// Each stage's counters as it last published them (slot = the
    /// stage's number), so another thread can read them while the
    /// workers run and after their stages are gone.
    stages: Mutex<Vec<Published>>,
    /// Each stage's reply channel (slot = the stage's number): an app
    /// thread answers a request's stage through it, so a request carries
    /// only its stage's number (no channel handle cloned and dropped per
    /// request, two atomic updates of a line both threads write).
    replies: Mutex<Vec<Sender<Vec<Response>>>>,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked holding the lock left the value as one whole
    // call leaves it (no call here panics midway on purpose): go on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lock `m`, spinning up to [`LOCK_SPIN`] before sleeping on it: a
/// worker whose cache an app thread is installing into waits a few
/// microseconds (one chunk of installs), and a sleep would cost it and the
/// app thread (which must wake it) a system call each.
fn lock_spinning<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    let mut until = None;
    loop {
        match m.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        let now = Instant::now();
        match until {
            None => until = Some(now + LOCK_SPIN),
            Some(t) if now >= t => return lock(m),
            Some(_) => {}
        }
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}

/// How long a worker spins for a slice's cache before it sleeps on it.
const LOCK_SPIN: Duration = Duration::from_micros(20);

struct Request {
    token: u64,
    in_port: u16,
    frame: Vec<u8>,
    /// The requesting stage's number: its answers travel together, on
    /// its channel in [`Shared::replies`].
    worker: usize,
}

struct Response {
    token: u64,
    /// The frames to send, inline when there is one (most decisions): the
    /// app's vector of them is freed on the app thread that allocated it,
    /// not on the worker (a block freed by another thread than allocated
    /// it costs the allocator's shared lock).
    emits: Emits,
    /// The actions a hit on the installed decision would apply, when the
    /// decision could be cached (it marked bits or registered state): the
    /// frames of the flow that waited for it get them. Only the actions
    /// travel back (the mask and state ids stay with the app thread).
    same: Option<Actions>,
    drop: Option<DropReason>,
}

/// The app's thread and the cache it shares with the workers (one of
/// each per slice).
pub struct SdfRuntime {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    cfg: SdfConfig,
    app_name: String,
    /// The slices as specified (none for [`SdfRuntime::start`]).
    specs: Vec<SliceSpec>,
}

impl std::fmt::Debug for SdfRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdfRuntime")
            .field("app", &self.app_name)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

/// Log lines about app faults: the first this many, then one in
/// [`LOG_EVERY`].
const LOG_FIRST: u64 = 10;
const LOG_EVERY: u64 = 10_000;

impl SdfRuntime {
    /// Start the app's thread (`sdf-app`) around `app`: one slice that
    /// owns every frame, with the whole cache.
    ///
    /// # Errors
    /// A bad configuration; the thread could not start.
    pub fn start(app: Box<dyn App>, cfg: SdfConfig) -> Result<SdfRuntime, SdfError> {
        cfg.validate()?;
        let ports = Ports::physical(&cfg.ports);
        let app_name = app.name().to_owned();
        let one = vec![(app_name.clone(), cfg.cache, ports, app)];
        SdfRuntime::spawn(one, None, cfg, app_name, Vec::new())
    }

    /// Start one app thread (`sdf-NAME`) and one cache per slice: `slices`
    /// pairs each [`SliceSpec`] with its app; the cache's capacity is split
    /// into the slices' shares (see
    /// [`plan_slices`]).
    ///
    /// # Errors
    /// A bad configuration or slice layout; a thread could not start.
    pub fn start_sliced(
        slices: Vec<(SliceSpec, Box<dyn App>)>,
        cfg: SdfConfig,
    ) -> Result<SdfRuntime, SdfError> {
        cfg.validate()?;
        let specs: Vec<SliceSpec> = slices.iter().map(|(s, _)| s.clone()).collect();
        let plan = plan_slices(cfg.cache, &Ports::physical(&cfg.ports), &specs)?;
        if plan.slices.len() != slices.len() {
            return Err(SdfError::Apps(plan.slices.len(), slices.len()));
        }
        let app_name = specs
            .iter()
            .map(|s| format!("{}={}", s.name, s.app))
            .collect::<Vec<_>>()
            .join(",");
        let each = plan
            .slices
            .into_iter()
            .zip(slices)
            .map(|(p, (_, app))| (p.name, p.cache, p.ports, app))
            .collect();
        SdfRuntime::spawn(each, Some(plan.demux), cfg, app_name, specs)
    }

    fn spawn(
        slices: Vec<(String, Config, Ports, Box<dyn App>)>,
        demux: Option<SliceDemux>,
        cfg: SdfConfig,
        app_name: String,
        specs: Vec<SliceSpec>,
    ) -> Result<SdfRuntime, SdfError> {
        let mut parts = Vec::with_capacity(slices.len());
        let mut apps = Vec::with_capacity(slices.len());
        for (name, cache, ports, app) in slices {
            parts.push(SliceShared {
                name,
                cache: Mutex::new(DecisionCache::new(cache)?),
                app: Mutex::new(AppSide::default()),
                queue: AppQueue::new(&cfg),
                filter: app.control_filter(),
            });
            apps.push((ports, app));
        }
        let sliced = demux.is_some();
        let shared = Arc::new(Shared {
            slices: parts,
            demux,
            stages: Mutex::new(Vec::new()),
            replies: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let mut rt = SdfRuntime {
            shared: shared.clone(),
            threads: Vec::new(),
            cfg: cfg.clone(),
            app_name,
            specs,
        };
        for (i, (ports, app)) in apps.into_iter().enumerate() {
            let name = if sliced {
                format!("sdf-{}", shared.slices[i].name)
            } else {
                "sdf-app".to_string()
            };
            let thread = std::thread::Builder::new().name(name).spawn({
                let shared = shared.clone();
                let cfg = cfg.clone();
                move || {
                    let _close = CloseOnExit(shared.clone(), i);
                    app_thread(app, &shared, i, ports, &cfg)
                }
            });
            match thread {
                Ok(t) => rt.threads.push(t),
                // Dropping `rt` stops the threads already started.
                Err(e) => return Err(e.into()),
            }
        }
        Ok(rt)
    }

    /// A worker's stage.
    pub fn stage(&self) -> SdfStage {
        let (reply_tx, reply_rx) = mpsc::channel();
        let max_port = self.cfg.ports.iter().copied().max();
        let mut ports = self.cfg.ports.clone();
        ports.sort_unstable();
        ports.dedup();
        let nslices = self.shared.slices.len();
        let slot = {
            let mut stages = lock(&self.shared.stages);
            stages.push(Published {
                total: SdfCounters::default(),
                slices: vec![SdfCounters::default(); nslices],
            });
            // Under the stages' lock: the two vectors grow together.
            lock(&self.shared.replies).push(reply_tx);
            stages.len() - 1
        };
        SdfStage {
            slot,
            published: Instant::now(),
            shared: self.shared.clone(),
            reply_rx,
            outbox: (0..nslices).map(|_| Outbox::default()).collect(),
            cfg: self.cfg.clone(),
            ports,
            pending: HashMap::default(),
            by_key: HashMap::default(),
            flow_seed: std::collections::hash_map::RandomState::new()
                .hash_one(self.shared.slices.len()),
            now: Instant::now(),
            waiting_total: 0,
            next_token: 1,
            next_scan: Instant::now(),
            keys: vec![HeaderKey::empty(0); BATCH],
            hits: vec![None; BATCH],
            buf: Vec::new(),
            frames: Spares::new(SPARE_FRAMES, SPARE_FRAME_BYTES),
            lists: Spares::new(SPARE_LISTS, self.cfg.max_waiting.next_power_of_two()),
            counters: Counters::with_tx_ports(max_port),
            sdf: SdfCounters::default(),
            slice_sdf: vec![SdfCounters::default(); nslices],
            order: Vec::with_capacity(BATCH),
            slice_at: Vec::with_capacity(BATCH),
        }
    }

    /// The cache's and the app side's counters now (all slices added up).
    pub fn stats(&self) -> SdfStats {
        let mut all = SdfStats::default();
        for i in 0..self.shared.slices.len() {
            if let Some(s) = self.slice_stats(i) {
                all.merge(&s);
            }
        }
        all
    }

    /// Slice `i`'s cache and app side counters now.
    pub fn slice_stats(&self, i: usize) -> Option<SdfStats> {
        let s = self.shared.slices.get(i)?;
        let app = *lock(&s.app);
        let c = lock(&s.cache);
        Some(SdfStats {
            cache: *c.counters(),
            entries: c.len(),
            masks: c.masks(),
            state_ids: c.state_ids(),
            app: app.counters,
            control_calls: app.control_calls,
            data_calls: app.data_calls,
            capacity: c.config().capacity,
        })
    }

    /// The slices' names, in order (one slice named after the app without
    /// slices).
    pub fn slice_names(&self) -> Vec<&str> {
        self.shared.slices.iter().map(|s| s.name.as_str()).collect()
    }

    /// Requests queued to slice `i`'s app now: (control, data).
    pub fn queued(&self, i: usize) -> Option<(usize, usize)> {
        self.shared.slices.get(i).map(|s| s.queue.lens())
    }

    /// Each slice's SDF counters, every stage's merged, as the stages
    /// last published them.
    pub fn slice_counters(&self) -> Vec<SdfCounters> {
        let mut all = vec![SdfCounters::default(); self.shared.slices.len()];
        for p in lock(&self.shared.stages).iter() {
            for (a, c) in all.iter_mut().zip(&p.slices) {
                a.merge(c);
            }
        }
        all
    }

    /// Every stage's SDF counters, merged, as the stages last published
    /// them ([`SdfStage::publish`]; a stage publishes at most
    /// [`PUBLISH_EVERY`] apart while it runs under the engine, and when
    /// it is dropped).
    pub fn stage_counters(&self) -> SdfCounters {
        let mut all = SdfCounters::default();
        for c in lock(&self.shared.stages).iter() {
            all.merge(&c.total);
        }
        all
    }

    /// The app's name.
    pub fn app_name(&self) -> &str {
        &self.app_name
    }

    /// Stop the app's thread (waiting at most one second for an app that
    /// is still deciding: a hung app is left behind) and return the final
    /// counters.
    pub fn shutdown(mut self) -> SdfStats {
        self.stop();
        self.stats()
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for s in &self.shared.slices {
            s.queue.ready.notify_all();
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        for t in self.threads.drain(..) {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for SdfStage {
    fn drop(&mut self) {
        self.publish();
    }
}

/// How often a stage running under the engine publishes its counters.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

impl Drop for SdfRuntime {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A stage's requests to one slice's app not yet handed over.
#[derive(Default)]
struct Outbox {
    control: Vec<Request>,
    data: Vec<Request>,
}

/// A request in flight, with the frames of its flow that wait for it.
struct Pending {
    /// The flow (its exact header key).
    key: HeaderKey,
    /// `key`'s hash under the stage's flow seed (its pending-miss table
    /// key), kept so answering does not hash the key again.
    hash: u64,
    /// Its slice.
    slice: usize,
    /// Whether it went to the control queue.
    control: bool,
    since: Instant,
    in_port: u16,
    /// The frame the app is deciding (sent as the reply says).
    stamp: Stamp,
    /// Frames of the same flow that arrived meanwhile.
    waiting: Vec<(Vec<u8>, Stamp)>,
}

/// One worker's side of the pipeline (see the [module docs](self)).
pub struct SdfStage {
    shared: Arc<Shared>,
    /// This stage's slot in the shared published counters.
    slot: usize,
    /// When the counters were last published.
    published: Instant,
    /// Its answers (the sending side is in [`Shared::replies`]).
    reply_rx: Receiver<Vec<Response>>,
    /// Requests staged per slice, handed over by [`Self::send_staged`].
    outbox: Vec<Outbox>,
    cfg: SdfConfig,
    ports: Vec<u16>,
    /// Requests in flight by token.
    pending: HashMap<u64, Pending, Mixed>,
    /// The pending-miss table: the hash of an exact header key (the whole
    /// key and the port, [`HeaderKey::hash_exact`] with `flow_seed`) → the
    /// token of the flow's request in flight, whose `key` is compared
    /// before a frame waits for it (empty when `pending_table` is off).
    by_key: HashMap<u64, u64, Mixed>,
    /// The secret seed of the flow hashes (keys are attacker-controlled).
    flow_seed: u64,
    /// The clock as the last `poll` read it (when new requests start).
    now: Instant,
    waiting_total: usize,
    next_token: u64,
    next_scan: Instant,
    keys: Vec<HeaderKey>,
    hits: Vec<Option<nexthop_sdf::EntryId>>,
    buf: Vec<u8>,
    /// Buffers for the copies of missed frames (requests and waiting
    /// frames), given back once sent.
    frames: Spares<u8>,
    /// Lists of waiting frames, given back once their flow is answered.
    lists: Spares<(Vec<u8>, Stamp)>,
    counters: Counters,
    sdf: SdfCounters,
    /// Each slice's share of `sdf` (`no_slice` drops are only in `sdf`).
    slice_sdf: Vec<SdfCounters>,
    /// A group's frames (their index in it) ordered by slice.
    order: Vec<usize>,
    /// Each frame's slice in the group being decided.
    slice_at: Vec<usize>,
}

impl std::fmt::Debug for SdfStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdfStage")
            .field("pending", &self.pending.len())
            .field("sdf", &self.sdf)
            .finish_non_exhaustive()
    }
}

impl SdfStage {
    /// The frame counters (in, out per port, forwarded, dropped, punted,
    /// hits by action kind, misses).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Take the frame counters, leaving zeroed ones.
    pub fn take_counters(&mut self) -> Counters {
        let max_port = self.ports.last().copied();
        std::mem::replace(&mut self.counters, Counters::with_tx_ports(max_port))
    }

    /// Continue from `counters`.
    pub fn set_counters(&mut self, counters: Counters) {
        self.counters = counters;
    }

    /// The SDF counters (all slices).
    pub fn sdf_counters(&self) -> &SdfCounters {
        &self.sdf
    }

    /// Each slice's SDF counters.
    pub fn slice_counters(&self) -> &[SdfCounters] {
        &self.slice_sdf
    }

    /// Publish the SDF counters for [`SdfRuntime::stage_counters`] and
    /// [`SdfRuntime::slice_counters`].
    pub fn publish(&mut self) {
        if let Some(c) = lock(&self.shared.stages).get_mut(self.slot) {
            c.total = self.sdf;
            c.slices.clone_from(&self.slice_sdf);
        }
        self.published = Instant::now();
    }

    /// Count an event of slice `s` in its counters and the stage's.
    fn bump(&mut self, s: usize, f: impl Fn(&mut SdfCounters)) {
        f(&mut self.sdf);
        if let Some(c) = self.slice_sdf.get_mut(s) {
            f(c);
        }
    }

    /// Publish the counters if the last publication is [`PUBLISH_EVERY`]
    /// old.
    pub(crate) fn publish_now_and_then(&mut self) {
        if self.published.elapsed() >= PUBLISH_EVERY {
            self.publish();
        }
    }

    /// The ports, sorted.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Requests in flight (with the pending-miss table: flows with a
    /// decision in flight).
    pub fn pending_flows(&self) -> usize {
        self.pending.len()
    }

    /// Frames waiting for a decision in flight (not counting the frames
    /// the app is deciding).
    pub fn waiting_frames(&self) -> usize {
        self.waiting_total
    }

    /// Decide `frames` received on `in_port` (with their `stamps`, or
    /// none: zero stamps): hits go to `sink` now, misses go to the app or
    /// wait. Answers that came back meanwhile are sent first.
    pub fn process(
        &mut self,
        in_port: u16,
        frames: &[&[u8]],
        stamps: &[Stamp],
        sink: &mut impl Sink,
    ) {
        self.poll(sink);
        let stamp = |i: usize| stamps.get(i).copied().unwrap_or_default();
        let shared = self.shared.clone();
        for (c, chunk) in frames.chunks(BATCH).enumerate() {
            // Each frame's slice; the group's frames ordered by slice
            // (stable: a slice's frames keep their order).
            self.order.clear();
            self.slice_at.clear();
            for (i, f) in chunk.iter().enumerate() {
                self.counters.frames_in += 1;
                self.counters.bytes_in += f.len() as u64;
                let rx = self.counters.rx_mut(in_port);
                rx.frames += 1;
                rx.bytes += f.len() as u64;
                let s = match &shared.demux {
                    None => Some(0),
                    Some(d) => d.slice_of(in_port, f),
                };
                match s {
                    Some(s) => {
                        self.slice_at.push(s);
                        self.order.push(i);
                    }
                    None => {
                        // No slice's table can answer it: a miss in the
                        // frame counters, dropped with its reason in the
                        // SDF ones.
                        self.slice_at.push(usize::MAX);
                        self.sdf.drops.no_slice += 1;
                        self.counters.misses += 1;
                        self.counters.dropped += 1;
                    }
                }
            }
            if shared.demux.is_some() {
                let at = &self.slice_at;
                self.order.sort_by_key(|&i| at[i]);
            }
            // Filled in place (a key is 136 bytes: built elsewhere and
            // moved in, it would be copied twice per frame).
            for (k, &i) in self.keys.iter_mut().zip(&self.order) {
                k.fill(chunk[i]);
                k.set_in_port(in_port);
            }
            let n = self.order.len();
            let mut miss = [false; BATCH];
            let mut run = 0;
            while run < n {
                let s = self.slice_at[self.order[run]];
                let end = run
                    + self.order[run..n]
                        .iter()
                        .take_while(|&&i| self.slice_at[i] == s)
                        .count();
                let mut cache = lock_spinning(&shared.slices[s].cache);
                cache.lookup_batch(&self.keys[run..end], &mut self.hits[run..end]);
                for (j, missed) in miss.iter_mut().enumerate().take(end).skip(run) {
                    let i = self.order[j];
                    let f = chunk[i];
                    let Some(actions) = self.hits[j].and_then(|id| cache.actions(id)) else {
                        *missed = true;
                        continue;
                    };
                    self.sdf.hits += 1;
                    self.slice_sdf[s].hits += 1;
                    let hk = &mut self.counters.hits;
                    match (actions.ports().len(), actions.controller()) {
                        (0, false) => hk.drop += 1,
                        (0, true) => hk.controller += 1,
                        (1, _) => hk.port += 1,
                        _ => hk.port_set += 1,
                    }
                    self.buf.clear();
                    self.buf.extend_from_slice(f);
                    match actions.apply(&mut self.buf) {
                        Outcome::Forward => {}
                        Outcome::Expired | Outcome::TooShort => {
                            self.sdf.drops.ttl_expired += 1;
                            self.slice_sdf[s].drops.ttl_expired += 1;
                            self.counters.dropped += 1;
                            continue;
                        }
                    }
                    count_out(
                        &mut self.counters,
                        actions.ports(),
                        actions.controller(),
                        self.buf.len(),
                    );
                    sink.emit(
                        actions.ports(),
                        actions.controller(),
                        &self.buf,
                        stamp(c * BATCH + i),
                    );
                }
                run = end;
            }
            // The keys are lent out (not copied) while the misses are
            // handled.
            let keys = std::mem::take(&mut self.keys);
            for (j, &missed) in miss.iter().enumerate().take(n) {
                if missed {
                    let i = self.order[j];
                    let s = self.slice_at[i];
                    self.counters.misses += 1;
                    self.bump(s, |c| c.misses += 1);
                    self.miss(s, &keys[j], in_port, chunk[i], stamp(c * BATCH + i));
                }
            }
            self.keys = keys;
        }
        self.send_staged();
    }

    /// A miss: wait for the flow's decision in flight, or ask the app.
    fn miss(&mut self, slice: usize, key: &HeaderKey, in_port: u16, frame: &[u8], stamp: Stamp) {
        let h = key.hash_exact(self.flow_seed);
        let waits_for = self.by_key.get(&h).copied();
        // A different flow under the same hash (a 2^-64 chance) neither
        // waits for it nor takes its place: it is a request of its own.
        let mut collides = false;
        if let Some(p) = waits_for.and_then(|t| self.pending.get_mut(&t)) {
            if p.key != *key {
                collides = true;
            } else {
                if p.waiting.len() >= self.cfg.max_waiting
                    || self.waiting_total >= self.cfg.max_waiting_total
                {
                    self.bump(slice, |c| c.drops.waiting_full += 1);
                    self.counters.dropped += 1;
                    return;
                }
                if p.waiting.capacity() == 0 {
                    p.waiting = self.lists.take();
                }
                p.waiting.push((self.frames.copy(frame), stamp));
                self.waiting_total += 1;
                self.bump(slice, |c| c.pending_waits += 1);
                return;
            }
        }
        if self.pending.len() >= self.cfg.max_pending_flows {
            self.bump(slice, |c| c.drops.pending_full += 1);
            self.counters.dropped += 1;
            return;
        }
        let control = self
            .shared
            .slices
            .get(slice)
            .is_some_and(|s| s.filter.matches(frame));
        let copy = self.frames.copy(frame);
        match self.request(slice, control, in_port, copy) {
            Ok(token) => {
                if self.cfg.pending_table && !collides {
                    self.by_key.insert(h, token);
                }
                self.pending.insert(
                    token,
                    Pending {
                        key: key.clone(),
                        hash: h,
                        slice,
                        control,
                        since: self.now,
                        in_port,
                        stamp,
                        waiting: Vec::new(),
                    },
                );
            }
            Err(why) => {
                self.refused(slice, control, why, 1);
            }
        }
    }

    /// Count `n` frames dropped because their request was refused.
    fn refused(&mut self, slice: usize, control: bool, why: Refused, n: u64) {
        match (why, control) {
            (Refused::Gone, _) => self.bump(slice, |c| c.drops.app_gone += n),
            (Refused::Full, true) => self.bump(slice, |c| c.drops.control_queue_full += n),
            (Refused::Full, false) => self.bump(slice, |c| c.drops.queue_full += n),
        }
        self.counters.dropped += n;
    }

    /// Queue `frame` to slice `slice`'s app (its control queue with
    /// `control`), staged: [`Self::send_staged`] hands the stage's staged
    /// requests over, one batch per slice. The caller records the flow as
    /// pending under the token; a request the queue then refuses takes its
    /// flow (and the frames that waited for it meanwhile) with it.
    fn request(
        &mut self,
        slice: usize,
        control: bool,
        in_port: u16,
        frame: Vec<u8>,
    ) -> Result<u64, Refused> {
        let token = self.next_token;
        let Some(out) = self.outbox.get_mut(slice) else {
            return Err(Refused::Gone);
        };
        let req = Request {
            token,
            in_port,
            frame,
            worker: self.slot,
        };
        if control {
            out.control.push(req);
        } else {
            out.data.push(req);
        }
        self.next_token += 1;
        Ok(token)
    }

    /// Hand the staged requests over: one lock and at most one wake-up of
    /// the app thread per slice. Requests beyond a queue's room are
    /// dropped (counted as full), with the frames waiting for them.
    fn send_staged(&mut self) {
        let shared = self.shared.clone();
        for (s, slice) in shared.slices.iter().enumerate() {
            let Some(out) = self.outbox.get_mut(s) else {
                break;
            };
            if out.control.is_empty() && out.data.is_empty() {
                continue;
            }
            let (nc, nd) = (out.control.len() as u64, out.data.len() as u64);
            let why = match slice.queue.push_batch(&mut out.control, &mut out.data) {
                Ok(()) => Refused::Full,
                Err(why) => why,
            };
            let (rc, rd) = (out.control.len() as u64, out.data.len() as u64);
            let mut refused = std::mem::take(&mut out.control);
            let mut data = std::mem::take(&mut out.data);
            self.bump(s, |c| {
                c.app_requests += (nc - rc) + (nd - rd);
                c.control_requests += nc - rc;
            });
            for (control, reqs) in [(true, &mut refused), (false, &mut data)] {
                for r in reqs.drain(..) {
                    if let Some(p) = self.pending.remove(&r.token) {
                        self.forget(p.hash, r.token);
                        self.waiting_total -= p.waiting.len();
                        self.refused(s, control, why, 1 + p.waiting.len() as u64);
                    }
                }
            }
            // The vectors go back (emptied), keeping their room.
            if let Some(out) = self.outbox.get_mut(s) {
                out.control = refused;
                out.data = data;
            }
        }
    }

    /// Send what the app answered since the last call, and drop flows it
    /// has not answered within `pending_timeout`.
    pub fn poll(&mut self, sink: &mut impl Sink) {
        self.now = Instant::now();
        while let Ok(batch) = self.reply_rx.try_recv() {
            for r in batch {
                self.answer(r, sink);
            }
        }
        self.send_staged();
        self.expire(self.now);
    }

    /// Wait (at most `timeout`) until every pending flow is answered or
    /// dropped, sending as answers come. Whether nothing is pending.
    pub fn flush(&mut self, sink: &mut impl Sink, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        self.poll(sink);
        while !self.pending.is_empty() {
            let now = Instant::now();
            self.now = now;
            if now >= deadline {
                break;
            }
            match self
                .reply_rx
                .recv_timeout((deadline - now).min(Duration::from_millis(10)))
            {
                Ok(batch) => {
                    for r in batch {
                        self.answer(r, sink);
                    }
                    self.send_staged();
                }
                Err(_) => self.expire(Instant::now()),
            }
        }
        self.pending.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        // A scan at most every quarter timeout: a flow is dropped between
        // one and 1.25 timeouts after its request.
        if self.pending.is_empty() || now < self.next_scan {
            return;
        }
        self.next_scan = now + self.cfg.pending_timeout / 4;
        let timeout = self.cfg.pending_timeout;
        let old: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| now.duration_since(p.since) >= timeout)
            .map(|(&t, _)| t)
            .collect();
        for t in old {
            if let Some(p) = self.pending.remove(&t) {
                self.forget(p.hash, t);
                let n = 1 + p.waiting.len() as u64;
                self.waiting_total -= p.waiting.len();
                self.bump(p.slice, |c| c.drops.app_timeout += n);
                self.counters.dropped += n;
            }
        }
    }

    fn answer(&mut self, r: Response, sink: &mut impl Sink) {
        let Some(mut p) = self.pending.remove(&r.token) else {
            // The flow timed out: its slice is no longer known.
            self.sdf.late_replies += 1;
            return;
        };
        let s = p.slice;
        self.forget(p.hash, r.token);
        self.waiting_total -= p.waiting.len();
        // The frame the app decided.
        if r.drop.is_some() {
            self.bump(s, |c| c.drops.app_fault += 1);
            self.counters.dropped += 1;
        } else {
            self.emit_all(&r.emits, p.stamp, sink);
        }
        // Sent: their buffers serve the next misses.
        for e in r.emits {
            self.frames.give(e.bytes);
        }
        if p.waiting.is_empty() {
            return;
        }
        match (&r.same, r.drop) {
            // Same header, same port: the same decision, as a hit would
            // have answered had it been cached before they came.
            (Some(actions), None) => {
                let mut waiting = std::mem::take(&mut p.waiting);
                for (mut f, stamp) in waiting.drain(..) {
                    self.bump(s, |c| c.pending_resolved += 1);
                    match actions.apply(&mut f) {
                        Outcome::Forward => {
                            let (ports, ctl) = (actions.ports(), actions.controller());
                            count_out(&mut self.counters, ports, ctl, f.len());
                            sink.emit(ports, ctl, &f, stamp);
                        }
                        Outcome::Expired | Outcome::TooShort => {
                            self.bump(s, |c| c.drops.ttl_expired += 1);
                            self.counters.dropped += 1;
                        }
                    }
                    self.frames.give(f);
                }
                self.lists.give(waiting);
            }
            // The app dropped the packet for a fault of its own: the same
            // header meets the same fault.
            (_, Some(_)) => {
                let n = p.waiting.len() as u64;
                self.bump(s, |c| c.drops.app_fault += n);
                self.counters.dropped += n;
            }
            // Not cacheable: the app must see each packet. The first
            // waiting one becomes the flow's request; the rest wait on.
            _ => {
                let (frame, stamp) = p.waiting.remove(0);
                self.bump(s, |c| c.resubmitted += 1);
                match self.request(s, p.control, p.in_port, frame) {
                    Ok(token) => {
                        self.waiting_total += p.waiting.len();
                        let h = p.hash;
                        if self.cfg.pending_table && !self.by_key.contains_key(&h) {
                            self.by_key.insert(h, token);
                        }
                        p.stamp = stamp;
                        p.since = self.now;
                        self.pending.insert(token, p);
                    }
                    Err(why) => {
                        let n = 1 + p.waiting.len() as u64;
                        self.refused(s, p.control, why, n);
                    }
                }
            }
        }
    }

    /// Take the flow hashed `h` out of the pending-miss table if `token`
    /// is its request there.
    fn forget(&mut self, h: u64, token: u64) {
        if self.by_key.get(&h) == Some(&token) {
            self.by_key.remove(&h);
        }
    }

    fn emit_all(&mut self, emits: &[Emit], stamp: Stamp, sink: &mut impl Sink) {
        if emits.is_empty() {
            self.counters.dropped += 1;
            return;
        }
        let mut ports_any = false;
        let mut ctl_any = false;
        for e in emits {
            for &p in &e.ports {
                self.counters.tx_add(p, e.bytes.len() as u64);
            }
            ports_any |= !e.ports.is_empty();
            ctl_any |= e.controller;
            sink.emit(&e.ports, e.controller, &e.bytes, stamp);
        }
        if ports_any {
            self.counters.forwarded += 1;
        } else if ctl_any {
            self.counters.punted += 1;
        } else {
            self.counters.dropped += 1;
        }
    }
}

/// The hasher of the stage's maps, whose keys are already uniform (flow
/// hashes under a secret seed) or sequential (tokens): one multiply mixes
/// them (SipHash over a 128-byte header key per lookup was a tenth of the
/// miss path).
type Mixed = BuildHasherDefault<MixHasher>;

#[derive(Default)]
struct MixHasher(u64);

impl Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// Count one decided frame of `len` bytes sent to `ports` (and the
/// control port).
fn count_out(c: &mut Counters, ports: &[u16], controller: bool, len: usize) {
    for &p in ports {
        c.tx_add(p, len as u64);
    }
    if !ports.is_empty() {
        c.forwarded += 1;
    } else if controller {
        c.punted += 1;
    } else {
        c.dropped += 1;
    }
}
