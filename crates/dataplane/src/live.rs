//! Live ports and what a live run reports: AF_PACKET (`TPACKET_V3`
//! receive rings, `sendmmsg` transmit), with the `afxdp` feature AF_XDP
//! sockets, and in-memory ports ([`MemoryRx`], [`MemoryTx`] over a
//! [`MemoryQueue`]) for tests and embedders; a run may mix them port by
//! port ([`RxPort`], [`TxSocket`], [`LivePorts`]).
//!
//! The loop that drives a pipeline between them, and the multi-worker
//! engine around it, are in [`crate::engine`]. This module holds what
//! they share with their callers: when a run stops ([`StopAfter`],
//! [`StopFlag`], [`StopReason`]), what it counted at the ports
//! ([`PortStats`]), the progress reports ([`Progress`]) and the outcome
//! ([`LiveRun`]).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::afpacket::{Block, RxRing, SendOutcome, TxPort};
#[cfg(feature = "afxdp")]
use crate::afxdp::{XskBatch, XskRx, XskTx};
use crate::counters::Counters;

/// Switch port -> interface from the `--port N=IFACE` maps of a live run,
/// refusing a port or an interface mapped twice (the error names the map
/// and, for an interface, the port it already is).
pub fn port_map<'a>(
    maps: impl IntoIterator<Item = (u16, &'a str)>,
) -> Result<BTreeMap<u16, &'a str>, String> {
    let mut by_port: BTreeMap<u16, &str> = BTreeMap::new();
    let mut by_iface: BTreeMap<&str, u16> = BTreeMap::new();
    for (port, iface) in maps {
        if by_port.insert(port, iface).is_some() {
            return Err(format!("--port {port}: port {port} is mapped twice"));
        }
        if let Some(p) = by_iface.insert(iface, port) {
            return Err(format!(
                "--port {port}={iface}: interface {iface} is already port {p}"
            ));
        }
    }
    Ok(by_port)
}

/// The most frames a [`MemoryRx`] hands over at once (one "block").
pub const MEMORY_BATCH: usize = 512;

/// A receiving port of a live run.
#[derive(Debug)]
#[non_exhaustive]
pub enum RxPort {
    /// An AF_PACKET `TPACKET_V3` ring.
    Packet(RxRing),
    /// The receive half of an AF_XDP socket.
    #[cfg(feature = "afxdp")]
    Xdp(XskRx),
    /// Frames queued in memory ([`MemoryRx`]).
    Memory(MemoryRx),
}

impl From<MemoryRx> for RxPort {
    fn from(r: MemoryRx) -> RxPort {
        RxPort::Memory(r)
    }
}

impl From<RxRing> for RxPort {
    fn from(r: RxRing) -> RxPort {
        RxPort::Packet(r)
    }
}

#[cfg(feature = "afxdp")]
impl From<XskRx> for RxPort {
    fn from(r: XskRx) -> RxPort {
        RxPort::Xdp(r)
    }
}

impl RxPort {
    /// The descriptor to `poll()` for `POLLIN`; `None` for an in-memory
    /// input, which the loop checks again after a short wait instead.
    pub fn raw_fd(&self) -> Option<RawFd> {
        match self {
            RxPort::Packet(r) => Some(r.raw_fd()),
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => Some(x.raw_fd()),
            RxPort::Memory(_) => None,
        }
    }

    /// `afpacket`, `afxdp-native`, `afxdp-skb` or `memory`.
    pub fn io_name(&self) -> &'static str {
        match self {
            RxPort::Packet(_) => "afpacket",
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.attached().name(),
            RxPort::Memory(_) => "memory",
        }
    }

    /// The next frames ready, if any.
    pub(crate) fn next(&mut self) -> Option<RxBatch<'_>> {
        match self {
            RxPort::Packet(r) => r.next_block().map(RxBatch::Packet),
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.next_batch().map(RxBatch::Xdp),
            RxPort::Memory(m) => m.next_batch().map(RxBatch::Memory),
        }
    }

    /// Frames lost on the way in (ring full, no buffer), so far; a failed
    /// statistics read keeps the last figure.
    pub(crate) fn drops(&mut self) -> u64 {
        match self {
            RxPort::Packet(r) => {
                let prev = r.drops_so_far();
                r.drops().unwrap_or(prev)
            }
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.drops_so_far(),
            RxPort::Memory(_) => 0,
        }
    }

    /// Frames skipped because they were captured in part.
    pub(crate) fn truncated(&self) -> u64 {
        match self {
            RxPort::Packet(r) => r.truncated(),
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(_) => 0,
            RxPort::Memory(_) => 0,
        }
    }
}

