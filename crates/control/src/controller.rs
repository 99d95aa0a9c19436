//! The controller: owns a [`ConciseFib`], serves it to forwarders over TCP
//! and pushes the delta of every route change to all of them, in order.
//!
//! Threads: one accept thread; per connection a writer thread (sends the
//! snapshot, then every queued delta) and a reader thread (Acks, resync
//! Hellos). [`Controller::apply_changes`] runs on the caller's thread: it
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

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use nexthop_othello::fib::{ConciseFib, FibError, LinedChange, NameKey, RouteChange};
use thiserror::Error;

use crate::frame::{
    encode_parts, encode_with, read_frame, write_all, AuthKey, MsgType, ReadError, MAX_PAYLOAD,
};
use crate::message::{
    batch_entry_len, delta_payload, snapshot_payload, write_delta_batch, ErrorCode, Message,
    FEATURE_DELTA_BATCH,
};

/// Controller settings.
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Address to listen on (default `127.0.0.1:0`, an ephemeral port).
    pub listen: SocketAddr,
    /// How long a new connection may take to send its Hello.
    pub hello_timeout: Duration,
    /// Largest payload accepted from a forwarder.
    pub max_payload: u32,
    /// Log connections, resyncs and rejects on stderr.
    pub log: bool,
    /// Largest DeltaBatch payload built for forwarders that accept
    /// batches (default 1 MiB; capped at [`MAX_PAYLOAD`]); 0 sends every
    /// forwarder one Delta frame per change.
    pub batch_limit: u32,
    /// Route changes merged into one delta (default 256): an
    /// `apply_changes` call is applied in chunks of this many through
    /// Othello's batch path, and each chunk is shipped as one delta of all
    /// its slot writes. 1 gives one delta per change.
    pub changes_per_delta: usize,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            hello_timeout: Duration::from_secs(10),
            max_payload: 1 << 16,
            log: true,
            batch_limit: 1 << 20,
            changes_per_delta: 256,
        }
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
    /// Connections accepted.
    pub accepted: u64,
    /// Connections now open (past their Hello).
    pub active: u64,
    /// Snapshot messages sent (initial and resync).
    pub snapshots_sent: u64,
    /// Deltas sent (in Delta frames or inside DeltaBatch frames).
    pub deltas_sent: u64,
    /// Route changes in the deltas sent (a merged delta carries several).
    pub changes_sent: u64,
    /// DeltaBatch frames sent (each carries two or more deltas).
    pub batches_sent: u64,
    /// Resync Hellos received on open connections.
    pub resyncs: u64,
    /// Connections closed because of an invalid frame or message.
    pub rejects: u64,
    /// Acks received.
    pub acks: u64,
    /// Snapshots and deltas the forwarders confirmed applied (each delta
    /// of a batch counts): an Ack confirms every frame up to its sequence
    /// number, so a forwarder may send fewer Acks than frames.
    pub acked: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    active: AtomicU64,
    snapshots_sent: AtomicU64,
    deltas_sent: AtomicU64,
    changes_sent: AtomicU64,
    batches_sent: AtomicU64,
    resyncs: AtomicU64,
    rejects: AtomicU64,
    acks: AtomicU64,
    acked: AtomicU64,
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

enum Out {
    /// The deltas of one `apply_changes` call, in order.
    Deltas(Arc<Vec<QueuedDelta>>),
    Resync,
    Close,
}

struct State<K> {
    fib: ConciseFib<K>,
    version: u64,
    subs: HashMap<u64, Sender<Out>>,
}

