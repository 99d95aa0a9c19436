//! The forwarder side: follow a controller's FIB.
//!
//! One background thread connects, runs the handshake
//! ([`crate::handshake`]: nonces, then per-connection keys), sends a
//! Hello, installs the Snapshot (reassembled from its parts when it spans
//! several frames) as
//! a new [`Table`] (an [`ArcSwapOption`] swap), applies each Delta (and
//! each delta of a DeltaBatch, in order) to the
//! current [`Query`] in place (readers keep running, lock-free), and Acks
//! what it applied: once no further whole frame is already buffered (or
//! every 256 frames), one Ack for the highest sequence number applied, so a
//! burst of deltas costs one Ack, not one each. Anything invalid is rejected with a logged reason
//! and a counter, and leaves the table as it was:
//!
//! * a frame that does not decode or authenticate (bit flips, another key,
//!   bad magic or version, oversize), a frame of another session, an
//!   unexpected message type or a controller Error: the connection is
//!   closed and re-opened with backoff (Hello, then a fresh Snapshot);
//! * a sequence number below the next one (a replay): ignored;
//! * a sequence number above the next one (a gap) or a delta that does not
//!   apply (wrong generation, index out of range, bad action entries): a
//!   resync Hello is sent, deltas are skipped until the Snapshot that
//!   answers it. In a DeltaBatch the deltas before the one that does not
//!   apply stay applied (each is a whole route change).
//!
//! The Hello offers DeltaBatch ([`FEATURE_DELTA_BATCH`]) unless
//! [`FollowerConfig::delta_batches`] is off. A controller that predates
//! the feature refuses such a Hello and closes the connection before
//! sending anything; the next attempt then sends the original Hello, and
//! the one after a connection that did get frames offers the feature
//! again.
//!
//! A controller silent for [`FollowerConfig::read_timeout`] (it sends
//! Keepalives when it has nothing else to say) is presumed gone: the
//! connection is closed and re-opened.
//!
//! Readers call [`FibFollower::table`] and keep the `Arc<Table>` for as
//! long as they like (a batch, a burst); slot writes of later deltas reach
//! the same `Query` in place, a later Snapshot swaps in a new `Table`.

use std::fmt;
use std::io::{self, BufReader};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use nexthop_hash::KeyBytes;
use nexthop_othello::fib::{Action, ActionTable};
use nexthop_othello::{Delta, Query};

use crate::frame::{
    encode_parts, read_frame, write_all, AuthKey, FrameError, ReadError, MAX_PAYLOAD,
};
use crate::handshake::{self, fresh_nonce, HandshakeError, SessionKeys};
use crate::message::{parse_snapshot_body, BatchDelta, Hello, Message, FEATURE_DELTA_BATCH};

/// Why a message was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The tag did not verify (corruption or another key).
    BadMac,
    /// The frame did not decode (magic, version, reserved, length, type).
    Malformed,
    /// An authenticated frame of another session.
    Session,
    /// A sequence number already seen.
    Replay,
    /// A sequence number past the next one.
    OutOfOrder,
    /// The payload did not parse, or the message type is not one a
    /// controller sends.
    Message,
    /// The snapshot or delta did not apply to the table.
    Apply,
    /// The controller sent an Error.
    ControllerError,
}

impl RejectReason {
    /// Every reason, in counter order.
    pub const ALL: [RejectReason; 8] = [
        RejectReason::BadMac,
        RejectReason::Malformed,
        RejectReason::Session,
        RejectReason::Replay,
        RejectReason::OutOfOrder,
        RejectReason::Message,
        RejectReason::Apply,
        RejectReason::ControllerError,
    ];

    fn index(self) -> usize {
        RejectReason::ALL
            .iter()
            .position(|&r| r == self)
            .unwrap_or(0)
    }

    /// A short name for logs and statistics.
    pub fn name(self) -> &'static str {
        match self {
            RejectReason::BadMac => "bad-mac",
            RejectReason::Malformed => "malformed",
            RejectReason::Session => "session",
            RejectReason::Replay => "replay",
            RejectReason::OutOfOrder => "out-of-order",
            RejectReason::Message => "message",
            RejectReason::Apply => "apply",
            RejectReason::ControllerError => "controller-error",
        }
    }
}

