//! The controller: owns a [`ConciseFib`], serves it to forwarders over TCP
//! and pushes the delta of every route change to all of them, in order.
//!
//! Threads: one accept thread; per connection one thread for the
//! handshake ([`crate::handshake`], under one deadline for the whole of
//! it), which then writes (the snapshot, then every queued delta, a
//! Keepalive when idle), and a reader thread (Acks, resync Hellos). The
//! accept thread refuses connections past
//! [`ControllerConfig::max_connections`] open or
//! [`ControllerConfig::max_handshakes`] in their handshake, so threads and
//! sockets are bounded by the configuration, not by what peers do; a
//! connection's queue is bounded by [`ControllerConfig::max_queue_bytes`]
//! (a forwarder that does not read is dropped and resyncs from a snapshot
//! when it reconnects). [`Controller::apply_changes`] runs on the caller's thread: it
//! updates the FIB and queues the encoded delta payloads of the whole call
//! to every connection as one message under one lock (one wake-up of each
//! writer, which sends the call's frames with one write), so each connection gets the changes in the
//! order they were applied, with none missed or doubled around its
//! snapshot (each queued delta carries the FIB version it produces; the
//! writer skips those its last snapshot already contains). To a forwarder
//! whose Hello offers [`FEATURE_DELTA_BATCH`] the writer packs the call's
//! deltas into DeltaBatch frames of at most
//! [`ControllerConfig::batch_limit`] payload bytes (one header and one
//! HMAC per batch instead of per delta; a lone delta goes as a Delta
//! frame); to others it sends one Delta frame per change.
//!
//! Propagation time: each change is stamped when `apply_changes` takes it;
//! the writer notes the sequence number its delta went out with, and the
//! reader, on the forwarder's Ack (sent after the forwarder applied the
//! delta to the table its workers read), records stamp-to-Ack in a
//! histogram ([`Controller::propagation`]); a batch frame's deltas each
//! keep their own stamp. It is an upper bound on
//! change-to-forwarder-visible: it includes the Ack's trip back.
//!
//! Admin clients ([`crate::admin`]) connect to the same listener, pass
//! the same handshake and count against the same caps; a Hello with
//! [`ROLE_ADMIN`] makes the connection's thread serve its requests instead
//! of the FIB: a Push goes through [`Controller::apply_numbered`], the
//! path of a changes file.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nexthop_othello::fib::{ConciseFib, FibError, LinedChange, NameKey, RouteChange};
use thiserror::Error;

use crate::frame::{
    encode_parts, encode_with, write_all, write_frame_parts, AuthKey, DeadlineReader, MsgType,
    ReadError, MAX_PAYLOAD,
};
use crate::handshake::{self, fresh_nonce, HandshakeError, SessionKeys};
use crate::message::{
    batch_entry_len, delta_payload, try_snapshot_body, write_delta_batch, ErrorCode, Message,
    FEATURE_DELTA_BATCH, ROLE_ADMIN, SNAPSHOT_PART_HEADER,
};

/// Controller settings.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Address to listen on (default `127.0.0.1:0`, an ephemeral port).
    pub listen: SocketAddr,
    /// Deadline for a new connection's whole handshake, from accept to its
    /// Hello (default 10 s): all reads together, so a peer sending a byte
    /// at a time is cut off at it.
    pub handshake_timeout: Duration,
    /// Largest payload accepted from a forwarder.
    pub max_payload: u32,
    /// Emit `tracing` events for connections, resyncs and rejects.
    pub log: bool,
    /// Largest DeltaBatch payload built for forwarders that accept
    /// batches (default 1 MiB; capped at `frame_limit`); 0 sends every
    /// forwarder one Delta frame per change.
    pub batch_limit: u32,
    /// Route changes merged into one delta (default 256): an
    /// `apply_changes` call is applied in chunks of this many through
    /// Othello's batch path, and each chunk is shipped as one delta of all
    /// its slot writes. 1 gives one delta per change.
    pub changes_per_delta: usize,
    /// Largest frame payload sent (default and at most [`MAX_PAYLOAD`];
    /// below 1 KiB counts as 1 KiB):
    /// snapshots are sent in parts of this size, a delta larger than it
    /// is replaced by a snapshot. Forwarders must accept payloads this
    /// large ([`crate::FollowerConfig::max_payload`]).
    pub frame_limit: u32,
    /// Connections open at once, in their handshake or served (default
    /// 1024); more are accepted and closed at once, counted in
    /// [`ControllerStats::refused`].
    pub max_connections: usize,
    /// Connections in their handshake at once (default 64; at most
    /// `max_connections`); more are refused the same way, so peers
    /// without the key cannot hold more than this many sockets and
    /// threads, each for at most `handshake_timeout`.
    pub max_handshakes: usize,
    /// Bytes of deltas queued to one connection and not yet written
    /// (default 64 MiB). A connection whose queue would pass it (a
    /// forwarder that stopped reading) is closed; the forwarder
    /// reconnects and gets a snapshot. A single call's deltas are always
    /// queued to an empty queue.
    pub max_queue_bytes: usize,
    /// A Keepalive frame is sent to a forwarder after this long without
    /// any other frame (default 5 s; at least 1 ms). Forwarders time out
    /// after [`crate::FollowerConfig::read_timeout`], which must be longer.
    pub keepalive: Duration,
    /// Longest a write to a forwarder may block (default 30 s); then the
    /// connection is closed.
    pub write_timeout: Duration,
    /// Largest Push payload (the changes text) accepted from an admin
    /// client (default 64 MiB, at most [`MAX_PAYLOAD`]); a larger frame
    /// closes the connection (counted in [`ControllerStats::rejects`]).
    pub max_push_bytes: u32,
    /// An admin connection with no request for this long is closed
    /// (default 60 s; at least 1 ms).
    pub admin_idle_timeout: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            handshake_timeout: Duration::from_secs(10),
            max_payload: 1 << 16,
            log: true,
            batch_limit: 1 << 20,
            changes_per_delta: 256,
            frame_limit: MAX_PAYLOAD,
            max_connections: 1024,
            max_handshakes: 64,
            max_queue_bytes: 64 << 20,
            keepalive: Duration::from_secs(5),
            write_timeout: Duration::from_secs(30),
            max_push_bytes: 64 << 20,
            admin_idle_timeout: Duration::from_secs(60),
        }
    }
}

