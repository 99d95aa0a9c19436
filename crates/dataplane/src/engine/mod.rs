//! The forwarder engine: worker threads, each running one pipeline
//! ([`Stage`]) over its own ports to completion, a table refresh passed
//! in by the caller ([`Refresh`]), and the workers' reports merged port
//! by port.
//!
//! * [`Stage`] is the pipeline trait: a group of frames in, each frame's
//!   output ports out, counters out. The flat-name [`Pipeline`] and the
//!   [`IpPipeline`](crate::IpPipeline) implement it.
//! * [`Refresh`] is how a worker's table is kept current: called on the
//!   worker's thread before every group and once per idle round, it may
//!   swap a new table into the pipeline. [`NoRefresh`] keeps the table
//!   fixed; [`Follow`] swaps in whatever snapshot a source returns (the
//!   `nexthop` binary adapts a controller follower to it, so this crate
//!   never depends on the control plane); any `Fn(&mut P) -> bool + Sync`
//!   closure is one too. [`LiveTable`] is the flat-name pipeline's table
//!   handle (a mapped FIB, a followed snapshot or a fixed action) and
//!   [`swap_in`] the swap itself.
//! * [`Engine::run`] starts one thread per [`Worker`] (pinned to its CPU
//!   when it has one), merges their reports every
//!   [`EngineConfig::report_every`] for the caller's `on_report`, and
//!   returns every worker's [`LiveRun`] and their merge once all stopped.
//! * [`open_ports`] opens every worker's live ports on kernel interfaces
//!   (AF_PACKET rings in a fanout group and transmit sockets, or AF_XDP
//!   sockets per worker and queue, [`IoMode`]).
//! * [`progress_line`] and [`summary_line`] format a merged report and a
//!   run as the forwarder's output lines.
//! * [`run_worker`] is one worker's loop on the calling thread, for a
//!   caller that manages its own threads.
//!
//! # Threading contract
//!
//! * Each worker thread owns its pipeline, its [`LivePorts`] (its receive
//!   rings or sockets, its transmit sockets) and its scratch buffers;
//!   nothing on the forwarding path is shared between workers, so a stage
//!   needs `Send`, not `Sync`.
//! * The refresh is shared by every worker (`&R`, `R: Sync`) and called on
//!   the worker threads, between groups: every frame of a group is decided
//!   with the table the group started with. It must be cheap when nothing
//!   changed (an atomic load and a pointer compare).
//! * The thread that calls [`Engine::run`] only merges: every
//!   `report_every` it takes the latest report each worker left (a
//!   `Mutex`-guarded slot per worker, written once per interval by its
//!   worker) and calls `on_report` with their sum; `on_report` runs on
//!   that thread only, so it may print or publish metrics without
//!   slowing a worker.
//! * [`StopFlag`] ends every worker (within one `poll()` wait, at most
//!   [`POLL_MS`]); [`StopAfter`] ends each worker on its own (its own time
//!   or frame count). [`Engine::run`] returns once every worker stopped.
//!   A worker that fails (cannot start or be pinned, `poll()` fails, it
//!   panics) raises the stop flag, so the others end and the error
//!   returns at once.
//!
//! ```
//! use std::time::Duration;
//! use nexthop_dataplane::engine::{Engine, EngineConfig, NoRefresh, Worker};
//! use nexthop_dataplane::live::{LivePorts, MemoryQueue, MemoryRx, MemoryTx, StopAfter, StopFlag};
//! use nexthop_dataplane::{Pipeline, PipelineConfig};
//! use nexthop_othello::fib::{Action, ConciseFib, KeyType};
//! use nexthop_othello::Config;
//!
//! let fib = ConciseFib::build(Config::default(), &[(1, [2u8, 0, 0, 0, 0, 1], Action::Port(1))])?;
//! let query = fib.othello().export(0);
//! let (rx, tx) = (MemoryQueue::new(), MemoryQueue::new());
//! let mut frame = vec![2u8, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x08, 0x00];
//! frame.resize(60, 0);
//! rx.push(frame.clone());
//! let mut ports = LivePorts::new();
//! ports.add_input(0, MemoryRx::new(rx));
//! ports.add_output(1, MemoryTx::new(tx.clone()));
//! let p = Pipeline::new(&query, fib.action_table(), KeyType::Mac, PipelineConfig::default())?;
//! let engine = Engine::new(EngineConfig {
//!     after: StopAfter { frames: Some(1), duration: Some(Duration::from_secs(10)) },
//!     report_every: None,
//! });
//! let run = engine.run(vec![Worker::new(p, ports)], &NoRefresh, &StopFlag::new(), |_| {})?;
//! assert_eq!(run.merged.counters.forwarded, 1);
//! assert_eq!(tx.drain(), [frame]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod ports;
mod report;
mod stage;
mod table;
mod worker;