/// Follower settings.
#[derive(Clone, Debug)]
pub struct FollowerConfig {
    /// The controller's address.
    pub controller: SocketAddr,
    /// This forwarder's name (sent in Hello).
    pub forwarder_id: String,
    /// The value column to follow (0 for a Concise FIB).
    pub column: u32,
    /// First reconnect delay; doubles per failed attempt.
    pub backoff_min: Duration,
    /// Longest reconnect delay.
    pub backoff_max: Duration,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Largest frame payload accepted (default [`MAX_PAYLOAD`]; at least
    /// the controller's [`crate::ControllerConfig::frame_limit`]).
    pub max_payload: u32,
    /// Largest snapshot body reassembled from Snapshot parts (default
    /// 64 GiB): a larger announced total is refused; memory grows with
    /// the bytes received, not with the announced total.
    pub max_snapshot: u64,
    /// Longest wait for the next frame, in the handshake and after it
    /// (default 20 s; at least 1 ms): a controller silent for this long
    /// is presumed gone and the follower reconnects. Must be longer than
    /// the controller's [`crate::ControllerConfig::keepalive`] and than
    /// the time the controller takes to build a snapshot after a Hello
    /// (it sends nothing meanwhile: seconds for 10^8 names).
    pub read_timeout: Duration,
    /// Emit `tracing` events for connects, installs and rejects.
    pub log: bool,
    /// Offer DeltaBatch frames in the Hello (default on; off: the
    /// original Hello, one Delta frame per change).
    pub delta_batches: bool,
}

impl FollowerConfig {
    /// Defaults for following `controller`.
    pub fn new(controller: SocketAddr, forwarder_id: impl Into<String>) -> Self {
        FollowerConfig {
            controller,
            forwarder_id: forwarder_id.into(),
            column: 0,
            backoff_min: Duration::from_millis(20),
            backoff_max: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            max_payload: MAX_PAYLOAD,
            max_snapshot: 64 << 30,
            read_timeout: Duration::from_secs(20),
            log: true,
            delta_batches: true,
        }
    }
}

/// The data-plane table: a query structure and the action table its ids
/// index.
#[derive(Debug)]
pub struct Table {
    pub(crate) query: Arc<Query>,
    pub(crate) actions: Arc<ActionTable>,
}

impl Table {
    /// The query structure (deltas are applied to it in place).
    pub fn query(&self) -> &Query {
        &self.query
    }

    /// The action table.
    pub fn actions(&self) -> &ActionTable {
        &self.actions
    }

    /// The action of `name` (`None`: miss, or an id the table lacks).
    pub fn lookup<K: KeyBytes + ?Sized>(&self, name: &K) -> Option<&Action> {
        self.actions.get(self.query.lookup(name)?)
    }
}

/// A copy of the follower's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowerStats {
    /// TCP connections made.
    pub connects: u64,
    /// Snapshots installed (initial, resync and rebuild deltas).
    pub snapshots: u64,
    /// Deltas applied (from Delta frames and inside DeltaBatch frames).
    pub deltas: u64,
    /// DeltaBatch frames applied whole.
    pub batches: u64,
    /// Resync Hellos sent on an open connection.
    pub resyncs: u64,
    /// Deltas skipped while waiting for a resync snapshot.
    pub skipped: u64,
    /// Keepalive frames received.
    pub keepalives: u64,
    /// Connections closed because the controller sent nothing for
    /// [`FollowerConfig::read_timeout`].
    pub timeouts: u64,
    /// Rejects, indexed like [`RejectReason::ALL`].
    pub rejects: [u64; 8],
    /// Controller sequence number of the last applied message.
    pub last_seq: u64,
}

impl FollowerStats {
    /// Rejects for `reason`.
    pub fn rejects(&self, reason: RejectReason) -> u64 {
        self.rejects[reason.index()]
    }

    /// Rejects for every reason.
    pub fn total_rejects(&self) -> u64 {
        self.rejects.iter().sum()
    }
}

#[derive(Default)]
struct Counters {
    connects: AtomicU64,
    snapshots: AtomicU64,
    deltas: AtomicU64,
    batches: AtomicU64,
    resyncs: AtomicU64,
    skipped: AtomicU64,
    keepalives: AtomicU64,
    timeouts: AtomicU64,
    rejects: [AtomicU64; 8],
    last_seq: AtomicU64,
}

struct Shared {
    key: AuthKey,
    cfg: FollowerConfig,
    table: ArcSwapOption<Table>,
    counters: Counters,
    stop: AtomicBool,
    stream: Mutex<Option<TcpStream>>,
}