/// Frames lent by an input until dropped.
pub(crate) enum RxBatch<'a> {
    Packet(Block<'a>),
    #[cfg(feature = "afxdp")]
    Xdp(XskBatch<'a>),
    Memory(&'a [Vec<u8>]),
}

impl RxBatch<'_> {
    pub(crate) fn len_hint(&self) -> usize {
        match self {
            RxBatch::Packet(b) => b.packets() as usize,
            #[cfg(feature = "afxdp")]
            RxBatch::Xdp(b) => b.len(),
            RxBatch::Memory(frames) => frames.len(),
        }
    }

    pub(crate) fn frames_into<'b>(&'b mut self, out: &mut Vec<&'b [u8]>) {
        match self {
            RxBatch::Packet(b) => b.frames_into(out),
            #[cfg(feature = "afxdp")]
            RxBatch::Xdp(b) => b.frames_into(out),
            RxBatch::Memory(frames) => out.extend(frames.iter().map(Vec::as_slice)),
        }
    }
}

/// A queue of frames shared between threads: what an in-memory input
/// receives ([`MemoryRx`]) or what an in-memory output has sent
/// ([`MemoryTx`]). Clones share the queue.
#[derive(Clone, Debug, Default)]
pub struct MemoryQueue(Arc<Mutex<VecDeque<Vec<u8>>>>);

impl MemoryQueue {
    /// An empty queue.
    pub fn new() -> MemoryQueue {
        MemoryQueue::default()
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Vec<u8>>> {
        // A panic while holding the lock leaves whole frames only.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queue `frame` at the back.
    pub fn push(&self, frame: Vec<u8>) {
        self.lock().push_back(frame);
    }

    /// Frames queued now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no frame is queued.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Take every queued frame, oldest first.
    pub fn drain(&self) -> Vec<Vec<u8>> {
        self.lock().drain(..).collect()
    }
}

/// An in-memory input: each batch takes up to [`MEMORY_BATCH`] frames
/// from the front of its [`MemoryQueue`] (what another thread pushed).
#[derive(Debug)]
pub struct MemoryRx {
    queue: MemoryQueue,
    /// The frames of the batch in hand.
    held: Vec<Vec<u8>>,
}

impl MemoryRx {
    /// An input receiving what is pushed to `queue`.
    pub fn new(queue: MemoryQueue) -> MemoryRx {
        MemoryRx {
            queue,
            held: Vec::new(),
        }
    }

    fn next_batch(&mut self) -> Option<&[Vec<u8>]> {
        self.held.clear();
        {
            let mut q = self.queue.lock();
            let n = q.len().min(MEMORY_BATCH);
            self.held.extend(q.drain(..n));
        }
        (!self.held.is_empty()).then_some(&self.held[..])
    }
}

/// An in-memory output: every frame sent is pushed to its
/// [`MemoryQueue`]; it never refuses one.
#[derive(Debug)]
pub struct MemoryTx {
    queue: MemoryQueue,
}

impl MemoryTx {
    /// An output pushing what it sends to `queue`.
    pub fn new(queue: MemoryQueue) -> MemoryTx {
        MemoryTx { queue }
    }

    fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> SendOutcome {
        let mut q = self.queue.lock();
        q.extend(frames.iter().map(|f| f.as_ref().to_vec()));
        SendOutcome {
            sent: frames.len(),
            failed: 0,
            last_error: None,
        }
    }
}

/// A transmitting port of a live run.
#[derive(Debug)]
#[non_exhaustive]
pub enum TxSocket {
    /// An AF_PACKET socket (`sendmmsg`).
    Packet(TxPort),
    /// The transmit half of an AF_XDP socket.
    #[cfg(feature = "afxdp")]
    Xdp(XskTx),
    /// Frames pushed to a queue in memory ([`MemoryTx`]).
    Memory(MemoryTx),
}

impl From<MemoryTx> for TxSocket {
    fn from(t: MemoryTx) -> TxSocket {
        TxSocket::Memory(t)
    }
}

impl From<TxPort> for TxSocket {
    fn from(t: TxPort) -> TxSocket {
        TxSocket::Packet(t)
    }
}

#[cfg(feature = "afxdp")]
impl From<XskTx> for TxSocket {
    fn from(t: XskTx) -> TxSocket {
        TxSocket::Xdp(t)
    }
}

impl TxSocket {
    /// Send every frame of `frames`; see [`TxPort::send_batch`] and
    /// `XskTx::send_batch`.
    pub fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> SendOutcome {
        match self {
            TxSocket::Packet(t) => t.send_batch(frames),
            #[cfg(feature = "afxdp")]
            TxSocket::Xdp(t) => t.send_batch(frames),
            TxSocket::Memory(t) => t.send_batch(frames),
        }
    }

    /// `afpacket`, how the AF_XDP socket was set up, or `memory`.
    pub fn io_name(&self) -> &'static str {
        match self {
            TxSocket::Packet(_) => "afpacket",
            #[cfg(feature = "afxdp")]
            TxSocket::Xdp(t) => t.attached().name(),
            TxSocket::Memory(_) => "memory",
        }
    }
}

/// The ports of a live run.
#[derive(Debug, Default)]
pub struct LivePorts {
    pub(crate) inputs: Vec<(u16, RxPort)>,
    /// Indexed by port number.
    pub(crate) outputs: Vec<Option<TxSocket>>,
}

impl LivePorts {
    /// No ports yet.
    pub fn new() -> LivePorts {
        LivePorts::default()
    }

