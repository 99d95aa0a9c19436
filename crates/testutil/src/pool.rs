//! Long-lived worker threads, each pinned to its own CPU, for multi-core
//! benchmarks.
//!
//! A forwarder's workers live for the whole run, each on its own core, and
//! poll for work. A benchmark that spawns threads for every timed call
//! measures their start as well: in the lookup benchmark on the 2-vCPU VM,
//! two scoped threads spawned per 2,000,000-address call read 1.06–1.58×
//! one thread, where the same lookups on [`Pool`]'s polling workers read
//! 1.96–2.06× (docs/benchmarks.md, "LPM on two cores"). So the lookup
//! benchmark runs its multi-thread rows on a `Pool`.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

/// A job every worker runs with its worker index.
type Job = dyn Fn(usize) + Sync;

/// A job pointer with its lifetime erased (see [`Pool::run`]).
#[derive(Clone, Copy)]
struct JobPtr(*const Job);

// SAFETY: 1. The pointee is `Sync`, so calling it through a shared
// reference from another thread is sound. 2. `Pool::run` keeps it alive
// (it borrows it) until every helper has finished with the pointer.
unsafe impl Send for JobPtr {}

struct Shared {
    /// Bumped once per job; helpers run a job when it changes.
    generation: AtomicU64,
    /// Helpers done with the current job.
    done: AtomicUsize,
    /// Whether a helper's job panicked since the last check.
    panicked: AtomicBool,
    job: Mutex<Option<JobPtr>>,
    stop: AtomicBool,
}

/// `threads` workers that run one job at a time together: the calling
/// thread (worker 0) and `threads - 1` helper threads. Each is pinned to
/// its own CPU (the CPUs this process may use, in order, round robin when
/// there are fewer than `threads`). The helpers busy-poll for work, like a
/// forwarder's lcores: no thread is spawned or woken inside a timed call,
/// and each helper keeps its core fully busy while the pool lives. The
/// calling thread stays pinned until the pool is dropped, which restores
/// its previous CPU set.
pub struct Pool {
    shared: Arc<Shared>,
    helpers: Vec<JoinHandle<()>>,
    restore: Option<Vec<usize>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads())
            .finish()
    }
}

impl Pool {
    /// A pool of `threads` workers (at least 1).
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let cpus = affinity::allowed().unwrap_or_default();
        let cpu = |w: usize| (!cpus.is_empty()).then(|| cpus[w % cpus.len()]);
        let restore = match cpu(0) {
            Some(c) if affinity::pin(c).is_ok() => Some(cpus.clone()),
            _ => None,
        };
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            job: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let helpers = (1..threads)
            .map(|w| {
                let shared = Arc::clone(&shared);
                let c = cpu(w);
                std::thread::Builder::new()
                    .name(format!("pool-{w}"))
                    .spawn(move || {
                        if let Some(c) = c {
                            // Unpinned if refused: still correct, only slower.
                            let _ = affinity::pin(c);
                        }
                        helper(&shared, w);
                    })
                    .expect("spawn a pool thread")
            })
            .collect();
        Pool {
            shared,
            helpers,
            restore,
        }
    }

    /// Workers in all (the calling thread included).
    pub fn threads(&self) -> usize {
        self.helpers.len() + 1
    }

    /// Run `job(w)` on every worker `w` in `0..threads()` at once (worker 0
    /// on the calling thread); returns when all have finished. A panic in
    /// any worker's job is raised here once all have finished.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        let s = &*self.shared;
        // SAFETY: only the lifetime bound changes (same fat pointer). The
        // helpers call the job only between the generation bump below and
        // their `done` increment, and this function does not return (nor
        // unwind: the caller's part runs under `catch_unwind`) before
        // every helper's increment, after which the slot is cleared; so
        // the job outlives every use of the pointer.
        let erased: *const Job =
            unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const Job>(job) };
        s.done.store(0, Ordering::Relaxed);
        *s.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(JobPtr(erased));
        s.generation.fetch_add(1, Ordering::Release);
        let mine = catch_unwind(AssertUnwindSafe(|| job(0)));
        while s.done.load(Ordering::Acquire) < self.helpers.len() {
            std::hint::spin_loop();
        }
        *s.job.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if let Err(e) = mine {
            resume_unwind(e);
        }
        if s.panicked.swap(false, Ordering::AcqRel) {
            panic!("a pool worker's job panicked");
        }
    }
}