impl Shared {
    fn log(&self, msg: fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::info!(
                target: "nexthop_control::follower",
                "follower {}: {msg}",
                self.cfg.forwarder_id
            );
        }
    }

    fn warn(&self, msg: fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::warn!(
                target: "nexthop_control::follower",
                "follower {}: {msg}",
                self.cfg.forwarder_id
            );
        }
    }

    fn reject(&self, r: RejectReason, why: fmt::Arguments<'_>) {
        self.counters.rejects[r.index()].fetch_add(1, Ordering::Relaxed);
        self.warn(format_args!("rejected ({}): {why}", r.name()));
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// A forwarder's connection to its controller (a background thread).
/// Dropping it stops the thread.
pub struct FibFollower {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for FibFollower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FibFollower")
            .field("controller", &self.shared.cfg.controller)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl FibFollower {
    /// Start following (connects in the background).
    pub fn start(key: AuthKey, cfg: FollowerConfig) -> io::Result<FibFollower> {
        let shared = Arc::new(Shared {
            key,
            cfg,
            table: ArcSwapOption::empty(),
            counters: Counters::default(),
            stop: AtomicBool::new(false),
            stream: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fib-follower".into())
            .spawn(move || run(&s))?;
        Ok(FibFollower {
            shared,
            thread: Some(thread),
        })
    }

    /// The current table (`None` before the first snapshot).
    pub fn table(&self) -> Option<Arc<Table>> {
        self.shared.table.load_full()
    }

    /// The counters.
    pub fn stats(&self) -> FollowerStats {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut rejects = [0u64; 8];
        for (r, a) in rejects.iter_mut().zip(&c.rejects) {
            *r = l(a);
        }
        FollowerStats {
            connects: l(&c.connects),
            snapshots: l(&c.snapshots),
            deltas: l(&c.deltas),
            batches: l(&c.batches),
            resyncs: l(&c.resyncs),
            skipped: l(&c.skipped),
            keepalives: l(&c.keepalives),
            timeouts: l(&c.timeouts),
            rejects,
            last_seq: l(&c.last_seq),
        }
    }

    /// Wait until `pred(stats)` holds or `timeout` passes; whether it held.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&FollowerStats) -> bool) -> bool {
        crate::poll_until(timeout, Duration::from_micros(200), || pred(&self.stats()))
    }

    /// Stop the thread and close the connection.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self
            .shared
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FibFollower {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.halt();
        }
    }
}

fn sleep_unless_stopped(sh: &Shared, d: Duration) {
    let end = Instant::now() + d;
    while !sh.stopped() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5).min(d));
    }
}

fn run(sh: &Shared) {
    let mut backoff = sh.cfg.backoff_min;
    let mut offer = sh.cfg.delta_batches;
    while !sh.stopped() {
        match TcpStream::connect_timeout(&sh.cfg.controller, sh.cfg.connect_timeout) {
            Ok(s) => {
                sh.counters.connects.fetch_add(1, Ordering::Relaxed);
                let features = if offer { FEATURE_DELTA_BATCH } else { 0 };
                let end = session(sh, s, features);
                if end.installed {
                    backoff = sh.cfg.backoff_min;
                }
                // Closed before a single frame after offering features: it
                // may be a controller that refuses the longer Hello.
                offer = sh.cfg.delta_batches && (end.heard || features == 0);
            }
            Err(e) => sh.warn(format_args!("connect {}: {e}", sh.cfg.controller)),
        }
        if sh.stopped() {
            break;
        }
        sleep_unless_stopped(sh, backoff);
        backoff = (backoff * 2).min(sh.cfg.backoff_max);
    }
}

struct Conn<'a> {
    sh: &'a Shared,
    stream: TcpStream,
    keys: SessionKeys,
    seq: u64,
    features: u32,
}

impl Conn<'_> {
    fn send(&mut self, m: &Message, generation: u64) -> io::Result<()> {
        self.seq += 1;
        let b = encode_parts(
            &self.keys.send,
            m.ty(),
            self.keys.session,
            self.seq,
            generation,
            &m.encode(),
        );
        write_all(&mut self.stream, &b)
    }

    fn hello(&mut self) -> io::Result<()> {
        let gen = self
            .sh
            .table
            .load()
            .as_ref()
            .map_or(0, |t| t.query.meta().generation);
        let h = Hello {
            forwarder_id: self.sh.cfg.forwarder_id.clone(),
            column: self.sh.cfg.column,
            last_seq: self.sh.counters.last_seq.load(Ordering::Relaxed),
            last_generation: gen,
            features: self.features,
        };
        self.send(&Message::Hello(h), gen)
    }
}