impl ControllerConfig {
    /// Largest frame payload sent: `frame_limit`, within 1 KiB ..= [`MAX_PAYLOAD`].
    pub(crate) fn frame_cap(&self) -> usize {
        self.frame_limit.clamp(1024, MAX_PAYLOAD) as usize
    }
}

/// Why the controller could not start or apply changes.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ControlError {
    /// Binding or configuring the listening socket failed.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// The FIB refused the changes (nothing was applied unless the error
    /// says an Othello rebuild failed midway).
    #[error(transparent)]
    Fib(#[from] FibError),
}

/// What one [`Controller::apply_changes`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Changes applied.
    pub changes: usize,
    /// Deltas queued for them (one per change, or one per chunk of
    /// [`ControllerConfig::changes_per_delta`] changes).
    pub deltas: usize,
    /// Data-plane slot writes shipped.
    pub slot_writes: usize,
    /// Changes that rebuilt the structure (shipped as whole snapshots).
    pub rebuilds: usize,
    /// Action-table entries added.
    pub new_actions: usize,
    /// FIB version after the call (changes applied since start).
    pub version: u64,
    /// Connections the deltas were queued to.
    pub followers: usize,
}

/// Controller counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerStats {
    /// Connections accepted (served or refused).
    pub accepted: u64,
    /// Connections now open (past their Hello).
    pub active: u64,
    /// Connections now in their handshake.
    pub handshaking: u64,
    /// Connections closed at once because `max_connections` or
    /// `max_handshakes` was reached.
    pub refused: u64,
    /// Handshakes cut off at the `handshake_timeout` deadline.
    pub handshake_timeouts: u64,
    /// Connections closed because their queue passed `max_queue_bytes`.
    pub slow_dropped: u64,
    /// Keepalive frames sent.
    pub keepalives: u64,
    /// Snapshot messages sent (initial and resync; a snapshot sent in
    /// several parts counts once).
    pub snapshots_sent: u64,
    /// Snapshot frames sent (parts).
    pub snapshot_frames: u64,
    /// Deltas sent (in Delta frames or inside DeltaBatch frames).
    pub deltas_sent: u64,
    /// Route changes in the deltas sent (a merged delta carries several).
    pub changes_sent: u64,
    /// DeltaBatch frames sent (each carries two or more deltas).
    pub batches_sent: u64,
    /// Resync Hellos received on open connections.
    pub resyncs: u64,
    /// Connections closed because of an invalid frame or message (in the
    /// handshake or after it).
    pub rejects: u64,
    /// Acks received.
    pub acks: u64,
    /// Snapshots and deltas the forwarders confirmed applied (each delta
    /// of a batch counts): an Ack confirms every frame up to its sequence
    /// number, so a forwarder may send fewer Acks than frames.
    pub acked: u64,
    /// Admin connections that passed the handshake.
    pub admin_sessions: u64,
    /// Admin Push requests applied.
    pub pushes: u64,
    /// Admin Push requests refused (a change that does not parse or
    /// apply; the FIB is unchanged).
    pub pushes_refused: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    accepted: AtomicU64,
    active: AtomicU64,
    refused: AtomicU64,
    handshake_timeouts: AtomicU64,
    slow_dropped: AtomicU64,
    keepalives: AtomicU64,
    snapshots_sent: AtomicU64,
    snapshot_frames: AtomicU64,
    deltas_sent: AtomicU64,
    changes_sent: AtomicU64,
    batches_sent: AtomicU64,
    resyncs: AtomicU64,
    pub(crate) rejects: AtomicU64,
    acks: AtomicU64,
    acked: AtomicU64,
    pub(crate) admin_sessions: AtomicU64,
    pub(crate) pushes: AtomicU64,
    pub(crate) pushes_refused: AtomicU64,
}

