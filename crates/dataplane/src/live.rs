//! The run-to-completion forwarding loop over live ports: AF_PACKET
//! (`TPACKET_V3` receive rings, `sendmmsg` transmit) or, with the `afxdp`
//! feature, AF_XDP sockets ([`RxPort`], [`TxSocket`]; a run may mix them
//! port by port).
//!
//! One thread does everything for a frame before it takes the next block:
//! take a ready block from an input ring ([`RxRing::next_block`], or up to
//! `afxdp::RX_BATCH` frames from an AF_XDP rx ring), run its frames
//! through [`Pipeline::process`] in groups of [`GROUP`], gather the frames
//! per output port and send each port's list with one batched send
//! ([`TxPort::send_batch`] straight from the ring; an AF_XDP port copies
//! each frame into a transmit chunk of its UMEM), then give the block (or
//! the AF_XDP chunks) back. When no input has frames ready the loop
//! `poll()`s all inputs (at most [`POLL_MS`] at a time, so stop conditions
//! and progress reports stay on time).
//!
//! [`forward_live_refreshing`] lets the caller swap the pipeline's table
//! between groups (a forwarder following a controller's FIB).
//!
//! The loop drives either pipeline ([`LiveStage`]): the flat-name
//! [`Pipeline`] sends frames straight from the receive buffers; the
//! [`IpPipeline`] rewrites frames, so each group is first copied into
//! per-worker buffers (kept from group to group) and sent from there.
//!
//! The pipeline counts frames in per input port, decisions, drops by
//! reason and frames out per port; the loop adds what only the ports know:
//! frames the kernel refused to send, and ring drops.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::afpacket::{poll_fds, Block, RxRing, SendOutcome, TxPort};
#[cfg(feature = "afxdp")]
use crate::afxdp::{XskBatch, XskRx, XskTx};
use crate::counters::Counters;
use crate::framebuf::{FrameBuf, FrameLists};
use crate::ipfwd::{IpDecision, IpPipeline};
use crate::pipeline::{Decision, Egress, NameTable, Pipeline};

/// Frames per `Pipeline::process` call (and per gather-and-send round).
pub const GROUP: usize = 256;

/// Longest single `poll()` wait, in milliseconds.
pub const POLL_MS: i32 = 50;

/// A receiving port of a live run.
#[derive(Debug)]
#[non_exhaustive]
pub enum RxPort {
    /// An AF_PACKET `TPACKET_V3` ring.
    Packet(RxRing),
    /// The receive half of an AF_XDP socket.
    #[cfg(feature = "afxdp")]
    Xdp(XskRx),
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
    /// The descriptor to `poll()` for `POLLIN`.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            RxPort::Packet(r) => r.raw_fd(),
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.raw_fd(),
        }
    }

    /// `afpacket`, `afxdp-native` or `afxdp-skb`.
    pub fn io_name(&self) -> &'static str {
        match self {
            RxPort::Packet(_) => "afpacket",
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.attached().name(),
        }
    }

    /// The next frames ready, if any.
    fn next(&mut self) -> Option<RxBatch<'_>> {
        match self {
            RxPort::Packet(r) => r.next_block().map(RxBatch::Packet),
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.next_batch().map(RxBatch::Xdp),
        }
    }

    /// Frames lost on the way in (ring full, no buffer), so far; a failed
    /// statistics read keeps the last figure.
    fn drops(&mut self) -> u64 {
        match self {
            RxPort::Packet(r) => {
                let prev = r.drops_so_far();
                r.drops().unwrap_or(prev)
            }
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(x) => x.drops_so_far(),
        }
    }

    /// Frames skipped because they were captured in part.
    fn truncated(&self) -> u64 {
        match self {
            RxPort::Packet(r) => r.truncated(),
            #[cfg(feature = "afxdp")]
            RxPort::Xdp(_) => 0,
        }
    }
}