use std::collections::BTreeSet;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use ports::{io_list, open_ports, IoMode, PortsConfig, PortsError, XdpAttach};
pub use report::{drop_reasons, port_list, progress_line, summary_line};
pub use stage::{IpScratch, Outputs, Stage};
pub use table::{swap_in, FibSnapshot, Follow, LiveTable};
pub use worker::run_worker;

use crate::counters::Counters;
use crate::live::{LivePorts, LiveRun, PortStats, Progress, StopAfter, StopFlag};
#[cfg(doc)]
use crate::pipeline::Pipeline;

/// Frames per [`Stage::forward_group`] call (and per gather-and-send
/// round).
pub const GROUP: usize = 256;

/// Longest single `poll()` wait of an idle worker, in milliseconds.
pub const POLL_MS: i32 = 50;

/// How often the merging thread checks whether the workers finished.
const MERGE_TICK: Duration = Duration::from_millis(20);

/// How a worker's table is kept current: [`Refresh::refresh`] runs on the
/// worker's thread before every group and once per idle round, and may
/// replace the pipeline's table. One refresh serves every worker (hence
/// `Sync`).
pub trait Refresh<P>: Sync {
    /// Swap a newer table into `pipeline` if there is one; whether it
    /// swapped. Must be cheap when nothing changed.
    fn refresh(&self, pipeline: &mut P) -> bool;
}

impl<P, F> Refresh<P> for F
where
    F: Fn(&mut P) -> bool + Sync,
{
    fn refresh(&self, pipeline: &mut P) -> bool {
        self(pipeline)
    }
}

/// The table is fixed for the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRefresh;

impl<P> Refresh<P> for NoRefresh {
    fn refresh(&self, _pipeline: &mut P) -> bool {
        false
    }
}

/// One worker: its pipeline, its ports and the CPU its thread is pinned
/// to (none: not pinned).
#[derive(Debug)]
pub struct Worker<P> {
    /// The pipeline, owned by the worker's thread for the run.
    pub pipeline: P,
    /// Its ports (receive rings or sockets on the inputs, transmit
    /// sockets on the outputs), owned likewise.
    pub ports: LivePorts,
    /// Pin the worker's thread to this CPU.
    pub cpu: Option<usize>,
}

impl<P> Worker<P> {
    /// A worker running `pipeline` over `ports`, not pinned.
    pub fn new(pipeline: P, ports: LivePorts) -> Worker<P> {
        Worker {
            pipeline,
            ports,
            cpu: None,
        }
    }
}

/// When the workers stop and how often they report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineConfig {
    /// When each worker stops (besides the stop flag).
    pub after: StopAfter,
    /// How often workers report and the merged report is made; `None`:
    /// never (`on_report` is not called).
    pub report_every: Option<Duration>,
}

/// The workers' reports merged, once per reporting interval.
#[derive(Clone, Debug)]
pub struct Report<'a> {
    /// Every worker's counters and port counts, summed; the interval is
    /// the merging thread's.
    pub merged: Progress<'a>,
    /// Tables swapped in so far, by all workers.
    pub swaps: u64,
}

