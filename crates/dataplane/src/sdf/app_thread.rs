//! The app side of an SDF slice: the bounded queues workers hand their
//! misses to, and the app thread that takes them in batches, decides each,
//! installs the batch's decisions under one lock and answers each worker
//! once.

use super::*;
use std::sync::atomic::AtomicUsize;

/// What the app thread counts besides the app's own counters.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AppSide {
    pub(super) counters: AppCounters,
    pub(super) control_calls: u64,
    pub(super) data_calls: u64,
}

/// The two bounded queues to one slice's app thread.
pub(super) struct Queues {
    pub(super) control: VecDeque<Request>,
    pub(super) data: VecDeque<Request>,
    /// Control requests served since the last data request.
    pub(super) streak: u32,
    /// The app thread is gone: nothing will be served.
    pub(super) closed: bool,
    /// The app thread waits on `ready` (a push wakes it only then: a
    /// wake-up is a system call, and a busy app thread needs none).
    pub(super) asleep: bool,
}

/// Why a request was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    Full,
    Gone,
}

pub(super) struct AppQueue {
    pub(super) q: Mutex<Queues>,
    /// Requests in both queues, kept beside them (under `q`'s lock) so
    /// the app thread can watch for work without taking the lock.
    pub(super) queued: AtomicUsize,
    pub(super) ready: Condvar,
    pub(super) data_cap: usize,
    pub(super) control_cap: usize,
    pub(super) weight: u32,
}

impl AppQueue {
    pub(super) fn new(cfg: &SdfConfig) -> AppQueue {
        AppQueue {
            q: Mutex::new(Queues {
                control: VecDeque::new(),
                data: VecDeque::new(),
                streak: 0,
                closed: false,
                asleep: false,
            }),
            queued: AtomicUsize::new(0),
            ready: Condvar::new(),
            data_cap: cfg.queue,
            control_cap: cfg.control_queue,
            weight: cfg.control_weight,
        }
    }

    /// Queue a worker's batch: as many of `control`'s and `data`'s
    /// requests (in order) as their queues have room for, under one lock
    /// and with at most one wake-up. The requests refused stay in
    /// `control` and `data` (the accepted ones are taken out); `Err` when
    /// the app thread is gone (all refused).
    pub(super) fn push_batch(
        &self,
        control: &mut Vec<Request>,
        data: &mut Vec<Request>,
    ) -> Result<(), Refused> {
        let mut q = lock(&self.q);
        if q.closed {
            return Err(Refused::Gone);
        }
        let room = self.control_cap.saturating_sub(q.control.len());
        let n = room.min(control.len());
        q.control.extend(control.drain(..n));
        let room = self.data_cap.saturating_sub(q.data.len());
        let n = room.min(data.len());
        q.data.extend(data.drain(..n));
        self.queued
            .store(q.control.len() + q.data.len(), Ordering::Release);
        let wake = q.asleep;
        drop(q);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Take up to `max` requests (each with whether it is control) into
    /// `out`, in the order the app serves them: up to `weight` control
    /// requests for each data request while both queues hold some. Waits
    /// at most `wait` when both are empty. One lock for the whole batch.
    pub(super) fn pop_batch(&self, wait: Duration, max: usize, out: &mut Vec<(Request, bool)>) {
        // A worker that is handing over misses usually has more within
        // microseconds: watch for them a short while before sleeping (a
        // sleep and its wake-up are two system calls per batch).
        if self.queued.load(Ordering::Acquire) == 0 {
            let until = Instant::now() + SPIN_BEFORE_SLEEP;
            'spin: loop {
                for _ in 0..64 {
                    if self.queued.load(Ordering::Acquire) > 0 {
                        break 'spin;
                    }
                    std::hint::spin_loop();
                }
                if Instant::now() >= until {
                    break;
                }
            }
        }
        let mut q = lock(&self.q);
        if q.control.is_empty() && q.data.is_empty() {
            q.asleep = true;
            q = self
                .ready
                .wait_timeout(q, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            q.asleep = false;
        }
        while out.len() < max {
            let control_turn =
                !q.control.is_empty() && (q.streak < self.weight || q.data.is_empty());
            let next = if control_turn {
                q.streak = q.streak.saturating_add(1);
                q.control.pop_front().map(|r| (r, true))
            } else {
                q.streak = 0;
                q.data.pop_front().map(|r| (r, false))
            };
            match next {
                Some(r) => out.push(r),
                None => break,
            }
        }
        self.queued
            .store(q.control.len() + q.data.len(), Ordering::Release);
    }

    /// Requests queued now: (control, data).
    pub(super) fn lens(&self) -> (usize, usize) {
        let q = lock(&self.q);
        (q.control.len(), q.data.len())
    }

    pub(super) fn close(&self) {
        let mut q = lock(&self.q);
        q.closed = true;
        q.control.clear();
        q.data.clear();
        self.queued.store(0, Ordering::Release);
    }
}

/// Closes its slice's queues when the app thread ends, however it ends.
pub(super) struct CloseOnExit(pub(super) Arc<Shared>, pub(super) usize);

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        if let Some(s) = self.0.slices.get(self.1) {
            s.queue.close();
        }
    }
}