/// Frames lent by an input until dropped.
enum RxBatch<'a> {
    Packet(Block<'a>),
    #[cfg(feature = "afxdp")]
    Xdp(XskBatch<'a>),
}

impl RxBatch<'_> {
    fn len_hint(&self) -> usize {
        match self {
            RxBatch::Packet(b) => b.packets() as usize,
            #[cfg(feature = "afxdp")]
            RxBatch::Xdp(b) => b.len(),
        }
    }

    fn frames_into<'b>(&'b mut self, out: &mut Vec<&'b [u8]>) {
        match self {
            RxBatch::Packet(b) => b.frames_into(out),
            #[cfg(feature = "afxdp")]
            RxBatch::Xdp(b) => b.frames_into(out),
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
        }
    }

    /// `afpacket`, or how the AF_XDP socket was set up.
    pub fn io_name(&self) -> &'static str {
        match self {
            TxSocket::Packet(_) => "afpacket",
            #[cfg(feature = "afxdp")]
            TxSocket::Xdp(t) => t.attached().name(),
        }
    }
}

/// The ports of a live run.
#[derive(Debug, Default)]
pub struct LivePorts {
    inputs: Vec<(u16, RxPort)>,
    outputs: Vec<Option<TxSocket>>,
}

impl LivePorts {
    /// No ports yet.
    pub fn new() -> LivePorts {
        LivePorts::default()
    }

    /// Receive on `rx` (an [`RxRing`], or an AF_XDP receive half) as
    /// input port `port`.
    pub fn add_input(&mut self, port: u16, rx: impl Into<RxPort>) {
        self.inputs.push((port, rx.into()));
    }

    /// Send frames for output port `port` on `tx` (a [`TxPort`] or an
    /// AF_XDP transmit half), replacing any earlier one.
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

/// The process-wide stop request, set by SIGINT/SIGTERM once
/// [`StopFlag::install`] has run.
#[derive(Clone, Copy, Debug)]
pub struct StopFlag(());

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
        Ok(StopFlag(()))
    }

    /// Whether a stop was requested.
    pub fn is_raised(&self) -> bool {
        STOP.load(Ordering::Relaxed)
    }

    /// Request a stop (as a signal would).
    pub fn raise(&self) {
        STOP.store(true, Ordering::Relaxed);
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

/// The outcome of [`forward_live`].
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

/// The output side of a live run as a pipeline sees it for one group:
/// the transmit sockets by port and the per-port refusal counts.
pub struct Outputs<'p> {
    outputs: &'p mut [Option<TxSocket>],
    tx_failed: &'p mut Vec<u64>,
}

impl std::fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outputs")
            .field("ports", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl Outputs<'_> {
    /// Count `n` frames for `port` as refused (it has no socket).
    fn refuse(&mut self, port: u16, n: u64) {
        add_failed(self.tx_failed, port, n);
    }

    /// Send `lists[p]` on port `p` for every port with frames (one batched
    /// send each), counting what a port refused or could not send, and
    /// empty the lists.
    fn send_lists(&mut self, lists: &mut [Vec<&[u8]>]) {
        for (p, list) in lists.iter_mut().enumerate() {
            if list.is_empty() {
                continue;
            }
            let n = list.len() as u64;
            let failed = match self.outputs.get_mut(p) {
                Some(Some(tx)) => tx.send_batch(list).failed as u64,
                _ => n,
            };
            if failed > 0 {
                if let Ok(port) = u16::try_from(p) {
                    add_failed(self.tx_failed, port, failed);
                }
            }
            list.clear();
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl<T: crate::pipeline::NameTable> Sealed for crate::pipeline::Pipeline<T> {}
    impl Sealed for crate::ipfwd::IpPipeline<'_> {}
}

/// A pipeline the live loop drives: the flat-name [`Pipeline`] (frames
/// sent straight from the receive buffers) or the [`IpPipeline`] (frames
/// copied into per-worker buffers, rewritten there, and sent from them).
pub trait LiveStage: sealed::Sealed {
    /// Buffers kept from one group to the next.
    #[doc(hidden)]
    type Scratch: Default;
    /// The counters so far.
    fn counters(&self) -> &Counters;
    /// Take the counters, leaving zeroed ones.
    fn take_counters(&mut self) -> Counters;
    /// Continue from `counters`.
    fn set_counters(&mut self, counters: Counters);
    /// Decide for one group of frames received on `in_port` and send them;
    /// `lists` has one empty list per output port and is left empty.
    #[doc(hidden)]
    fn forward_group<'b>(
        &mut self,
        scratch: &mut Self::Scratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    );
}

impl<T: NameTable> LiveStage for Pipeline<T> {
    type Scratch = Vec<Decision>;

    fn counters(&self) -> &Counters {
        Pipeline::counters(self)
    }

    fn take_counters(&mut self) -> Counters {
        Pipeline::take_counters(self)
    }

    fn set_counters(&mut self, counters: Counters) {
        Pipeline::set_counters(self, counters)
    }

    fn forward_group<'b>(
        &mut self,
        decisions: &mut Vec<Decision>,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    ) {
        self.process(in_port, group, decisions);
        for (f, d) in group.iter().zip(decisions.iter()) {
            if let Egress::Ports(ps) = self.egress(d) {
                for &p in ps {
                    match lists.get_mut(usize::from(p)) {
                        Some(list) => list.push(f),
                        None => out.refuse(p, 1),
                    }
                }
            }
        }
        out.send_lists(lists);
    }
}