/// A helper's loop: poll the generation, run each new job once.
fn helper(s: &Shared, w: usize) {
    let mut seen = 0;
    while !s.stop.load(Ordering::Acquire) {
        let g = s.generation.load(Ordering::Acquire);
        if g == seen {
            std::hint::spin_loop();
            continue;
        }
        seen = g;
        let job = *s.job.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(JobPtr(p)) = job {
            // SAFETY: `run` published `p` before bumping the generation and
            // keeps its job alive until this helper's `done` increment
            // below (see the SAFETY note in `run`).
            let f = unsafe { &*p };
            if catch_unwind(AssertUnwindSafe(|| f(w))).is_err() {
                s.panicked.store(true, Ordering::Release);
            }
        }
        s.done.fetch_add(1, Ordering::Release);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for h in self.helpers.drain(..) {
            let _ = h.join();
        }
        if let Some(cpus) = self.restore.take() {
            let _ = affinity::set(&cpus);
        }
    }
}

/// Thread pinning: `nexthop_mem::affinity` on Linux (the forwarder's own),
/// none elsewhere (the workers run where the system puts them).
mod affinity {
    use std::io;

    /// The CPUs this thread may run on, in order.
    pub fn allowed() -> io::Result<Vec<usize>> {
        #[cfg(target_os = "linux")]
        return nexthop_mem::affinity::allowed_cpus();
        #[cfg(not(target_os = "linux"))]
        Ok(Vec::new())
    }

    /// Pin this thread to `cpu`.
    pub fn pin(cpu: usize) -> io::Result<()> {
        set(&[cpu])
    }

    /// Let this thread run on `cpus`.
    pub fn set(cpus: &[usize]) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        return nexthop_mem::affinity::pin_current_thread(cpus);
        #[cfg(not(target_os = "linux"))]
        {
            let _ = cpus;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_runs_every_job_once_on_borrowed_data() {
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads);
            assert_eq!(pool.threads(), threads);
            let counts: Vec<AtomicUsize> = (0..threads).map(|_| AtomicUsize::new(0)).collect();
            let data: Vec<u64> = (0..1000).collect();
            let sums: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
            for _ in 0..200 {
                pool.run(&|w| {
                    counts[w].fetch_add(1, Ordering::Relaxed);
                    let part = data.chunks(data.len().div_ceil(threads)).nth(w);
                    let s: u64 = part.map_or(0, |p| p.iter().sum());
                    sums[w].fetch_add(s, Ordering::Relaxed);
                });
            }
            for c in &counts {
                assert_eq!(c.load(Ordering::Relaxed), 200);
            }
            let total: u64 = sums.iter().map(|s| s.load(Ordering::Relaxed)).sum();
            assert_eq!(total, 200 * (0..1000u64).sum::<u64>());
        }
    }

    #[test]
    fn a_helper_panic_is_raised_by_run_and_the_pool_goes_on() {
        let pool = Pool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(&|w| assert_ne!(w, 1, "helper fails"));
        }));
        assert!(r.is_err());
        let ran = AtomicUsize::new(0);
        pool.run(&|_| {
            ran.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(ran.load(Ordering::Relaxed), 2);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn workers_run_on_their_own_cpus_and_the_caller_is_released() {
        let before = affinity::allowed().unwrap();
        {
            let pool = Pool::new(2);
            let on: Vec<AtomicUsize> = (0..2).map(|_| AtomicUsize::new(usize::MAX)).collect();
            pool.run(&|w| {
                // SAFETY: sched_getcpu takes no arguments and only reads
                // the calling thread's state.
                let c = unsafe { libc::sched_getcpu() };
                on[w].store(c as usize, Ordering::Relaxed);
            });
            let want: Vec<usize> = (0..2).map(|w| before[w % before.len()]).collect();
            let got: Vec<usize> = on.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            assert_eq!(got, want);
        }
        assert_eq!(affinity::allowed().unwrap(), before);
    }
}
