//! Where the live lab's threads run, and the summary's CPU line.

use crate::threadcpu;

/// Where the live lab puts its threads: `Ok((worker CPUs, other CPUs))`
/// (the workers on the last `workers` allowed CPUs, one each; everything
/// else on the rest), or `Err(why not)`.
pub(crate) fn cpu_plan(
    allowed: &[usize],
    workers: usize,
    pin: bool,
) -> Result<(Vec<usize>, Vec<usize>), String> {
    if !pin {
        return Err("--no-pin".into());
    }
    if allowed.len() <= workers {
        return Err(format!(
            "{workers} worker{} and the rest need {} CPUs, {} allowed",
            if workers == 1 { "" } else { "s" },
            workers + 1,
            allowed.len()
        ));
    }
    let split = allowed.len() - workers;
    Ok((allowed[split..].to_vec(), allowed[..split].to_vec()))
}

/// Cores each part of the lab used during the traffic: the summary's
/// `cpu` line and `summary.json`'s `cpu`. The update path is the lab's
/// main thread (it calls the controller's `apply_changes`), the
/// controller's connection threads and the forwarder's follower.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct CpuSplit {
    /// Every thread of the forwarder.
    pub forwarder: f64,
    /// The forwarder's workers together.
    pub workers: f64,
    /// Each worker thread by name (`worker-0`, ...).
    pub worker_threads: Vec<(String, f64)>,
    /// The forwarder's FIB follower.
    pub fib_follower: f64,
    /// The forwarder's other threads.
    pub forwarder_other: f64,
    /// The lab's source thread.
    pub source: f64,
    /// The lab's sink threads together.
    pub sinks: f64,
    /// The update path (the three parts below).
    pub update_path: f64,
    /// The controller's `apply_changes` on the lab's main thread.
    pub controller_apply: f64,
    /// The controller's connection threads.
    pub controller_connections: f64,
}

impl CpuSplit {
    /// Split `cpu` of the lab and the forwarder (`pids`) by part.
    pub fn new(cpu: &[threadcpu::ThreadCores], pids: [i32; 2]) -> CpuSplit {
        use threadcpu::sum_prefix;
        let [lab, fwd] = pids;
        let forwarder: f64 = cpu.iter().filter(|t| t.pid == fwd).map(|t| t.cores).sum();
        let workers = sum_prefix(cpu, fwd, "worker-");
        let fib_follower = sum_prefix(cpu, fwd, "fib-follower");
        CpuSplit {
            forwarder,
            workers,
            worker_threads: cpu
                .iter()
                .filter(|t| t.pid == fwd && t.name.starts_with("worker-"))
                .map(|t| (t.name.clone(), t.cores))
                .collect(),
            fib_follower,
            forwarder_other: (forwarder - workers - fib_follower).max(0.0),
            source: sum_prefix(cpu, lab, "lab-source"),
            sinks: sum_prefix(cpu, lab, "lab-sink-"),
            update_path: update_path_cores(cpu, pids),
            controller_apply: threadcpu::main_thread(cpu, lab),
            controller_connections: sum_prefix(cpu, lab, "ctl-"),
        }
    }

    /// The summary's `cpu` line.
    pub fn line(&self) -> String {
        let workers: Vec<String> = self
            .worker_threads
            .iter()
            .map(|(name, cores)| format!("{name} {cores:.2}"))
            .collect();
        format!(
            "cores during the traffic: forwarder {:.2} (workers {:.2}: {}; fib-follower {:.2}; other {:.2}), \
             lab source {:.2}, sinks {:.2}; update path {:.2} (controller apply on the lab's main thread {:.2}, \
             controller connections {:.2}, fib-follower {:.2})",
            self.forwarder,
            self.workers,
            if workers.is_empty() { "none seen".to_string() } else { workers.join(", ") },
            self.fib_follower,
            self.forwarder_other,
            self.source,
            self.sinks,
            self.update_path,
            self.controller_apply,
            self.controller_connections,
            self.fib_follower,
        )
    }
}

/// Cores of the update path: the lab's main thread (the controller's
/// `apply_changes`), the controller's connection threads and the
/// forwarder's follower.
pub(crate) fn update_path_cores(cpu: &[threadcpu::ThreadCores], pids: [i32; 2]) -> f64 {
    let [lab, fwd] = pids;
    threadcpu::main_thread(cpu, lab)
        + threadcpu::sum_prefix(cpu, lab, "ctl-")
        + threadcpu::sum_prefix(cpu, fwd, "fib-follower")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_plans_give_workers_the_last_cpus_and_the_rest_the_others() {
        assert_eq!(cpu_plan(&[0, 1], 1, true), Ok((vec![1], vec![0])));
        assert_eq!(
            cpu_plan(&[0, 1, 2, 3], 2, true),
            Ok((vec![2, 3], vec![0, 1]))
        );
        assert_eq!(cpu_plan(&[2, 5, 7], 1, true), Ok((vec![7], vec![2, 5])));
        let e = cpu_plan(&[0, 1], 2, true).unwrap_err();
        assert!(e.contains("need 3 CPUs, 2 allowed"), "{e}");
        assert_eq!(cpu_plan(&[0, 1, 2], 1, false), Err("--no-pin".to_string()));
    }

    #[test]
    fn cpu_split_sums_threads_by_part_and_keeps_the_line() {
        let t = |pid: i32, tid: i32, name: &str, cores: f64| threadcpu::ThreadCores {
            pid,
            tid,
            name: name.to_string(),
            cores,
        };
        let cpu = [
            t(10, 10, "nexthop", 0.25),
            t(10, 11, "lab-source", 1.0),
            t(10, 12, "lab-sink-1", 0.5),
            t(10, 13, "lab-sink-2", 0.25),
            t(10, 14, "ctl-conn", 0.125),
            t(20, 21, "worker-0", 1.0),
            t(20, 22, "worker-1", 0.75),
            t(20, 23, "fib-follower", 0.5),
            t(20, 20, "nexthop", 0.25),
        ];
        let s = CpuSplit::new(&cpu, [10, 20]);
        assert_eq!(s.forwarder, 2.5);
        assert_eq!(s.workers, 1.75);
        assert_eq!(s.fib_follower, 0.5);
        assert_eq!(s.forwarder_other, 0.25);
        assert_eq!((s.source, s.sinks), (1.0, 0.75));
        assert_eq!(s.controller_apply, 0.25);
        assert_eq!(s.controller_connections, 0.125);
        assert_eq!(s.update_path, 0.875);
        assert_eq!(s.worker_threads.len(), 2);
        let l = s.line();
        assert!(
            l.contains("forwarder 2.50 (workers 1.75: worker-0 1.00, worker-1 0.75"),
            "{l}"
        );
        assert!(l.contains("update path 0.88"), "{l}");
    }
}