    /// Receive on `rx` (an [`RxRing`], an AF_XDP receive half or a
    /// [`MemoryRx`]) as input port `port`.
    pub fn add_input(&mut self, port: u16, rx: impl Into<RxPort>) {
        self.inputs.push((port, rx.into()));
    }

    /// Send frames for output port `port` on `tx` (a [`TxPort`], an
    /// AF_XDP transmit half or a [`MemoryTx`]), replacing any earlier one.
    pub fn add_output(&mut self, port: u16, tx: impl Into<TxSocket>) {
        let i = usize::from(port);
        if self.outputs.len() <= i {
            self.outputs.resize_with(i + 1, || None);
        }
        self.outputs[i] = Some(tx.into());
    }

    /// The I/O of input port `port` (`afpacket`, `afxdp-native`,
    /// `afxdp-skb`), if it is an input.
    pub fn input_io(&self, port: u16) -> Option<&'static str> {
        self.inputs
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, r)| r.io_name())
    }

    /// The I/O of output port `port` (`afpacket`, `afxdp-native`,
    /// `afxdp-skb`, `afxdp-tx`), if it has a transmit socket.
    pub fn output_io(&self, port: u16) -> Option<&'static str> {
        match self.outputs.get(usize::from(port)) {
            Some(Some(t)) => Some(t.io_name()),
            _ => None,
        }
    }

    /// Whether output port `port` has a transmit socket.
    pub fn has_output(&self, port: u16) -> bool {
        matches!(self.outputs.get(usize::from(port)), Some(Some(_)))
    }
}

/// When a live run stops (whichever comes first; none: only on signal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StopAfter {
    /// Wall-clock time since the start.
    pub duration: Option<Duration>,
    /// Frames received (the block in hand is finished, so a few more may
    /// be counted).
    pub frames: Option<u64>,
}

/// Why a live run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// SIGINT or SIGTERM (or [`StopFlag::raise`]).
    Signal,
    /// [`StopAfter::duration`] passed.
    Duration,
    /// [`StopAfter::frames`] frames were received.
    Frames,
}

impl StopReason {
    /// `signal`, `duration` or `packets`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Signal => "signal",
            StopReason::Duration => "duration",
            StopReason::Frames => "packets",
        }
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::Relaxed);
}

/// A stop request: the process-wide one, set by SIGINT/SIGTERM once
/// [`StopFlag::install`] has run, or a flag of its own
/// ([`StopFlag::new`]: only [`StopFlag::raise`] sets it), for tests and
/// for embedders that stop an engine without a signal. Clones share the
/// flag; any thread may raise it or read it.
#[derive(Clone, Debug)]
pub struct StopFlag(Option<Arc<AtomicBool>>);

impl Default for StopFlag {
    fn default() -> StopFlag {
        StopFlag::new()
    }
}