/// Change-to-acknowledged times of deltas (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Propagation {
    /// Route changes timed (each change of each acknowledged delta, per
    /// connection; the changes of a merged delta share its time).
    pub samples: u64,
    /// Median.
    pub median: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

/// Nanosecond histogram of propagation times, 1 ns to 1 h (longer ones
/// count as 1 h), 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Frames a connection sent and not yet saw acknowledged: (frame sequence
/// number, when the change was taken and how many changes the delta
/// carries; `None` for snapshots, not timed). A DeltaBatch frame has one
/// entry per delta, all with its number.
type Inflight = Arc<Mutex<VecDeque<(u64, Option<(Instant, u64)>)>>>;

/// One delta (of one change, or of a merged chunk), queued to every
/// connection.
struct QueuedDelta {
    /// FIB version after it.
    version: u64,
    /// Route changes it carries.
    changes: u64,
    generation: u64,
    payload: Vec<u8>,
    /// When `apply_changes` took the change(s).
    queued: Instant,
}

/// The deltas of one `apply_changes` call, in order.
struct Call {
    deltas: Vec<QueuedDelta>,
    /// Sum of their payload lengths (what a connection's queue counts).
    bytes: usize,
}

enum Out {
    Deltas(Arc<Call>),
    Resync,
    Close,
}

/// A served connection, as `apply_changes` sees it.
struct Sub {
    tx: Sender<Out>,
    /// Payload bytes queued and not yet written.
    queued: Arc<AtomicUsize>,
    /// To close it when its queue overflows.
    stream: TcpStream,
    who: String,
}

pub(crate) struct State<K> {
    pub(crate) fib: ConciseFib<K>,
    pub(crate) version: u64,
    subs: HashMap<u64, Sub>,
}

pub(crate) struct Shared<K> {
    key: AuthKey,
    pub(crate) cfg: ControllerConfig,
    pub(crate) state: Mutex<State<K>>,
    stop: AtomicBool,
    conns: Mutex<Vec<(TcpStream, JoinHandle<()>)>>,
    next_conn: AtomicU64,
    /// Connections open (handshaking or served) and in their handshake.
    open: AtomicUsize,
    handshaking: AtomicUsize,
    pub(crate) counters: Counters,
    propagation: Mutex<Histogram<u64>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K> Shared<K> {
    pub(crate) fn info(&self, msg: std::fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::info!(target: "nexthop_control::controller", "{msg}");
        }
    }

    pub(crate) fn warn(&self, msg: std::fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::warn!(target: "nexthop_control::controller", "{msg}");
        }
    }
}

