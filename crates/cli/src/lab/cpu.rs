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

/// The summary's `cpu` line: cores each part of the lab used during the
/// traffic (`pids`: the lab, the forwarder). The update path is the lab's
/// main thread (it calls the controller's `apply_changes`), the
/// controller's connection threads and the forwarder's follower.
pub(crate) fn cpu_line(cpu: &[threadcpu::ThreadCores], pids: [i32; 2]) -> String {
    use threadcpu::sum_prefix;
    let [lab, fwd] = pids;
    let workers: Vec<String> = cpu
        .iter()
        .filter(|t| t.pid == fwd && t.name.starts_with("worker-"))
        .map(|t| format!("{} {:.2}", t.name, t.cores))
        .collect();
    let fwd_all: f64 = cpu.iter().filter(|t| t.pid == fwd).map(|t| t.cores).sum();
    let worker = sum_prefix(cpu, fwd, "worker-");
    let follower = sum_prefix(cpu, fwd, "fib-follower");
    let apply = threadcpu::main_thread(cpu, lab);
    let ctl = sum_prefix(cpu, lab, "ctl-");
    format!(
        "cores during the traffic: forwarder {:.2} (workers {worker:.2}: {}; fib-follower {follower:.2}; other {:.2}), \
         lab source {:.2}, sinks {:.2}; update path {:.2} (controller apply on the lab's main thread {apply:.2}, \
         controller connections {ctl:.2}, fib-follower {follower:.2})",
        fwd_all,
        if workers.is_empty() { "none seen".to_string() } else { workers.join(", ") },
        (fwd_all - worker - follower).max(0.0),
        sum_prefix(cpu, lab, "lab-source"),
        sum_prefix(cpu, lab, "lab-sink-"),
        update_path_cores(cpu, pids),
    )
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
}