/// Whether `buf` starts with a whole frame (header, payload and tag), so
/// reading it will not block. Only the length field is looked at; the frame
/// is checked when it is read.
fn whole_frame_buffered(buf: &[u8]) -> bool {
    let Some(len) = buf.get(crate::frame::field::LEN) else {
        return false;
    };
    let mut l = [0u8; 4];
    l.copy_from_slice(len);
    let len = u32::from_le_bytes(l) as usize;
    buf.len() >= crate::frame::HEADER_LEN + len + crate::frame::TAG_LEN
}

/// How a connection ended.
struct SessionEnd {
    /// A snapshot was installed on it.
    installed: bool,
    /// At least one frame was received on it.
    heard: bool,
}

/// Run one connection, offering `features` in its Hellos.
fn session(sh: &Shared, s: TcpStream, features: u32) -> SessionEnd {
    let mut heard = false;
    let fail = SessionEnd {
        installed: false,
        heard: false,
    };
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(sh.cfg.read_timeout.max(Duration::from_millis(1))));
    let mut rd = match s.try_clone() {
        Ok(r) => BufReader::with_capacity(1 << 16, r),
        Err(e) => {
            sh.log(format_args!("{e}"));
            return fail;
        }
    };
    if let Ok(c) = s.try_clone() {
        *sh.stream.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
    }
    if sh.stopped() {
        return fail;
    }
    let mut w = &s;
    let keys = match handshake::connect(&mut rd, &mut w, &sh.key, &fresh_nonce()) {
        Ok(k) => k,
        Err(e) => {
            handshake_failed(sh, &e);
            let _ = s.shutdown(Shutdown::Both);
            return fail;
        }
    };
    let mut c = Conn {
        sh,
        stream: s,
        keys,
        seq: 0,
        features,
    };
    sh.counters.last_seq.store(0, Ordering::Relaxed);
    let mut installed = false;
    if let Err(e) = c.hello() {
        sh.warn(format_args!("hello: {e}"));
        return fail;
    }
    sh.log(format_args!("connected to {}", sh.cfg.controller));
    let mut expect = 1u64;
    let mut resyncing = true;
    // Applied frames not yet acknowledged, and the highest one's sequence
    // number and generation.
    let mut unacked = 0u32;
    let mut ack = (0u64, 0u64);
    // A snapshot arriving in parts.
    let mut parts: Option<Assembly> = None;
    let end = loop {
        // Acknowledge before a read that may block (and every 256 frames).
        if unacked > 0 && (unacked >= 256 || !whole_frame_buffered(rd.buffer())) {
            unacked = 0;
            if let Err(e) = c.send(&Message::Ack { seq: ack.0 }, ack.1) {
                break format!("ack: {e}");
            }
        }
        let f = match read_frame(&mut rd, &c.keys.recv, sh.cfg.max_payload) {
            Ok(f) => {
                heard = true;
                f
            }
            Err(ReadError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                sh.counters.timeouts.fetch_add(1, Ordering::Relaxed);
                break format!(
                    "no frame from the controller for {:?}; reconnecting",
                    sh.cfg.read_timeout
                );
            }
            Err(ReadError::Io(e)) => break format!("connection closed: {e}"),
            Err(ReadError::Frame(e)) => {
                let r = if matches!(e, FrameError::BadMac) {
                    RejectReason::BadMac
                } else {
                    RejectReason::Malformed
                };
                sh.reject(r, format_args!("{e}"));
                break "reconnecting after an invalid frame".into();
            }
        };
        if f.session != c.keys.session {
            sh.reject(
                RejectReason::Session,
                format_args!("session {:#x}, ours is {:#x}", f.session, c.keys.session),
            );
            break "reconnecting after a frame of another session".into();
        }
        if f.seq < expect {
            sh.reject(
                RejectReason::Replay,
                format_args!("sequence {} already seen (next is {expect})", f.seq),
            );
            continue;
        }
        let gap = f.seq > expect;
        expect = f.seq.saturating_add(1);
        if gap {
            sh.reject(
                RejectReason::OutOfOrder,
                format_args!("sequence {} skips ahead of {}", f.seq, expect - 1),
            );
            if !resync(&mut c, &mut resyncing) {
                break "resync failed".into();
            }
            continue;
        }
        let msg = match Message::decode(f.ty, &f.payload) {
            Ok(m) => m,
            Err(e) => {
                sh.reject(RejectReason::Message, format_args!("{e}"));
                break "reconnecting after a malformed message".into();
            }
        };
        if parts.is_some() && !matches!(msg, Message::SnapshotPart { .. }) {
            sh.reject(
                RejectReason::Message,
                format_args!("{:?} inside a snapshot sent in parts", msg.ty()),
            );
            break "reconnecting after a broken snapshot transfer".into();
        }
        let applied = match msg {
            Message::Snapshot { snapshot, actions } => {
                install(sh, &snapshot, ActionsFrom::Text(&actions))
            }
            Message::SnapshotPart {
                total,
                offset,
                data,
            } => match Assembly::add(&mut parts, total, offset, &data, sh.cfg.max_snapshot) {
                Err(e) => {
                    sh.reject(RejectReason::Message, format_args!("{e}"));
                    break "reconnecting after a broken snapshot transfer".into();
                }
                Ok(None) => continue,
                Ok(Some(body)) => match parse_snapshot_body(&body) {
                    Ok((snapshot, actions)) => install(sh, snapshot, ActionsFrom::Text(actions)),
                    Err(e) => {
                        sh.reject(RejectReason::Message, format_args!("snapshot: {e}"));
                        break "reconnecting after a malformed message".into();
                    }
                },
            },
            Message::Keepalive => {
                sh.counters.keepalives.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Message::Delta { delta, new_actions } => {
                if resyncing {
                    sh.counters.skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                apply_delta(sh, &delta, &new_actions)
            }
            Message::DeltaBatch { deltas } => {
                if resyncing {
                    let n = deltas.len() as u64;
                    sh.counters.skipped.fetch_add(n, Ordering::Relaxed);
                    continue;
                }
                apply_batch(sh, &deltas)
            }
            Message::Error { code, text } => {
                sh.reject(
                    RejectReason::ControllerError,
                    format_args!("controller error {code:?}: {text}"),
                );
                break "controller closed the session".into();
            }
            m @ (Message::Hello(_)
            | Message::Ack { .. }
            | Message::Nonce(_)
            | Message::Push { .. }
            | Message::StatsRequest
            | Message::Report { .. }) => {
                sh.reject(
                    RejectReason::Message,
                    format_args!("a controller does not send {:?}", m.ty()),
                );
                break "reconnecting after an unexpected message".into();
            }
        };
        match applied {
            Ok(kind) => {
                if kind == Applied::Snapshot {
                    resyncing = false;
                    installed = true;
                }
                sh.counters.last_seq.store(f.seq, Ordering::Relaxed);
                let gen = sh
                    .table
                    .load()
                    .as_ref()
                    .map_or(0, |t| t.query.meta().generation);
                ack = (f.seq, gen);
                unacked += 1;
            }
            Err(why) => {
                sh.reject(RejectReason::Apply, format_args!("{why}"));
                if !resync(&mut c, &mut resyncing) {
                    break "resync failed".into();
                }
            }
        }
    };
    if !sh.stopped() {
        sh.warn(format_args!("{end}"));
    }
    let _ = c.stream.shutdown(Shutdown::Both);
    SessionEnd { installed, heard }
}

/// Log (and count) why a handshake failed.
fn handshake_failed(sh: &Shared, e: &HandshakeError) {
    let reason = match e {
        HandshakeError::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            sh.counters.timeouts.fetch_add(1, Ordering::Relaxed);
            None
        }
        HandshakeError::Io(_) => None,
        HandshakeError::Frame(FrameError::BadMac) => Some(RejectReason::BadMac),
        HandshakeError::Frame(_) | HandshakeError::Version { .. } => Some(RejectReason::Malformed),
        HandshakeError::Protocol(_) => Some(RejectReason::Message),
        HandshakeError::Refused { .. } => Some(RejectReason::ControllerError),
    };
    match reason {
        Some(r) => sh.reject(r, format_args!("handshake: {e}")),
        None => sh.warn(format_args!(
            "handshake: {e} (a controller that closes at once may speak an older protocol \
             version than {})",
            crate::frame::VERSION
        )),
    }
}