/// The IP pipeline's buffers: a copy of each frame of the group (rewritten
/// in place), the decisions, and per-port lists over the copies.
#[derive(Default)]
#[doc(hidden)]
pub struct IpScratch {
    copies: Vec<Vec<u8>>,
    decisions: Vec<IpDecision>,
    lists: FrameLists,
}

impl std::fmt::Debug for IpScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpScratch")
            .field("copies", &self.copies.len())
            .finish_non_exhaustive()
    }
}

impl LiveStage for IpPipeline<'_> {
    type Scratch = IpScratch;

    fn counters(&self) -> &Counters {
        IpPipeline::counters(self)
    }

    fn take_counters(&mut self) -> Counters {
        IpPipeline::take_counters(self)
    }

    fn set_counters(&mut self, counters: Counters) {
        IpPipeline::set_counters(self, counters)
    }

    fn forward_group<'b>(
        &mut self,
        scratch: &mut IpScratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    ) {
        let IpScratch {
            copies,
            decisions,
            lists: own,
        } = scratch;
        // Receive buffers are read-only (and a frame may be sent on no
        // port), so each frame is copied and rewritten in the copy. The
        // copies keep their allocations: no allocation once every slot
        // has held a frame as long as this one.
        if copies.len() < group.len() {
            copies.resize_with(group.len(), Vec::new);
        }
        for (c, f) in copies.iter_mut().zip(group) {
            c.clear();
            c.extend_from_slice(f);
        }
        let n = group.len();
        self.process(in_port, &mut copies[..n], decisions);
        let mut per_port = own.take(lists.len());
        for (c, d) in copies[..n].iter().zip(decisions.iter()) {
            if let IpDecision::Forward(p) = *d {
                match per_port.get_mut(usize::from(p)) {
                    Some(list) => list.push(c),
                    None => out.refuse(p, 1),
                }
            }
        }
        out.send_lists(&mut per_port);
        own.put(per_port);
    }
}