impl StopFlag {
    /// Install handlers for SIGINT and SIGTERM that set the flag (without
    /// `SA_RESTART`, so a waiting `poll()` returns at once).
    ///
    /// # Errors
    /// `sigaction` failed.
    #[allow(unsafe_code)]
    pub fn install() -> io::Result<StopFlag> {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: (1) sigaction is a plain C struct for which all-zero
            // bytes are valid (empty mask, no flags, default handler).
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // SAFETY: (2) `sa.sa_mask` is a live sigset_t owned by `sa`.
            unsafe { libc::sigemptyset(&mut sa.sa_mask) };
            // SAFETY: (3) `sa` is fully initialised and lives for the call;
            // the handler only performs an atomic store, which is
            // async-signal-safe; a null old-action pointer is allowed.
            let r = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(StopFlag(None))
    }

    /// A flag of its own, not raised, that no signal sets.
    pub fn new() -> StopFlag {
        StopFlag(Some(Arc::new(AtomicBool::new(false))))
    }

    fn flag(&self) -> &AtomicBool {
        self.0.as_deref().unwrap_or(&STOP)
    }

    /// Whether a stop was requested.
    pub fn is_raised(&self) -> bool {
        self.flag().load(Ordering::Relaxed)
    }

    /// Request a stop (as a signal would).
    pub fn raise(&self) {
        self.flag().store(true, Ordering::Relaxed);
    }
}

/// Port-level counts the pipeline cannot see.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Per output port: frames the kernel refused to send (`(port, n)`,
    /// ports with none left out).
    pub tx_failed: Vec<(u16, u64)>,
    /// Per input port: frames the kernel dropped because the ring was full
    /// (AF_XDP: also for lack of a fill chunk).
    pub ring_drops: Vec<(u16, u64)>,
    /// Per input port: frames skipped because they were captured in part.
    pub rx_truncated: Vec<(u16, u64)>,
}

impl PortStats {
    /// Add `other`'s counts (another worker's) to these, port by port.
    pub fn merge(&mut self, other: &PortStats) {
        fn add(into: &mut Vec<(u16, u64)>, from: &[(u16, u64)]) {
            for &(p, n) in from {
                match into.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, m)) => *m += n,
                    None => into.push((p, n)),
                }
            }
            into.sort_unstable();
        }
        add(&mut self.tx_failed, &other.tx_failed);
        add(&mut self.ring_drops, &other.ring_drops);
        add(&mut self.rx_truncated, &other.rx_truncated);
    }

    /// Frames refused on all output ports.
    pub fn tx_failed_total(&self) -> u64 {
        self.tx_failed.iter().map(|(_, n)| n).sum()
    }

    /// Ring drops on all input ports.
    pub fn ring_drops_total(&self) -> u64 {
        self.ring_drops.iter().map(|(_, n)| n).sum()
    }

    /// Partly captured frames on all input ports.
    pub fn rx_truncated_total(&self) -> u64 {
        self.rx_truncated.iter().map(|(_, n)| n).sum()
    }
}

/// A progress report, once per reporting interval.
#[derive(Clone, Debug)]
pub struct Progress<'a> {
    /// Time since the start.
    pub elapsed: Duration,
    /// The pipeline's counters so far.
    pub counters: &'a Counters,
    /// Port-level counts so far.
    pub ports: &'a PortStats,
    /// Frames received since the previous report.
    pub interval_frames: u64,
    /// Length of that interval.
    pub interval: Duration,
}

/// The outcome of one worker's run ([`crate::engine::run_worker`]), or of
/// several merged ([`LiveRun::merge`]).
#[derive(Clone, Debug)]
pub struct LiveRun {
    /// The pipeline's counters for this run.
    pub counters: Counters,
    /// Port-level counts.
    pub ports: PortStats,
    /// Why the run stopped.
    pub stopped_by: StopReason,
    /// Wall-clock time of the whole run.
    pub elapsed: Duration,
    /// From the first frame received to the end of the last block
    /// processed (zero when no frame came).
    pub active: Duration,
}

impl LiveRun {
    /// Combine the runs of several workers that ran side by side: counts
    /// add up; times are the longest; the reason is the first worker's.
    pub fn merge(runs: &[LiveRun]) -> Option<LiveRun> {
        let (first, rest) = runs.split_first()?;
        let mut all = first.clone();
        for r in rest {
            all.counters.merge(&r.counters);
            all.ports.merge(&r.ports);
            all.elapsed = all.elapsed.max(r.elapsed);
            all.active = all.active.max(r.active);
        }
        Some(all)
    }