impl<K: NameKey> Shared<K> {
    /// See [`Controller::apply_numbered`].
    pub(crate) fn apply_numbered<C: LinedChange<K>>(
        &self,
        changes: &[C],
    ) -> Result<ApplyReport, ControlError> {
        let per = self.cfg.changes_per_delta.max(1);
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        // A single chunk is validated by `apply_changes_merged` itself.
        if per == 1 || changes.len() > per {
            st.fib.validate_changes(changes)?;
        }
        let mut r = ApplyReport::default();
        let mut out = Vec::with_capacity(changes.len().div_ceil(per));
        let mut failed = None;
        for chunk in changes.chunks(per) {
            let queued = Instant::now();
            let before = st.fib.action_table().len();
            let (change, applied) = if per == 1 {
                let (line, ch) = (chunk[0].line(), chunk[0].change());
                let res = match ch {
                    RouteChange::Add(k, a) => st.fib.insert(k.clone(), a),
                    RouteChange::Delete(k) => st.fib.remove(k),
                    RouteChange::Set(k, a) => st.fib.change(k, a),
                };
                match res {
                    Ok(c) => (c, 1),
                    Err(e) => {
                        failed = Some(FibError::AtLine {
                            line,
                            error: Box::new(e),
                        });
                        break;
                    }
                }
            } else {
                let m = st.fib.apply_changes_merged(chunk);
                failed = m.error;
                (m.change, m.applied)
            };
            if applied > 0 {
                let delta = st.fib.othello().delta(&change, 0);
                let mut new_actions = String::new();
                for (id, a) in st.fib.action_table().iter().skip(before) {
                    new_actions.push_str(&format!("{id} {a}\n"));
                }
                r.changes += applied;
                r.deltas += 1;
                r.slot_writes += delta.write_count();
                r.rebuilds += change.is_rebuild() as usize;
                r.new_actions += st.fib.action_table().len() - before;
                st.version += applied as u64;
                out.push(QueuedDelta {
                    version: st.version,
                    changes: applied as u64,
                    generation: st.fib.othello().meta().generation,
                    payload: delta_payload(&delta.encode(), &new_actions),
                    queued,
                });
            }
            if failed.is_some() {
                break;
            }
        }
        // What was applied is sent, also when a later change failed.
        if !out.is_empty() {
            let bytes = out.iter().map(|d| d.payload.len()).sum();
            let call = Arc::new(Call { deltas: out, bytes });
            let sh = self;
            let max = sh.cfg.max_queue_bytes;
            st.subs.retain(|_, sub| {
                let q = sub.queued.load(Ordering::SeqCst);
                if q > 0 && q.saturating_add(bytes) > max {
                    sh.counters.slow_dropped.fetch_add(1, Ordering::Relaxed);
                    sh.warn(format_args!(
                        "{}: {q} bytes queued and not read, {bytes} more would pass the limit of \
                         {max}; closing (it resyncs from a snapshot when it reconnects)",
                        sub.who
                    ));
                    let _ = sub.tx.send(Out::Close);
                    let _ = sub.stream.shutdown(Shutdown::Both);
                    return false;
                }
                sub.queued.fetch_add(bytes, Ordering::SeqCst);
                sub.tx.send(Out::Deltas(call.clone())).is_ok()
            });
        }
        r.version = st.version;
        r.followers = st.subs.len();
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(r),
        }
    }

    /// See [`Controller::propagation`].
    pub(crate) fn propagation(&self) -> Propagation {
        let h = lock(&self.propagation);
        if h.is_empty() {
            return Propagation::default();
        }
        let ns = |v: u64| Duration::from_nanos(v);
        Propagation {
            samples: h.len(),
            median: ns(h.value_at_quantile(0.5)),
            p99: ns(h.value_at_quantile(0.99)),
            max: ns(h.max()),
        }
    }

    /// Counters.
    pub(crate) fn stats(&self) -> ControllerStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ControllerStats {
            accepted: l(&c.accepted),
            active: l(&c.active),
            handshaking: self.handshaking.load(Ordering::SeqCst) as u64,
            refused: l(&c.refused),
            handshake_timeouts: l(&c.handshake_timeouts),
            slow_dropped: l(&c.slow_dropped),
            keepalives: l(&c.keepalives),
            snapshots_sent: l(&c.snapshots_sent),
            snapshot_frames: l(&c.snapshot_frames),
            deltas_sent: l(&c.deltas_sent),
            changes_sent: l(&c.changes_sent),
            batches_sent: l(&c.batches_sent),
            resyncs: l(&c.resyncs),
            rejects: l(&c.rejects),
            acks: l(&c.acks),
            acked: l(&c.acked),
            admin_sessions: l(&c.admin_sessions),
            pushes: l(&c.pushes),
            pushes_refused: l(&c.pushes_refused),
        }
    }
}

/// Decrements a counter when dropped (a connection's slot, on every path).
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running controller. Dropping it stops it (see [`Controller::shutdown`]).
pub struct Controller<K: NameKey + Send + 'static> {
    shared: Arc<Shared<K>>,
    addr: SocketAddr,
    accept: Option<JoinHandle<()>>,
}

impl<K: NameKey + Send + 'static> std::fmt::Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("addr", &self.addr)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<K: NameKey + Send + 'static> Controller<K> {
    /// Listen on `cfg.listen` and serve `fib` to every forwarder that
    /// connects with `key`.
    pub fn start(
        fib: ConciseFib<K>,
        key: AuthKey,
        cfg: ControllerConfig,
    ) -> Result<Self, ControlError> {
        let want = cfg.listen;
        let listen_err = move |source| ControlError::Listen { addr: want, source };
        let listener = TcpListener::bind(cfg.listen).map_err(listen_err)?;
        listener.set_nonblocking(true).map_err(listen_err)?;
        let addr = listener.local_addr().map_err(listen_err)?;
        let shared = Arc::new(Shared {
            key,
            cfg,
            state: Mutex::new(State {
                fib,
                version: 0,
                subs: HashMap::new(),
            }),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(1),
            open: AtomicUsize::new(0),
            handshaking: AtomicUsize::new(0),
            counters: Counters::default(),
            propagation: Mutex::new(new_histogram()),
        });
        shared.info(format_args!(
            "listening on {addr} (protocol version {}, at most {} connections, {} in handshake)",
            crate::frame::VERSION,
            shared.cfg.max_connections,
            shared.cfg.max_handshakes.min(shared.cfg.max_connections)
        ));
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("ctl-accept".into())
            .spawn(move || accept_loop(s, listener))
            .map_err(listen_err)?;
        Ok(Controller {
            shared,
            addr,
            accept: Some(accept),
        })
    }

    /// The address the controller listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Apply route changes (numbered 1, 2, ... in errors) and push their
    /// deltas. All or nothing: the batch is validated before any change.
    pub fn apply_changes(&self, changes: &[RouteChange<K>]) -> Result<ApplyReport, ControlError> {
        // Numbered by reference: no change is cloned (a port set's clone
        // allocated, 12% of the lab's controller time at 1e6 names).
        self.apply_numbered(&nexthop_othello::fib::numbered(changes))
    }

