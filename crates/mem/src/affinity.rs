//! CPU affinity for lookup threads (Linux `sched_setaffinity`).
//!
//! A forwarder measured "per worker core" needs its workers on cores of
//! their own, as DPDK and VPP deployments pin their workers to isolated
//! lcores and keep the control plane on the main one. `nexthop run
//! --worker-cpus LIST --control-cpus LIST` pins each worker thread to one
//! CPU of its list and every other thread (the follower that applies FIB
//! deltas, metrics, the main thread) to the control list; `nexthop lab`
//! uses it to put the workers on their own cores and everything else of
//! the lab on the rest; `nexthop_testutil::Pool` pins the benchmarks'
//! workers with it.
// FFI to sched_{get,set}affinity and libc's CPU-set helpers; each block
// states its invariant.
#![allow(unsafe_code)]

use std::io;

/// Parse a CPU list as Linux writes them: `0`, `0,2`, `1-3`, `0,4-7`.
/// Each CPU once, in the order given. A clear message for anything else.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    let num = |t: &str| -> Result<usize, String> {
        let t = t.trim();
        let n: usize = t
            .parse()
            .map_err(|_| format!("{t:?} is not a CPU number"))?;
        if n >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "CPU {n} is beyond the {} a CPU set holds",
                libc::CPU_SETSIZE
            ));
        }
        Ok(n)
    };
    if s.trim().is_empty() {
        return Err("empty CPU list".into());
    }
    for part in s.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(part)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("CPU range {lo}-{hi} runs backwards"));
        }
        for c in lo..=hi {
            if out.contains(&c) {
                return Err(format!("CPU {c} is listed twice"));
            }
            out.push(c);
        }
    }
    Ok(out)
}

/// The CPUs this thread may run on (ascending).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a valid, writable
    // cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c < CPU_SETSIZE`, inside the set's bits.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Restrict the calling thread to `cpus` (threads it creates afterwards
/// inherit the set). The set may be wider than the thread's current one
/// (within the process's cpuset); a CPU that is not online or not
/// permitted is an error that names it.
pub fn pin_current_thread(cpus: &[usize]) -> io::Result<()> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
    if cpus.is_empty() {
        return Err(invalid("empty CPU list".into()));
    }
    if let Some(c) = cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(invalid(format!(
            "CPU {c} is beyond the {} a CPU set holds",
            libc::CPU_SETSIZE
        )));
    }
    // SAFETY: as in `allowed_cpus`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: `c < CPU_SETSIZE` (checked above), so the bit lies
        // inside the set.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of
    // the size passed, only read by the call.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "CPUs {} are not available: {e} (none of them online and permitted)",
                format_cpu_list(cpus)
            ),
        ));
    }
    // The kernel keeps the permitted part of a mask: check it kept all.
    let now = allowed_cpus()?;
    if let Some(c) = cpus.iter().find(|c| !now.contains(c)) {
        return Err(invalid(format!(
            "CPU {c} is not available (not online or not permitted; pinned to {} instead)",
            format_cpu_list(&now)
        )));
    }
    Ok(())
}

/// A CPU list in Linux's compact form (`0-2,5`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_linux_writes_them() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("3,1"), Ok(vec![3, 1]));
        assert_eq!(parse_cpu_list("0,2-4"), Ok(vec![0, 2, 3, 4]));
        assert_eq!(parse_cpu_list(" 1 - 2 "), Ok(vec![1, 2]));
        for bad in [
            "", " ", "a", "1,", ",1", "1-", "3-1", "1,1", "0-2,2", "-1", "99999",
        ] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(format_cpu_list(&[5, 0, 1, 2]), "0-2,5");
        assert_eq!(format_cpu_list(&[]), "");
        for s in ["0", "0-3", "1,3,5-6"] {
            assert_eq!(format_cpu_list(&parse_cpu_list(s).unwrap()), s);
        }
    }

    #[test]
    fn a_pinned_thread_reads_back_its_cpu_and_refuses_foreign_ones() {
        let allowed = allowed_cpus().unwrap();
        assert!(!allowed.is_empty());
        let last = *allowed.last().unwrap();
        let got = std::thread::spawn(move || {
            pin_current_thread(&[last]).unwrap();
            let mine = allowed_cpus().unwrap();
            // A thread it creates inherits the set.
            let child = std::thread::spawn(|| allowed_cpus().unwrap())
                .join()
                .unwrap();
            (mine, child)
        })
        .join()
        .unwrap();
        assert_eq!(got, (vec![last], vec![last]));
        // A pinned thread may widen its set again (the lab does, to start
        // the forwarder with every CPU).
        let a2 = allowed.clone();
        let widened = std::thread::spawn(move || {
            pin_current_thread(&[a2[0]]).unwrap();
            pin_current_thread(&a2).unwrap();
            allowed_cpus().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(widened, allowed);
        // This thread kept its set.
        assert_eq!(allowed_cpus().unwrap(), allowed);
        let beyond = libc::CPU_SETSIZE as usize - 1;
        if !allowed.contains(&beyond) {
            let e = std::thread::spawn(move || pin_current_thread(&[beyond]))
                .join()
                .unwrap()
                .unwrap_err();
            assert!(e.to_string().contains("not available"), "{e}");
        }
        assert!(pin_current_thread(&[]).is_err());
    }
}