/// Slice `slice`'s app thread: take a batch of requests (control first,
/// by weight), decide each, install the batch's decisions and answer each
/// worker once ([`answer_batch`]); tick the app every `tick_every`.
pub(super) fn app_thread(
    mut app: Box<dyn App>,
    shared: &Shared,
    slice: usize,
    mut ports: Ports,
    cfg: &SdfConfig,
) {
    let Some(me) = shared.slices.get(slice) else {
        return;
    };
    let mut side = AppSide::default();
    let start = Instant::now();
    let mut next_tick = start + cfg.tick_every;
    let wait = cfg.tick_every.min(Duration::from_millis(20));
    let mut faults = 0u64;
    let mut batch: Vec<(Request, bool)> = Vec::with_capacity(APP_BATCH);
    // One slot per request of a batch, kept from batch to batch: each
    // decision is built in its slot and installed from there.
    let mut decided: Vec<Decided> = Vec::with_capacity(APP_BATCH);
    let mut outgoing: Vec<Outgoing> = Vec::new();
    let mut replies: Vec<Sender<Vec<Response>>> = Vec::new();
    while !shared.stop.load(Ordering::Acquire) {
        me.queue.pop_batch(wait, APP_BATCH, &mut batch);
        // One clock read per batch: the app's `now` is the batch's start.
        let t = Instant::now();
        let now = t.duration_since(start);
        // The frames were written on the workers' cores: ask for the
        // batch's header lines at once (the key reads 128 bytes of each)
        // instead of missing on them one request after another.
        for (req, _) in &batch {
            let p = req.frame.as_ptr();
            nexthop_mem::prefetch(p);
            nexthop_mem::prefetch(p.wrapping_add(nexthop_mem::CACHE_LINE));
        }
        let n = batch.len();
        let mut used = 0;
        for (req, control) in batch.drain(..) {
            if control {
                side.control_calls += 1;
            } else {
                side.data_calls += 1;
            }
            if used == decided.len() {
                decided.push(Decided::default());
            }
            let dd = &mut decided[used];
            used += 1;
            dd.key.fill(&req.frame);
            dd.key.set_in_port(req.in_port);
            let mut ctl = Control::shared(&me.cache, &mut ports, &mut side.counters, now);
            decide_into(
                app.as_mut(),
                &mut ctl,
                req.frame,
                req.in_port,
                &mut dd.reply,
            );
            if let (Some(r), Some(msg)) = (dd.reply.drop, &dd.reply.message) {
                faults += 1;
                if faults <= LOG_FIRST || faults.is_multiple_of(LOG_EVERY) {
                    tracing::warn!(
                        app = app.name(),
                        slice = me.name.as_str(),
                        reason = r.name(),
                        faults,
                        "sdf app fault, packet dropped: {msg}"
                    );
                }
            }
            // The answer goes straight into its worker's vector (sized for
            // the batch: one allocation per worker and batch); the decision
            // stays in its slot until the batch's installs are done.
            let slot = match outgoing.iter().position(|(w, _)| *w == req.worker) {
                Some(i) => i,
                None => {
                    outgoing.push((req.worker, Vec::with_capacity(n)));
                    outgoing.len() - 1
                }
            };
            let rs = &mut outgoing[slot].1;
            rs.push(Response {
                token: req.token,
                emits: std::mem::take(&mut dd.reply.emits),
                same: None,
                drop: dd.reply.drop,
            });
            dd.answer = (slot, rs.len() - 1);
        }
        if used > 0 {
            answer_batch(
                shared,
                me,
                &mut side,
                &mut decided[..used],
                &mut outgoing,
                &mut replies,
            );
        }
        if t >= next_tick {
            let mut ctl = Control::shared(&me.cache, &mut ports, &mut side.counters, now);
            app.on_tick(&mut ctl);
            *lock(&me.app) = side;
            next_tick = Instant::now() + cfg.tick_every;
        }
    }
}