    /// [`Self::apply_changes`] with the line numbers of a changes file.
    ///
    /// With [`ControllerConfig::changes_per_delta`] above 1 the changes go
    /// through [`ConciseFib::apply_changes_merged`] in chunks of that many,
    /// each chunk one delta (one writer section on the forwarder: its
    /// readers see the FIB before or after the whole chunk).
    pub fn apply_numbered<C: LinedChange<K>>(
        &self,
        changes: &[C],
    ) -> Result<ApplyReport, ControlError> {
        self.shared.apply_numbered(changes)
    }

    /// Run `f` on the FIB as it is now (for checks and statistics).
    pub fn with_fib<R>(&self, f: impl FnOnce(&ConciseFib<K>) -> R) -> R {
        f(&lock(&self.shared.state).fib)
    }

    /// Changes applied since start.
    pub fn version(&self) -> u64 {
        lock(&self.shared.state).version
    }

    /// Counters.
    pub fn stats(&self) -> ControllerStats {
        self.shared.stats()
    }

    /// Propagation times of the deltas acknowledged since start (or the
    /// last [`Self::reset_propagation`]).
    pub fn propagation(&self) -> Propagation {
        self.shared.propagation()
    }

    /// Forget the propagation times recorded so far.
    pub fn reset_propagation(&self) {
        lock(&self.shared.propagation).reset();
    }

    /// Stop accepting, close every connection and join all threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        for sub in lock(&self.shared.state).subs.values() {
            let _ = sub.tx.send(Out::Close);
        }
        let conns = std::mem::take(&mut *lock(&self.shared.conns));
        for (s, _) in &conns {
            let _ = s.shutdown(Shutdown::Both);
        }
        for (_, h) in conns {
            let _ = h.join();
        }
        self.shared.info(format_args!("stopped"));
    }
}

impl<K: NameKey + Send + 'static> Drop for Controller<K> {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.stop();
        }
    }
}

