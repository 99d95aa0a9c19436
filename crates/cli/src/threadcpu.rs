//! Per-thread CPU time of the lab's processes, so every `nexthop lab` run
//! shows where its two cores went: the forwarder's workers, the update
//! path (controller apply, the controller's connection threads, the
//! forwarder's follower) and the lab's own source and sinks.
//!
//! A sample reads `/proc/PID/task/TID/stat` (user + system time) of each
//! thread; the difference of two samples over the wall time between them
//! is the cores each thread used.

use std::collections::HashMap;
use std::time::Instant;

/// CPU seconds per thread (`(pid, tid)` -> (name, seconds)) at one instant.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    at: Instant,
    threads: HashMap<(i32, i32), (String, f64)>,
}

/// Cores one thread used between two samples.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ThreadCores {
    pub pid: i32,
    /// The thread id (equal to `pid` for the process's main thread).
    pub tid: i32,
    pub name: String,
    pub cores: f64,
}

/// Sample every thread of `pids` (processes that exited, or threads that
/// exit while being read, are skipped: a sample is best effort).
pub(crate) fn sample(pids: &[i32]) -> Sample {
    let tps = procfs::ticks_per_second() as f64;
    let mut threads = HashMap::new();
    for &pid in pids {
        let Ok(p) = procfs::process::Process::new(pid) else {
            continue;
        };
        let Ok(tasks) = p.tasks() else { continue };
        for t in tasks.flatten() {
            if let Ok(st) = t.stat() {
                threads.insert((pid, t.tid), (st.comm, (st.utime + st.stime) as f64 / tps));
            }
        }
    }
    Sample {
        at: Instant::now(),
        threads,
    }
}

/// Cores each thread present in both samples used between them, busiest
/// first.
pub(crate) fn between(a: &Sample, b: &Sample) -> Vec<ThreadCores> {
    let secs = b.at.duration_since(a.at).as_secs_f64();
    if secs <= 0.0 {
        return Vec::new();
    }
    let mut v: Vec<ThreadCores> = b
        .threads
        .iter()
        .filter_map(|(k, (name, s1))| {
            let (_, s0) = a.threads.get(k)?;
            Some(ThreadCores {
                pid: k.0,
                tid: k.1,
                name: name.clone(),
                cores: (s1 - s0).max(0.0) / secs,
            })
        })
        .collect();
    v.sort_by(|x, y| y.cores.total_cmp(&x.cores).then(x.name.cmp(&y.name)));
    v
}

/// Cores of the main thread of `pid`.
pub(crate) fn main_thread(v: &[ThreadCores], pid: i32) -> f64 {
    v.iter()
        .filter(|t| t.pid == pid && t.tid == pid)
        .map(|t| t.cores)
        .sum()
}

/// Sum of the cores of the threads whose name starts with `prefix`.
pub(crate) fn sum_prefix(v: &[ThreadCores], pid: i32, prefix: &str) -> f64 {
    v.iter()
        .filter(|t| t.pid == pid && t.name.starts_with(prefix))
        .map(|t| t.cores)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_shows_up_with_its_name_and_about_one_core() {
        let me = std::process::id() as i32;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::Builder::new()
            .name("cpu-test-spin".into())
            .spawn(move || {
                let mut x = 0u64;
                while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let a = sample(&[me]);
        // 60 clock ticks at the usual 100 Hz: a spinning thread gets
        // several of them even on a busy machine.
        std::thread::sleep(std::time::Duration::from_millis(600));
        let b = sample(&[me]);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        let v = between(&a, &b);
        let spin = sum_prefix(&v, me, "cpu-test-spin");
        // One spinning thread: close to a core unless the machine is
        // saturated; never more than one (with clock-tick rounding).
        assert!(
            spin > 0.05 && spin <= 1.1,
            "spin thread used {spin} cores: {v:?}"
        );
        assert_eq!(sum_prefix(&v, me, "no-such-thread"), 0.0);
        // The test thread that sampled is not the process's main thread
        // (tid == pid), and the spinning thread is not either.
        let spin_tid = v.iter().find(|t| t.name == "cpu-test-spin").map(|t| t.tid);
        assert!(spin_tid.is_some_and(|t| t != me), "{v:?}");
        assert!(main_thread(&v, me) < 1.1);
        // A process that does not exist is skipped, not an error.
        assert!(sample(&[i32::MAX]).threads.is_empty());
    }
}