/// What [`Engine::run`] returns.
#[derive(Clone, Debug)]
pub struct EngineRun {
    /// Every worker's run combined ([`LiveRun::merge`]).
    pub merged: LiveRun,
    /// Each worker's run, in worker order.
    pub workers: Vec<LiveRun>,
    /// Tables swapped in by all workers.
    pub swaps: u64,
}

/// Why [`Engine::run`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No worker was given.
    #[error("no worker to run")]
    NoWorkers,
    /// A worker thread could not be started.
    #[error("starting worker-{worker}: {source}")]
    Spawn {
        /// The worker's index.
        worker: usize,
        /// The OS error.
        source: io::Error,
    },
    /// A worker thread could not be pinned to its CPU.
    #[error("pinning worker-{worker} to CPU {cpu}: {source}")]
    Pin {
        /// The worker's index.
        worker: usize,
        /// The CPU.
        cpu: usize,
        /// The OS error.
        source: io::Error,
    },
    /// A worker's loop failed (`poll()`).
    #[error("worker-{worker}: {source}")]
    Io {
        /// The worker's index.
        worker: usize,
        /// The OS error.
        source: io::Error,
    },
    /// A worker thread panicked.
    #[error("worker-{worker} panicked")]
    Panicked {
        /// The worker's index.
        worker: usize,
    },
}

/// The forwarder engine (see the [module docs](self)).
#[derive(Clone, Debug, Default)]
pub struct Engine {
    config: EngineConfig,
}

/// What each worker last reported.
type Slots = Mutex<Vec<Option<(Counters, PortStats)>>>;

impl Engine {
    /// An engine with `config`.
    pub fn new(config: EngineConfig) -> Engine {
        Engine { config }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Run every worker on a thread of its own (`worker-N`) until each
    /// stops; every [`EngineConfig::report_every`], call `on_report` on
    /// this thread with the workers' latest reports merged. After a
    /// refresh swapped a table in, each port of the new table that has no
    /// transmit socket is warned about once (its frames are counted as
    /// refused).
    ///
    /// A worker that cannot start, cannot be pinned, fails (`poll()`) or
    /// panics raises `stop`, so the others end too and the error comes
    /// back at once (for the process-wide flag this is what a signal
    /// does).
    ///
    /// # Errors
    /// No worker; a thread could not start or be pinned; a worker's loop
    /// failed or panicked (the first such worker, once all stopped).
    pub fn run<P, R>(
        &self,
        workers: Vec<Worker<P>>,
        refresh: &R,
        stop: &StopFlag,
        mut on_report: impl FnMut(&Report<'_>),
    ) -> Result<EngineRun, EngineError>
    where
        P: Stage + Send,
        R: Refresh<P> + ?Sized,
    {
        if workers.is_empty() {
            return Err(EngineError::NoWorkers);
        }
        let n = workers.len();
        let report_every = self.config.report_every;
        let after = self.config.after;
        let swaps = AtomicU64::new(0);
        let warned: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
        let slots: Slots = Mutex::new(vec![None; n]);
        let start = Instant::now();

        let results = std::thread::scope(|scope| -> Result<_, EngineError> {
            let mut handles = Vec::with_capacity(n);
            for (w, worker) in workers.into_iter().enumerate() {
                let (swaps, warned, slots) = (&swaps, &warned, &slots);
                let h = std::thread::Builder::new()
                    .name(format!("worker-{w}"))
                    .spawn_scoped(scope, move || {
                        // A worker that fails or panics stops the others.
                        let _guard = RaiseOnPanic(stop);
                        let r = run_one(
                            w,
                            worker,
                            refresh,
                            stop,
                            after,
                            report_every,
                            swaps,
                            warned,
                            slots,
                        );
                        if r.is_err() {
                            stop.raise();
                        }
                        r
                    })
                    .map_err(|source| {
                        // The workers already started end before the
                        // scope returns.
                        stop.raise();
                        EngineError::Spawn { worker: w, source }
                    })?;
                handles.push(h);
            }
            // Merge the workers' reports every interval.
            let mut last = (start, 0u64);
            let mut next = report_every.map(|d| start + d);
            while handles.iter().any(|h| !h.is_finished()) {
                std::thread::sleep(MERGE_TICK);
                let (Some(at), Some(every)) = (next, report_every) else {
                    continue;
                };
                if Instant::now() < at {
                    continue;
                }
                next = Some(at + every);
                let (mut c, mut ps) = (Counters::default(), PortStats::default());
                for (wc, wp) in lock(&slots).iter().flatten() {
                    c.merge(wc);
                    ps.merge(wp);
                }
                let now = Instant::now();
                on_report(&Report {
                    merged: Progress {
                        elapsed: now - start,
                        counters: &c,
                        ports: &ps,
                        interval_frames: c.frames_in.saturating_sub(last.1),
                        interval: now - last.0,
                    },
                    swaps: swaps.load(Ordering::Relaxed),
                });
                last = (now, c.frames_in);
            }
            Ok(handles
                .into_iter()
                .enumerate()
                .map(|(w, h)| h.join().unwrap_or(Err(EngineError::Panicked { worker: w })))
                .collect::<Vec<_>>())
        })?;
        let workers = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        let merged = LiveRun::merge(&workers).ok_or(EngineError::NoWorkers)?;
        Ok(EngineRun {
            merged,
            workers,
            swaps: swaps.into_inner(),
        })
    }
}

/// Raises the stop flag when dropped during a panic.
struct RaiseOnPanic<'a>(&'a StopFlag);

impl Drop for RaiseOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.raise();
        }
    }
}