struct Shared<K> {
    key: AuthKey,
    cfg: ControllerConfig,
    state: Mutex<State<K>>,
    stop: AtomicBool,
    conns: Mutex<Vec<(TcpStream, JoinHandle<()>)>>,
    next_conn: AtomicU64,
    counters: Counters,
    propagation: Mutex<Histogram<u64>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K> Shared<K> {
    fn log(&self, msg: std::fmt::Arguments<'_>) {
        if self.cfg.log {
            eprintln!("controller: {msg}");
        }
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
            counters: Counters::default(),
            propagation: Mutex::new(new_histogram()),
        });
        shared.log(format_args!("listening on {addr}"));
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
        let numbered: Vec<(usize, &RouteChange<K>)> = changes
            .iter()
            .enumerate()
            .map(|(i, c)| (i + 1, c))
            .collect();
        self.apply_numbered(&numbered)
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
        let per = self.shared.cfg.changes_per_delta.max(1);
        let mut guard = lock(&self.shared.state);
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
            let out = Arc::new(out);
            st.subs
                .retain(|_, tx| tx.send(Out::Deltas(out.clone())).is_ok());
        }
        r.version = st.version;
        r.followers = st.subs.len();
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(r),
        }
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
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ControllerStats {
            accepted: l(&c.accepted),
            active: l(&c.active),
            snapshots_sent: l(&c.snapshots_sent),
            deltas_sent: l(&c.deltas_sent),
            changes_sent: l(&c.changes_sent),
            batches_sent: l(&c.batches_sent),
            resyncs: l(&c.resyncs),
            rejects: l(&c.rejects),
            acks: l(&c.acks),
            acked: l(&c.acked),
        }
    }

    /// Propagation times of the deltas acknowledged since start (or the
    /// last [`Self::reset_propagation`]).
    pub fn propagation(&self) -> Propagation {
        let h = lock(&self.shared.propagation);
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
        for tx in lock(&self.shared.state).subs.values() {
            let _ = tx.send(Out::Close);
        }
        let conns = std::mem::take(&mut *lock(&self.shared.conns));
        for (s, _) in &conns {
            let _ = s.shutdown(Shutdown::Both);
        }
        for (_, h) in conns {
            let _ = h.join();
        }
        self.shared.log(format_args!("stopped"));
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
    while !sh.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((s, peer)) => {
                sh.counters.accepted.fetch_add(1, Ordering::Relaxed);
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
                    Err(e) => sh.log(format_args!("{peer}: cannot serve: {e}")),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                sh.log(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A connection's sending side: numbers and authenticates frames.
struct Tx {
    stream: TcpStream,
    session: u64,
    seq: u64,
}

impl Tx {
    fn send(&mut self, key: &AuthKey, ty: MsgType, gen: u64, payload: &[u8]) -> io::Result<()> {
        self.seq += 1;
        let bytes = encode_parts(key, ty, self.session, self.seq, gen, payload);
        write_all(&mut self.stream, &bytes)
    }
}

fn send_snapshot<K: NameKey>(sh: &Shared<K>, tx: &mut Tx, inflight: &Inflight) -> io::Result<u64> {
    let (payload, gen, version) = {
        let st = lock(&sh.state);
        let o = st.fib.othello();
        (
            snapshot_payload(&o.snapshot(0), &st.fib.action_table().to_text()),
            o.meta().generation,
            st.version,
        )
    };
    lock(inflight).push_back((tx.seq + 1, None));
    tx.send(&sh.key, MsgType::Snapshot, gen, &payload)?;
    sh.counters.snapshots_sent.fetch_add(1, Ordering::Relaxed);
    Ok(version)
}

fn serve<K: NameKey + Send + 'static>(sh: Arc<Shared<K>>, s: TcpStream, peer: SocketAddr, id: u64) {
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(sh.cfg.hello_timeout));
    let mut rd = match s.try_clone() {
        Ok(r) => r,
        Err(e) => return sh.log(format_args!("{peer}: {e}")),
    };
    let max = sh.cfg.max_payload.min(MAX_PAYLOAD);
    let hello = read_frame(&mut rd, &sh.key, max)
        .map_err(|e| e.to_string())
        .and_then(|f| {
            if f.ty != MsgType::Hello || f.seq != 1 {
                return Err(format!(
                    "first frame must be Hello with sequence 1, got {:?} {}",
                    f.ty, f.seq
                ));
            }
            match Message::decode(f.ty, &f.payload) {
                Ok(Message::Hello(h)) => Ok((f.session, h)),
                Ok(_) => Err("not a Hello".to_string()),
                Err(e) => Err(e.to_string()),
            }
        });
    let (session, hello) = match hello {
        Ok(x) => x,
        Err(e) => {
            sh.counters.rejects.fetch_add(1, Ordering::Relaxed);
            sh.log(format_args!("{peer}: rejected before Hello: {e}"));
            let _ = s.shutdown(Shutdown::Both);
            return;
        }
    };
    let _ = s.set_read_timeout(None);
    let mut tx = Tx {
        stream: s,
        session,
        seq: 0,
    };
    let who = format!("{peer} ({})", hello.forwarder_id);
    if hello.column != 0 {
        sh.log(format_args!("{who}: unknown column {}", hello.column));
        let m = Message::Error {
            code: ErrorCode::UnknownColumn,
            text: format!("column {} is not served (only column 0)", hello.column),
        };
        let _ = tx.send(&sh.key, MsgType::Error, 0, &m.encode());
        let _ = tx.stream.shutdown(Shutdown::Both);
        return;
    }
    let batch_limit = if hello.features & FEATURE_DELTA_BATCH != 0 {
        sh.cfg.batch_limit.min(MAX_PAYLOAD) as usize
    } else {
        0
    };
    sh.log(format_args!(
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
    let first = {
        let mut st = lock(&sh.state);
        st.subs.insert(id, otx.clone());
        let o = st.fib.othello();
        (
            snapshot_payload(&o.snapshot(0), &st.fib.action_table().to_text()),
            o.meta().generation,
            st.version,
        )
    };
    sh.counters.active.fetch_add(1, Ordering::Relaxed);
    let inflight: Inflight = Arc::default();
    let reader = {
        let sh = sh.clone();
        let who = who.clone();
        let inflight = inflight.clone();
        std::thread::Builder::new()
            .name(format!("ctl-read-{id}"))
            .spawn(move || read_loop(sh, rd, session, otx, who, inflight))
    };
    let result = (|| -> io::Result<()> {
        lock(&inflight).push_back((tx.seq + 1, None));
        tx.send(&sh.key, MsgType::Snapshot, first.1, &first.0)?;
        sh.counters.snapshots_sent.fetch_add(1, Ordering::Relaxed);
        sh.log(format_args!(
            "{who}: sent snapshot ({} bytes, version {})",
            first.0.len(),
            first.2
        ));
        write_loop(&sh, &mut tx, &orx, first.2, &inflight, batch_limit)
    })();
    if let Err(e) = result {
        sh.log(format_args!("{who}: connection closed: {e}"));
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

/// `batch_limit`: largest DeltaBatch payload, 0 for one Delta frame per change.
fn write_loop<K: NameKey>(
    sh: &Shared<K>,
    tx: &mut Tx,
    rx: &Receiver<Out>,
    mut have: u64,
    inflight: &Inflight,
    batch_limit: usize,
) -> io::Result<()> {
    let mut buf = Vec::new();
    while let Ok(out) = rx.recv() {
        match out {
            Out::Deltas(ds) => {
                // Versions rise within a call: skip those the last
                // snapshot holds.
                let fresh = &ds[ds.partition_point(|d| d.version <= have)..];
                if fresh.is_empty() {
                    continue;
                }
                // All frames of the call in one write; each noted before
                // the write so its Ack cannot overtake it.
                buf.clear();
                let mut batches = 0;
                {
                    let mut q = lock(inflight);
                    let mut i = 0;
                    while i < fresh.len() {
                        let j = if batch_limit > 0 {
                            batch_end(fresh, i, batch_limit)
                        } else {
                            i + 1
                        };
                        let part = &fresh[i..j];
                        tx.seq += 1;
                        q.extend(part.iter().map(|d| (tx.seq, Some((d.queued, d.changes)))));
                        let last = &part[part.len() - 1];
                        if let [d] = part {
                            encode_with(
                                &mut buf,
                                &sh.key,
                                MsgType::Delta,
                                tx.session,
                                tx.seq,
                                d.generation,
                                |o| o.extend_from_slice(&d.payload),
                            );
                        } else {
                            encode_with(
                                &mut buf,
                                &sh.key,
                                MsgType::DeltaBatch,
                                tx.session,
                                tx.seq,
                                last.generation,
                                |o| write_delta_batch(o, part.iter().map(|d| d.payload.as_slice())),
                            );
                            batches += 1;
                        }
                        i = j;
                    }
                    have = fresh[fresh.len() - 1].version;
                }
                write_all(&mut tx.stream, &buf)?;
                let c = &sh.counters;
                c.deltas_sent
                    .fetch_add(fresh.len() as u64, Ordering::Relaxed);
                c.changes_sent.fetch_add(
                    fresh.iter().map(|d| d.changes).sum::<u64>(),
                    Ordering::Relaxed,
                );
                c.batches_sent.fetch_add(batches, Ordering::Relaxed);
            }
            Out::Resync => {
                have = send_snapshot(sh, tx, inflight)?;
            }
            Out::Close => {
                let m = Message::Error {
                    code: ErrorCode::Shutdown,
                    text: "controller closes the connection".into(),
                };
                let _ = tx.send(&sh.key, MsgType::Error, 0, &m.encode());
                return Ok(());
            }
        }
    }
    Ok(())
}

fn read_loop<K>(
    sh: Arc<Shared<K>>,
    mut rd: TcpStream,
    session: u64,
    tx: Sender<Out>,
    who: String,
    inflight: Inflight,
) {
    let max = sh.cfg.max_payload.min(MAX_PAYLOAD);
    let mut expect = 2u64;
    let why = loop {
        let f = match read_frame(&mut rd, &sh.key, max) {
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
                sh.log(format_args!(
                    "{who}: resync requested (last applied sequence {} generation {})",
                    h.last_seq, h.last_generation
                ));
                if tx.send(Out::Resync).is_err() {
                    break None;
                }
            }
            Ok(Message::Error { code, text }) => {
                sh.log(format_args!("{who}: forwarder error {code:?}: {text}"));
                break None;
            }
            Ok(m) => break Some(format!("unexpected {:?} from a forwarder", m.ty())),
            Err(e) => break Some(e.to_string()),
        }
    };
    if let Some(why) = why {
        sh.counters.rejects.fetch_add(1, Ordering::Relaxed);
        sh.log(format_args!("{who}: rejected: {why}; closing"));
    }
    let _ = tx.send(Out::Close);
}
