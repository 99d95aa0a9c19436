//! Thread CPU time for benchmarks and probes.

/// CPU seconds this thread has run. Benchmarks time with it because the
/// machines are shared: time spent descheduled is not counted (on an idle
/// machine it equals wall time). Off Unix, seconds since the first call.
#[cfg(unix)]
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: 1. `ts` is a valid, writable timespec for the call's duration.
    // 2. CLOCK_THREAD_CPUTIME_ID exists on every supported Unix; a failure
    // is reported by the return value, checked below, and `ts` is then not
    // read.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Seconds since the first call (no per-thread clock off Unix).
#[cfg(not(unix))]
pub fn thread_cpu_secs() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_advances_with_work_and_not_with_sleep() {
        let t0 = thread_cpu_secs();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let t1 = thread_cpu_secs();
        assert!(t1 > t0, "no CPU time counted for a busy loop ({x})");
        if cfg!(unix) {
            std::thread::sleep(std::time::Duration::from_millis(200));
            let t2 = thread_cpu_secs();
            assert!(t2 - t1 < 0.1, "sleeping counted as CPU time: {}", t2 - t1);
        }
    }
}