/// Lock `m`, taking the data even if a thread panicked while holding it
/// (the slots and the warned set stay whole values).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Worker `w`'s thread: pin, then run the loop, counting swaps and
/// warning about ports a new table sends to without a socket.
#[allow(clippy::too_many_arguments)]
fn run_one<P: Stage, R: Refresh<P> + ?Sized>(
    w: usize,
    worker: Worker<P>,
    refresh: &R,
    stop: &StopFlag,
    after: StopAfter,
    report_every: Option<Duration>,
    swaps: &AtomicU64,
    warned: &Mutex<BTreeSet<u16>>,
    slots: &Slots,
) -> Result<LiveRun, EngineError> {
    let Worker {
        mut pipeline,
        mut ports,
        cpu,
    } = worker;
    if let Some(c) = cpu {
        crate::affinity::pin_current_thread(&[c]).map_err(|source| EngineError::Pin {
            worker: w,
            cpu: c,
            source,
        })?;
    }
    let has_output: Vec<bool> = (0..ports.outputs.len())
        .map(|p| u16::try_from(p).is_ok_and(|p| ports.has_output(p)))
        .collect();
    let on_swap = |p: &mut P| {
        if !refresh.refresh(p) {
            return;
        }
        swaps.fetch_add(1, Ordering::Relaxed);
        let unsent = |port: &u16| !has_output.get(usize::from(*port)).copied().unwrap_or(false);
        if p.ports().iter().any(unsent) {
            let mut warned = lock(warned);
            for &port in p.ports().iter().filter(|p| unsent(p)) {
                if warned.insert(port) {
                    tracing::warn!(
                        port,
                        "the table now sends to port {port}, which has no output; its frames \
                         are counted as tx_failed"
                    );
                }
            }
        }
    };
    let progress = |p: &Progress<'_>| {
        lock(slots)[w] = Some((p.counters.clone(), p.ports.clone()));
    };
    run_worker(
        &mut pipeline,
        &mut ports,
        after,
        stop,
        report_every,
        progress,
        on_swap,
    )
    .map_err(|source| EngineError::Io { worker: w, source })
}

#[cfg(test)]
mod tests;