/// Forward frames from the input rings of `ports` to their output ports
/// through `pipeline` until `stop` is raised or `after` is met; call
/// `progress` every `report_every` (if given).
///
/// Frames for an output port that has no [`TxPort`] are counted as refused
/// on that port. Punted frames (controller actions, misses under the
/// controller policy) are counted by the pipeline and not sent.
///
/// # Errors
/// `poll()` failed.
pub fn forward_live<P: LiveStage>(
    pipeline: &mut P,
    ports: &mut LivePorts,
    after: StopAfter,
    stop: &StopFlag,
    report_every: Option<Duration>,
    progress: impl FnMut(&Progress<'_>),
) -> io::Result<LiveRun> {
    forward_live_refreshing(pipeline, ports, after, stop, report_every, progress, |_| {})
}

/// [`forward_live`] with a hook that may change the pipeline between groups
/// (swap a [`Pipeline`]'s table: [`Pipeline::replace_table`],
/// [`Pipeline::set_actions`]):
/// `refresh` runs before every group of up to [`GROUP`] frames and once
/// per idle `poll()` round. Every frame of a group is decided with the
/// table the group started with. The hook is on the forwarding thread, so
/// it must be cheap when nothing changed (one atomic load and a pointer
/// compare, say).
///
/// # Errors
/// `poll()` failed.
pub fn forward_live_refreshing<P: LiveStage>(
    pipeline: &mut P,
    ports: &mut LivePorts,
    after: StopAfter,
    stop: &StopFlag,
    report_every: Option<Duration>,
    mut progress: impl FnMut(&Progress<'_>),
    mut refresh: impl FnMut(&mut P),
) -> io::Result<LiveRun> {
    let before = pipeline.take_counters();
    let nout = ports.outputs.len();
    let mut stats = PortStats::default();
    let mut tx_failed = vec![0u64; nout];
    let fds: Vec<_> = ports.inputs.iter().map(|(_, r)| r.raw_fd()).collect();
    let mut scratch = P::Scratch::default();
    // The frame lists of a block borrow the block, so they cannot live
    // across blocks; their allocations do (no allocation per block once
    // the largest block has been seen).
    let mut all_buf = FrameBuf::with_capacity(GROUP);
    let mut lists_buf = FrameLists::default();
    let start = Instant::now();
    let mut first_frame: Option<Instant> = None;
    let mut last_frame = start;
    let mut next_report = report_every.map(|d| start + d);
    let mut last_report = (start, 0u64);

    let stopped_by = loop {
        if stop.is_raised() {
            break StopReason::Signal;
        }
        if after
            .frames
            .is_some_and(|n| pipeline.counters().frames_in >= n)
        {
            break StopReason::Frames;
        }
        let now = Instant::now();
        if after.duration.is_some_and(|d| now - start >= d) {
            break StopReason::Duration;
        }
        if let (Some(at), Some(every)) = (next_report, report_every) {
            if now >= at {
                port_stats(ports, &tx_failed, &mut stats);
                let c = pipeline.counters();
                progress(&Progress {
                    elapsed: now - start,
                    counters: c,
                    ports: &stats,
                    interval_frames: c.frames_in - last_report.1,
                    interval: now - last_report.0,
                });
                last_report = (now, c.frames_in);
                next_report = Some(at + every);
            }
        }

        let mut any = false;
        for (in_port, rx) in ports.inputs.iter_mut() {
            let Some(mut block) = rx.next() else {
                continue;
            };
            any = true;
            let mut all = all_buf.take();
            all.reserve(block.len_hint());
            block.frames_into(&mut all);
            if !all.is_empty() && first_frame.is_none() {
                first_frame = Some(Instant::now());
            }
            let mut per_port = lists_buf.take(nout);
            for group in all.chunks(GROUP) {
                refresh(pipeline);
                let mut out = Outputs {
                    outputs: &mut ports.outputs,
                    tx_failed: &mut tx_failed,
                };
                pipeline.forward_group(&mut scratch, *in_port, group, &mut per_port, &mut out);
            }
            // Emptied and kept: nothing borrows the block after this.
            lists_buf.put(per_port);
            all_buf.put(all);
            drop(block);
            last_frame = Instant::now();
        }
        if !any {
            refresh(pipeline);
            let mut wait = POLL_MS;
            if let Some(d) = after.duration {
                let left = d.saturating_sub(start.elapsed()).as_millis();
                wait = wait.min(i32::try_from(left).unwrap_or(POLL_MS)).max(1);
            }
            poll_fds(&fds, wait)?;
        }
    };

    let elapsed = start.elapsed();
    port_stats(ports, &tx_failed, &mut stats);
    let counters = pipeline.take_counters();
    let mut carried = before;
    carried.merge(&counters);
    pipeline.set_counters(carried);
    Ok(LiveRun {
        counters,
        ports: stats,
        stopped_by,
        elapsed,
        active: first_frame.map_or(Duration::ZERO, |t| last_frame.saturating_duration_since(t)),
    })
}

fn add_failed(tx_failed: &mut Vec<u64>, port: u16, n: u64) {
    let i = usize::from(port);
    if tx_failed.len() <= i {
        tx_failed.resize(i + 1, 0);
    }
    tx_failed[i] += n;
}

fn port_stats(ports: &mut LivePorts, tx_failed: &[u64], stats: &mut PortStats) {
    stats.tx_failed = tx_failed
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(p, &n)| (p as u16, n))
        .collect();
    stats.ring_drops.clear();
    stats.rx_truncated.clear();
    for (port, rx) in ports.inputs.iter_mut() {
        let drops = rx.drops();
        if drops > 0 {
            stats.ring_drops.push((*port, drops));
        }
        if rx.truncated() > 0 {
            stats.rx_truncated.push((*port, rx.truncated()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