/// A snapshot body being reassembled from Snapshot parts.
struct Assembly {
    total: u64,
    body: Vec<u8>,
}

impl Assembly {
    /// Add a part; the whole body once its last part arrived. Parts must
    /// come in order, each where the previous ended, all with one total.
    fn add(
        cur: &mut Option<Assembly>,
        total: u64,
        offset: u64,
        data: &[u8],
        max: u64,
    ) -> Result<Option<Vec<u8>>, String> {
        if total > max {
            return Err(format!(
                "snapshot of {total} bytes is over the limit of {max} (FollowerConfig::max_snapshot)"
            ));
        }
        let a = cur.get_or_insert_with(|| Assembly {
            total,
            body: Vec::new(),
        });
        if a.total != total || a.body.len() as u64 != offset {
            return Err(format!(
                "snapshot part at {offset} of {total} bytes where a part at {} of {} was next",
                a.body.len(),
                a.total
            ));
        }
        // Grows with the bytes received, not with the announced total.
        a.body.extend_from_slice(data);
        if a.body.len() as u64 == a.total {
            return Ok(cur.take().map(|a| a.body));
        }
        Ok(None)
    }
}

fn resync(c: &mut Conn<'_>, resyncing: &mut bool) -> bool {
    if *resyncing {
        return true;
    }
    *resyncing = true;
    c.sh.counters.resyncs.fetch_add(1, Ordering::Relaxed);
    c.sh.log(format_args!("asking for a resync snapshot"));
    c.hello().is_ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Applied {
    Snapshot,
    Delta,
}

enum ActionsFrom<'a> {
    /// A whole table.
    Text(&'a str),
    /// The current table plus these entries.
    Extend(ActionTable),
}

/// The current action table plus `ID ACTION` lines that must continue its ids.
fn extended(sh: &Shared, lines: &str) -> Result<Option<ActionTable>, String> {
    if lines.trim().is_empty() {
        return Ok(None);
    }
    let cur = sh.table.load();
    let Some(cur) = cur.as_ref() else {
        return Err("delta before any snapshot".into());
    };
    let mut text = cur.actions.to_text();
    text.push_str(lines);
    ActionTable::from_text(&text)
        .map(Some)
        .map_err(|e| format!("new action entries: {e}"))
}

fn install(sh: &Shared, snapshot: &[u8], actions: ActionsFrom<'_>) -> Result<Applied, String> {
    let query = Query::from_snapshot(snapshot).map_err(|e| format!("snapshot: {e}"))?;
    let actions = match actions {
        ActionsFrom::Text(t) => {
            ActionTable::from_text(t).map_err(|e| format!("snapshot action table: {e}"))?
        }
        ActionsFrom::Extend(t) => t,
    };
    let gen = query.meta().generation;
    sh.table.store(Some(Arc::new(Table {
        query: Arc::new(query),
        actions: Arc::new(actions),
    })));
    sh.counters.snapshots.fetch_add(1, Ordering::Relaxed);
    sh.log(format_args!(
        "installed snapshot: generation {gen}, {} bytes",
        snapshot.len()
    ));
    Ok(Applied::Snapshot)
}

/// Apply a batch's deltas in order; stop at the first that does not apply
/// (those before it stay applied).
fn apply_batch(sh: &Shared, deltas: &[BatchDelta]) -> Result<Applied, String> {
    for (i, d) in deltas.iter().enumerate() {
        apply_delta(sh, &d.delta, &d.new_actions)
            .map_err(|e| format!("batch delta {} of {}: {e}", i + 1, deltas.len()))?;
    }
    sh.counters.batches.fetch_add(1, Ordering::Relaxed);
    Ok(Applied::Delta)
}

fn apply_delta(sh: &Shared, delta: &Delta, new_actions: &str) -> Result<Applied, String> {
    let ext = extended(sh, new_actions)?;
    match delta {
        Delta::Snapshot(bytes) => {
            let actions = match ext {
                Some(t) => t,
                None => match sh.table.load().as_ref() {
                    Some(cur) => (*cur.actions).clone(),
                    None => ActionTable::new(),
                },
            };
            install(sh, bytes, ActionsFrom::Extend(actions))?;
            sh.counters.deltas.fetch_add(1, Ordering::Relaxed);
            Ok(Applied::Delta)
        }
        Delta::Ops { .. } => {
            let Some(cur) = sh.table.load_full() else {
                return Err("delta before any snapshot".into());
            };
            // New ids first (no slot refers to them yet), then the writes;
            // roll the action table back if the writes are refused.
            if let Some(t) = ext {
                sh.table.store(Some(Arc::new(Table {
                    query: cur.query.clone(),
                    actions: Arc::new(t),
                })));
            }
            if let Err(e) = cur.query.apply(delta) {
                sh.table.store(Some(cur));
                return Err(format!("delta: {e}"));
            }
            sh.counters.deltas.fetch_add(1, Ordering::Relaxed);
            Ok(Applied::Delta)
        }
    }
}