/// A decided request: its key, the app's reply (its decision to install),
/// and where its answer is in the batch's [`Outgoing`] (which worker's
/// vector, which answer in it).
pub(super) struct Decided {
    key: HeaderKey,
    reply: Reply,
    answer: (usize, usize),
}

impl Default for Decided {
    fn default() -> Decided {
        Decided {
            key: HeaderKey::empty(0),
            reply: Reply::default(),
            answer: (0, 0),
        }
    }
}

/// One stage's answers of a batch: its number, the answers.
pub(super) type Outgoing = (usize, Vec<Response>);

/// Install a batch's decisions (under the cache's lock, taken once per
/// [`INSTALL_CHUNK`] of them), publish the app side's counters, and
/// answer each stage once for the batch, on its channel (`replies`, this
/// thread's copy of [`Shared::replies`], refreshed when a stage it does
/// not know yet asks).
///
/// The installs come after the whole batch was decided, so a decision
/// whose state id a later call of the batch removed (`removed`) is not
/// cached: the cache's install refuses a decision registering a removed
/// id ([`nexthop_sdf::NotCached::StaleState`]), as it refuses one whose
/// id went while the worker's copy of it waited.
fn answer_batch(
    shared: &Shared,
    me: &SliceShared,
    side: &mut AppSide,
    decided: &mut [Decided],
    outgoing: &mut Vec<Outgoing>,
    replies: &mut Vec<Sender<Vec<Response>>>,
) {
    // The workers look frames up under the same lock: it is let go
    // between chunks, so a worker waits for a few installs at most (and
    // spins for them rather than sleeping: `lock_spinning`).
    for chunk in decided.chunks(INSTALL_CHUNK) {
        let mut cache = lock(&me.cache);
        for dd in chunk {
            if let Some(d) = &dd.reply.decision {
                if cache.install(&dd.key, d).is_err() {
                    side.counters.install_errors += 1;
                }
            }
        }
    }
    // Counted before the answers go: a worker that has its answer finds
    // it counted.
    *lock(&me.app) = *side;
    // Only the decision's actions move into the answer; the rest (the
    // mask, the ids) is dropped here, on the thread that allocated it.
    for dd in decided.iter_mut() {
        // A decision with no marks and no state was not cached: the frames
        // that waited for it go back to the app one by one.
        if let Some(d) = &mut dd.reply.decision {
            if !(d.mask.is_empty() && d.states.is_empty()) {
                let (slot, at) = dd.answer;
                if let Some(r) = outgoing.get_mut(slot).and_then(|(_, rs)| rs.get_mut(at)) {
                    r.same = Some(std::mem::take(&mut d.actions));
                }
            }
        }
    }
    for (worker, rs) in outgoing.drain(..) {
        if worker >= replies.len() {
            replies.clone_from(&lock(&shared.replies));
        }
        // A worker that went away does not need its answers.
        if let Some(reply) = replies.get(worker) {
            let _ = reply.send(rs);
        }
    }
}

/// Decisions installed per hold of the cache's lock.
const INSTALL_CHUNK: usize = 16;

/// How long an app thread with nothing to do watches its queues before
/// it sleeps.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(50);

/// Requests an app thread takes from its queues at once (one lock and one
/// clock read per batch).
const APP_BATCH: usize = 64;