    /// Millions of frames received per second over the active time.
    pub fn mpps(&self) -> f64 {
        let s = self.active.as_secs_f64();
        if s > 0.0 {
            self.counters.frames_in as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_of_its_own_is_raised_only_by_its_clones() {
        let a = StopFlag::new();
        let b = StopFlag::new();
        let a2 = a.clone();
        assert!(!a.is_raised() && !b.is_raised());
        a2.raise();
        assert!(a.is_raised(), "clones share the flag");
        assert!(!b.is_raised(), "another flag is not raised");
        assert!(
            !STOP.load(Ordering::Relaxed),
            "the signal flag is not raised"
        );
    }

    #[test]
    fn memory_ports_hand_over_queued_frames_in_batches_and_keep_what_they_send() {
        let q = MemoryQueue::new();
        for i in 0..(MEMORY_BATCH + 3) {
            q.push(vec![(i % 256) as u8; 1 + i % 7]);
        }
        let mut rx = RxPort::from(MemoryRx::new(q.clone()));
        assert_eq!((rx.raw_fd(), rx.io_name()), (None, "memory"));
        let mut seen = Vec::new();
        while let Some(mut batch) = rx.next() {
            let hint = batch.len_hint();
            assert!(hint <= MEMORY_BATCH);
            let mut frames = Vec::new();
            batch.frames_into(&mut frames);
            assert_eq!(frames.len(), hint);
            seen.push(frames.iter().map(|f| f.to_vec()).collect::<Vec<_>>());
        }
        assert_eq!(
            seen.iter().map(Vec::len).collect::<Vec<_>>(),
            [MEMORY_BATCH, 3]
        );
        assert_eq!(
            seen[1][2],
            vec![((MEMORY_BATCH + 2) % 256) as u8; 1 + (MEMORY_BATCH + 2) % 7]
        );
        assert!(q.is_empty());
        assert_eq!((rx.drops(), rx.truncated()), (0, 0));

        let out = MemoryQueue::new();
        let mut tx = TxSocket::from(MemoryTx::new(out.clone()));
        assert_eq!(tx.io_name(), "memory");
        let r = tx.send_batch(&[&[1u8, 2][..], &[3u8][..]]);
        assert_eq!((r.sent, r.failed, r.last_error), (2, 0, None));
        assert_eq!(out.drain(), [vec![1, 2], vec![3]]);
        assert!(out.is_empty());
    }

    #[test]
    fn stop_reasons_have_summary_names() {
        assert_eq!(StopReason::Signal.name(), "signal");
        assert_eq!(StopReason::Duration.name(), "duration");
        assert_eq!(StopReason::Frames.name(), "packets");
    }

    #[test]
    fn port_stats_totals_add_every_port() {
        let s = PortStats {
            tx_failed: vec![(1, 2), (3, 5)],
            ring_drops: vec![(0, 7)],
            rx_truncated: vec![],
        };
        assert_eq!(
            (
                s.tx_failed_total(),
                s.ring_drops_total(),
                s.rx_truncated_total()
            ),
            (7, 7, 0)
        );
    }

    #[test]
    fn worker_runs_merge_port_by_port() {
        let mut a = PortStats {
            tx_failed: vec![(1, 2)],
            ring_drops: vec![(0, 7)],
            rx_truncated: vec![],
        };
        a.merge(&PortStats {
            tx_failed: vec![(3, 1), (1, 1)],
            ring_drops: vec![(0, 1)],
            rx_truncated: vec![(0, 4)],
        });
        assert_eq!(a.tx_failed, vec![(1, 3), (3, 1)]);
        assert_eq!(a.ring_drops, vec![(0, 8)]);
        assert_eq!(a.rx_truncated, vec![(0, 4)]);
        let run = |frames: u64, secs: u64| LiveRun {
            counters: Counters {
                frames_in: frames,
                ..Counters::default()
            },
            ports: PortStats::default(),
            stopped_by: StopReason::Duration,
            elapsed: Duration::from_secs(secs),
            active: Duration::from_secs(secs),
        };
        let m = LiveRun::merge(&[run(10, 1), run(30, 2)]).unwrap();
        assert_eq!(m.counters.frames_in, 40);
        assert_eq!(m.active, Duration::from_secs(2));
        assert!((m.mpps() - 20e-6).abs() < 1e-12);
        assert!(LiveRun::merge(&[]).is_none());
    }

    #[test]
    fn mpps_is_zero_without_active_time() {
        let run = LiveRun {
            counters: Counters::default(),
            ports: PortStats::default(),
            stopped_by: StopReason::Signal,
            elapsed: Duration::from_secs(1),
            active: Duration::ZERO,
        };
        assert_eq!(run.mpps(), 0.0);
    }
}