fn accept_loop<K: NameKey + Send + 'static>(sh: Arc<Shared<K>>, listener: TcpListener) {
    let max_open = sh.cfg.max_connections.max(1);
    let max_hs = sh.cfg.max_handshakes.clamp(1, max_open);
    // Refusals are logged at most once a second, with the running count.
    let mut last_refusal_log: Option<Instant> = None;
    while !sh.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((s, peer)) => {
                sh.counters.accepted.fetch_add(1, Ordering::Relaxed);
                let open = sh.open.load(Ordering::SeqCst);
                let hs = sh.handshaking.load(Ordering::SeqCst);
                if open >= max_open || hs >= max_hs {
                    let n = sh.counters.refused.fetch_add(1, Ordering::Relaxed) + 1;
                    drop(s);
                    if last_refusal_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                        last_refusal_log = Some(Instant::now());
                        sh.warn(format_args!(
                            "{peer}: refused: {open} connections open (max {max_open}), {hs} in \
                             their handshake (max {max_hs}); {n} refused since start"
                        ));
                    }
                    continue;
                }
                sh.open.fetch_add(1, Ordering::SeqCst);
                sh.handshaking.fetch_add(1, Ordering::SeqCst);
                let clone = s.try_clone();
                let id = sh.next_conn.fetch_add(1, Ordering::Relaxed);
                let s2 = sh.clone();
                let spawned = clone.and_then(|c| {
                    std::thread::Builder::new()
                        .name(format!("ctl-conn-{id}"))
                        .spawn(move || serve(s2, s, peer, id))
                        .map(|h| (c, h))
                });
                match spawned {
                    Ok(pair) => {
                        let mut conns = lock(&sh.conns);
                        conns.retain(|(_, h)| !h.is_finished());
                        conns.push(pair);
                    }
                    Err(e) => {
                        sh.open.fetch_sub(1, Ordering::SeqCst);
                        sh.handshaking.fetch_sub(1, Ordering::SeqCst);
                        sh.warn(format_args!("{peer}: cannot serve: {e}"));
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                sh.warn(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A connection's sending side: numbers and authenticates frames.
struct Tx {
    stream: TcpStream,
    keys: SessionKeys,
    seq: u64,
}

impl Tx {
    fn send(&mut self, ty: MsgType, gen: u64, payload: &[u8]) -> io::Result<()> {
        self.seq += 1;
        let bytes = encode_parts(
            &self.keys.send,
            ty,
            self.keys.session,
            self.seq,
            gen,
            payload,
        );
        write_all(&mut self.stream, &bytes)
    }
}

/// A snapshot body with the generation and FIB version it holds.
struct SnapshotOut {
    body: Vec<u8>,
    generation: u64,
    version: u64,
}

/// The current snapshot, or an error of kind `OutOfMemory` where its
/// buffers cannot be allocated: that follower is refused (told so in an
/// Error frame) and the controller goes on serving the others.
fn take_snapshot<K: NameKey>(st: &State<K>) -> io::Result<SnapshotOut> {
    let o = st.fib.othello();
    let oom = |e: nexthop_othello::AllocError| io::Error::new(io::ErrorKind::OutOfMemory, e);
    let snapshot = o.try_snapshot(0).map_err(oom)?;
    Ok(SnapshotOut {
        body: try_snapshot_body(&snapshot, &st.fib.action_table().to_text()).map_err(oom)?,
        generation: o.meta().generation,
        version: st.version,
    })
}

/// Send a snapshot in as many Snapshot frames as the frame limit needs;
/// returns the FIB version it holds.
fn send_snapshot<K>(
    sh: &Shared<K>,
    tx: &mut Tx,
    inflight: &Inflight,
    snap: &SnapshotOut,
) -> io::Result<u64> {
    let part = sh.cfg.frame_cap() - SNAPSHOT_PART_HEADER;
    let total = snap.body.len() as u64;
    let frames = snap.body.len().div_ceil(part).max(1) as u64;
    // The Ack of the last part confirms the snapshot; noted before the
    // write so the Ack cannot overtake it.
    lock(inflight).push_back((tx.seq + frames, None));
    for (i, chunk) in snap.body.chunks(part).enumerate() {
        let offset = (i * part) as u64;
        let mut head = [0u8; SNAPSHOT_PART_HEADER];
        head[..8].copy_from_slice(&total.to_le_bytes());
        head[8..].copy_from_slice(&offset.to_le_bytes());
        tx.seq += 1;
        write_frame_parts(
            &mut tx.stream,
            &tx.keys.send,
            (MsgType::Snapshot, tx.keys.session, tx.seq, snap.generation),
            &[&head, chunk],
        )?;
        sh.counters.snapshot_frames.fetch_add(1, Ordering::Relaxed);
    }
    sh.counters.snapshots_sent.fetch_add(1, Ordering::Relaxed);
    Ok(snap.version)
}

fn serve<K: NameKey + Send + 'static>(sh: Arc<Shared<K>>, s: TcpStream, peer: SocketAddr, id: u64) {
    let _open = Slot(&sh.open);
    let handshaking = Slot(&sh.handshaking);
    let _ = s.set_nodelay(true);
    let deadline = Instant::now() + sh.cfg.handshake_timeout;
    let _ = s.set_write_timeout(Some(sh.cfg.handshake_timeout.max(Duration::from_millis(1))));
    let accepted = {
        let mut rd = DeadlineReader::new(&s, deadline);
        let mut w = &s;
        handshake::accept(&mut rd, &mut w, &sh.key, &fresh_nonce())
    };
    drop(handshaking);
    let handshake::Accepted { keys, hello } = match accepted {
        Ok(a) => a,
        Err(e) => {
            match &e {
                HandshakeError::Io(io) if io.kind() == io::ErrorKind::TimedOut => {
                    sh.counters
                        .handshake_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                    sh.warn(format_args!(
                        "{peer}: handshake not done within {:?}; closing",
                        sh.cfg.handshake_timeout
                    ));
                }
                HandshakeError::Io(io) => {
                    sh.info(format_args!("{peer}: closed during the handshake: {io}"));
                }
                e => {
                    sh.counters.rejects.fetch_add(1, Ordering::Relaxed);
                    sh.warn(format_args!("{peer}: rejected in the handshake: {e}"));
                }
            }
            let _ = s.shutdown(Shutdown::Both);
            return;
        }
    };
    let _ = s.set_write_timeout(Some(sh.cfg.write_timeout.max(Duration::from_millis(1))));
    if hello.features & ROLE_ADMIN != 0 {
        // Its slot in `max_connections` stays taken until it closes.
        sh.counters.admin_sessions.fetch_add(1, Ordering::Relaxed);
        return crate::admin::serve(&sh, s, keys, &hello, peer);
    }
    let _ = s.set_read_timeout(None);
    let rd = match s.try_clone() {
        Ok(r) => r,
        Err(e) => return sh.warn(format_args!("{peer}: {e}")),
    };
    let closer = match s.try_clone() {
        Ok(c) => c,
        Err(e) => return sh.warn(format_args!("{peer}: {e}")),
    };
    let session = keys.session;
    let recv_key = keys.recv.clone();
    let mut tx = Tx {
        stream: s,
        keys,
        seq: 0,
    };
    let who = format!("{peer} ({})", hello.forwarder_id);
    if hello.column != 0 {
        sh.warn(format_args!("{who}: unknown column {}", hello.column));
        let m = Message::Error {
            code: ErrorCode::UnknownColumn,
            text: format!("column {} is not served (only column 0)", hello.column),
        };
        let _ = tx.send(MsgType::Error, 0, &m.encode());
        let _ = tx.stream.shutdown(Shutdown::Both);
        return;
    }
    let batch_limit = if hello.features & FEATURE_DELTA_BATCH != 0 {
        (sh.cfg.batch_limit as usize).min(sh.cfg.frame_cap())
    } else {
        0
    };
    sh.info(format_args!(
        "{who}: hello, last applied sequence {} generation {}, features {:#x} ({})",
        hello.last_seq,
        hello.last_generation,
        hello.features,
        if batch_limit > 0 {
            "delta batches"
        } else {
            "one frame per delta"
        }
    ));
    // Subscribe and snapshot under one lock: no delta missed or doubled.
    let (otx, orx) = channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let first = {
        let mut st = lock(&sh.state);
        st.subs.insert(
            id,
            Sub {
                tx: otx.clone(),
                queued: queued.clone(),
                stream: closer,
                who: who.clone(),
            },
        );
        take_snapshot(&st)
    };
    sh.counters.active.fetch_add(1, Ordering::Relaxed);
    let inflight: Inflight = Arc::default();
    let reader = {
        let sh = sh.clone();
        let who = who.clone();
        let inflight = inflight.clone();
        std::thread::Builder::new()
            .name(format!("ctl-read-{id}"))
            .spawn(move || read_loop(sh, rd, session, recv_key, otx, who, inflight))
    };
    let result = (|| -> io::Result<()> {
        let first = match first {
            Ok(f) => f,
            Err(e) => {
                let m = Message::Error {
                    code: ErrorCode::Unavailable,
                    text: format!("controller cannot send its snapshot: {e}"),
                };
                let _ = tx.send(MsgType::Error, 0, &m.encode());
                return Err(e);
            }
        };
        let have = send_snapshot(&sh, &mut tx, &inflight, &first)?;
        sh.info(format_args!(
            "{who}: sent snapshot ({} bytes, version {have})",
            first.body.len(),
        ));
        drop(first);
        let w = Writer {
            sh: &sh,
            rx: &orx,
            inflight: &inflight,
            queued: &queued,
            batch_limit,
        };
        w.run(&mut tx, have)
    })();
    if let Err(e) = result {
        sh.info(format_args!("{who}: connection closed: {e}"));
    }
    lock(&sh.state).subs.remove(&id);
    sh.counters.active.fetch_sub(1, Ordering::Relaxed);
    let _ = tx.stream.shutdown(Shutdown::Both);
    if let Ok(h) = reader {
        let _ = h.join();
    }
}

/// Confirm every frame up to sequence `seq` (an Ack covers all before it)
/// and time the deltas among them.
fn record_acked<K>(sh: &Shared<K>, inflight: &Inflight, seq: u64) {
    let now = Instant::now();
    let mut q = lock(inflight);
    let mut h = lock(&sh.propagation);
    let mut acked = 0;
    while let Some(&(s, queued)) = q.front() {
        if s > seq {
            break;
        }
        q.pop_front();
        acked += 1;
        if let Some((queued, changes)) = queued {
            let ns = u64::try_from((now - queued).as_nanos()).unwrap_or(u64::MAX);
            h.saturating_record_n(ns.max(1), changes);
        }
    }
    sh.counters.acked.fetch_add(acked, Ordering::Relaxed);
}

/// The end `j` of the DeltaBatch that starts at `ds[i]`: as many deltas as
/// fit in a payload of `limit` bytes, and at least one.
fn batch_end(ds: &[QueuedDelta], i: usize, limit: usize) -> usize {
    let mut len = 4 + batch_entry_len(ds[i].payload.len());
    let mut j = i + 1;
    while j < ds.len() {
        let add = batch_entry_len(ds[j].payload.len());
        if len + add > limit {
            break;
        }
        len += add;
        j += 1;
    }
    j
}

/// A connection's writer: its queue, in order.
struct Writer<'a, K> {
    sh: &'a Shared<K>,
    rx: &'a Receiver<Out>,
    inflight: &'a Inflight,
    /// Payload bytes queued to this connection and not yet handled.
    queued: &'a AtomicUsize,
    /// Largest DeltaBatch payload, 0 for one Delta frame per change.
    batch_limit: usize,
}

impl<K: NameKey> Writer<'_, K> {
    /// `have`: the FIB version the forwarder holds once what was sent is applied.
    fn run(&self, tx: &mut Tx, mut have: u64) -> io::Result<()> {
        let sh = self.sh;
        let idle = sh.cfg.keepalive.max(Duration::from_millis(1));
        let mut buf = Vec::new();
        loop {
            let out = match self.rx.recv_timeout(idle) {
                Ok(out) => out,
                Err(RecvTimeoutError::Timeout) => {
                    tx.send(MsgType::Keepalive, 0, &[])?;
                    sh.counters.keepalives.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            };
            match out {
                Out::Deltas(call) => {
                    self.queued.fetch_sub(call.bytes, Ordering::SeqCst);
                    have = self.send_call(tx, &call, have, &mut buf)?;
                }
                Out::Resync => {
                    let snap = take_snapshot(&lock(&sh.state))?;
                    have = send_snapshot(sh, tx, self.inflight, &snap)?;
                }
                Out::Close => {
                    let m = Message::Error {
                        code: ErrorCode::Shutdown,
                        text: "controller closes the connection".into(),
                    };
                    let _ = tx.send(MsgType::Error, 0, &m.encode());
                    return Ok(());
                }
            }
        }
    }

    /// Send the deltas of `call` the forwarder lacks (all frames in one
    /// write); returns the version it then holds.
    fn send_call(&self, tx: &mut Tx, call: &Call, have: u64, buf: &mut Vec<u8>) -> io::Result<u64> {
        let sh = self.sh;
        let ds = &call.deltas;
        // Versions rise within a call: skip those the last snapshot holds.
        let fresh = &ds[ds.partition_point(|d| d.version <= have)..];
        if fresh.is_empty() {
            return Ok(have);
        }
        // A delta too large for a frame (a rebuild of a huge structure):
        // a snapshot instead, taken now, so it holds this whole call.
        let limit = sh.cfg.frame_cap();
        if fresh.iter().any(|d| d.payload.len() > limit) {
            let snap = take_snapshot(&lock(&sh.state))?;
            return send_snapshot(sh, tx, self.inflight, &snap);
        }
        // Each frame noted before the write so its Ack cannot overtake it.
        buf.clear();
        let mut batches = 0;
        {
            let mut q = lock(self.inflight);
            let mut i = 0;
            while i < fresh.len() {
                let j = if self.batch_limit > 0 {
                    batch_end(fresh, i, self.batch_limit)
                } else {
                    i + 1
                };
                let part = &fresh[i..j];
                tx.seq += 1;
                q.extend(part.iter().map(|d| (tx.seq, Some((d.queued, d.changes)))));
                let last = &part[part.len() - 1];
                let (key, session) = (&tx.keys.send, tx.keys.session);
                if let [d] = part {
                    encode_with(
                        buf,
                        key,
                        MsgType::Delta,
                        session,
                        tx.seq,
                        d.generation,
                        |o| o.extend_from_slice(&d.payload),
                    );
                } else {
                    encode_with(
                        buf,
                        key,
                        MsgType::DeltaBatch,
                        session,
                        tx.seq,
                        last.generation,
                        |o| write_delta_batch(o, part.iter().map(|d| d.payload.as_slice())),
                    );
                    batches += 1;
                }
                i = j;
            }
        }
        write_all(&mut tx.stream, buf)?;
        let c = &sh.counters;
        c.deltas_sent
            .fetch_add(fresh.len() as u64, Ordering::Relaxed);
        c.changes_sent.fetch_add(
            fresh.iter().map(|d| d.changes).sum::<u64>(),
            Ordering::Relaxed,
        );
        c.batches_sent.fetch_add(batches, Ordering::Relaxed);
        Ok(fresh[fresh.len() - 1].version)
    }
}

fn read_loop<K>(
    sh: Arc<Shared<K>>,
    mut rd: TcpStream,
    session: u64,
    key: AuthKey,
    tx: Sender<Out>,
    who: String,
    inflight: Inflight,
) {
    let max = sh.cfg.max_payload.min(MAX_PAYLOAD);
    let mut expect = 2u64;
    let why = loop {
        let f = match crate::frame::read_frame(&mut rd, &key, max) {
            Ok(f) => f,
            Err(ReadError::Io(_)) => break None,
            Err(ReadError::Frame(e)) => break Some(e.to_string()),
        };
        if f.session != session {
            break Some(format!("frame of session {:#x}", f.session));
        }
        if f.seq != expect {
            break Some(format!("sequence {} where {expect} was next", f.seq));
        }
        expect += 1;
        match Message::decode(f.ty, &f.payload) {
            Ok(Message::Ack { seq }) => {
                // Timed first, so a caller that sees the Ack counted also
                // sees its propagation time.
                record_acked(&sh, &inflight, seq);
                sh.counters.acks.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Message::Hello(h)) => {
                sh.counters.resyncs.fetch_add(1, Ordering::Relaxed);
                sh.info(format_args!(
                    "{who}: resync requested (last applied sequence {} generation {})",
                    h.last_seq, h.last_generation
                ));
                if tx.send(Out::Resync).is_err() {
                    break None;
                }
            }
            Ok(Message::Error { code, text }) => {
                sh.info(format_args!("{who}: forwarder error {code:?}: {text}"));
                break None;
            }
            Ok(m) => break Some(format!("unexpected {:?} from a forwarder", m.ty())),
            Err(e) => break Some(e.to_string()),
        }
    };
    if let Some(why) = why {
        sh.counters.rejects.fetch_add(1, Ordering::Relaxed);
        sh.warn(format_args!("{who}: rejected: {why}; closing"));
    }
    let _ = tx.send(Out::Close);
}
