//! The forwarder's output lines: the progress line of a merged report and
//! the one-line summary of a run (`nexthop run` prints them; scripts and
//! tests read them, so their fields are a contract: `docs/dataplane.md`).

use crate::counters::Counters;
use crate::error::MalformedKind;
use crate::live::{LiveRun, Progress};

/// A progress line: `[  ELAPSEDs] frames_in=.. forwarded=.. dropped=..
/// punted=.. tx_failed=.. ring_drops=.. mpps=..` (that interval's rate).
pub fn progress_line(p: &Progress<'_>) -> String {
    let c = p.counters;
    let secs = p.interval.as_secs_f64();
    let rate = if secs > 0.0 {
        p.interval_frames as f64 / secs / 1e6
    } else {
        0.0
    };
    format!(
        "[{:7.1}s] frames_in={} forwarded={} dropped={} punted={} tx_failed={} ring_drops={} mpps={rate:.3}",
        p.elapsed.as_secs_f64(),
        c.frames_in,
        c.forwarded,
        c.dropped,
        c.punted,
        p.ports.tx_failed_total(),
        p.ports.ring_drops_total(),
    )
}

/// `PORT:N,...` or `-`.
pub fn port_list(it: impl Iterator<Item = (u16, u64)>) -> String {
    let v: Vec<String> = it.map(|(p, n)| format!("{p}:{n}")).collect();
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(",")
    }
}

/// Drops by reason: `action` (drop actions), `miss` (unknown names
/// dropped by the miss policy) and each malformed reason; `-` when none.
pub fn drop_reasons(c: &Counters) -> String {
    let miss = c
        .dropped
        .saturating_sub(c.hits.drop)
        .saturating_sub(c.ttl_expired)
        .saturating_sub(c.malformed.total());
    let mut v: Vec<String> = Vec::new();
    for (name, n) in [
        ("action", c.hits.drop),
        ("miss", miss),
        ("ttl_expired", c.ttl_expired),
    ] {
        if n > 0 {
            v.push(format!("{name}:{n}"));
        }
    }
    for k in MalformedKind::ALL {
        let n = c.malformed.get(k);
        if n > 0 {
            v.push(format!("{}:{n}", k.name()));
        }
    }
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(",")
    }
}

/// The one-line summary of a run (`frames_in=.. in=PORT:N,.. out=PORT:N,..
/// forwarded=.. dropped=.. drops=REASON:N,.. punted=.. misses=.. tx_failed=..
/// ring_drops=.. rx_truncated=.. stopped_by=.. seconds=.. mpps=..`;
/// `docs/dataplane.md` describes each field).
pub fn summary_line(run: &LiveRun) -> String {
    let c = &run.counters;
    format!(
        "frames_in={} in={} out={} forwarded={} dropped={} drops={} punted={} misses={} \
         tx_failed={} ring_drops={} rx_truncated={} stopped_by={} seconds={:.3} mpps={:.3}",
        c.frames_in,
        c.in_list(),
        c.out_list(),
        c.forwarded,
        c.dropped,
        drop_reasons(c),
        c.punted,
        c.misses,
        run.ports.tx_failed_total(),
        run.ports.ring_drops_total(),
        run.ports.rx_truncated_total(),
        run.stopped_by.name(),
        run.elapsed.as_secs_f64(),
        run.mpps()
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::live::{PortStats, StopReason};

    #[test]
    fn drop_reasons_split_actions_misses_and_malformed() {
        assert_eq!(drop_reasons(&Counters::default()), "-");
        let mut c = Counters {
            dropped: 10,
            misses: 7,
            ..Counters::default()
        };
        c.hits.drop = 3;
        assert_eq!(drop_reasons(&c), "action:3,miss:7");
        // The IP pipeline's TTL drops are a reason of their own.
        c.dropped = 12;
        c.ttl_expired = 2;
        assert_eq!(drop_reasons(&c), "action:3,miss:7,ttl_expired:2");
    }

    #[test]
    fn the_summary_line_names_every_field_in_order() {
        let mut c = Counters::with_tx_ports(Some(1));
        c.frames_in = 4;
        c.forwarded = 3;
        c.dropped = 1;
        c.misses = 1;
        c.rx_mut(0).frames = 4;
        for _ in 0..3 {
            c.tx_add(1, 60);
        }
        let run = LiveRun {
            counters: c,
            ports: PortStats {
                tx_failed: vec![(1, 1)],
                ring_drops: vec![(0, 2)],
                rx_truncated: vec![],
            },
            stopped_by: StopReason::Frames,
            elapsed: Duration::from_millis(1500),
            active: Duration::from_secs(1),
        };
        assert_eq!(
            summary_line(&run),
            "frames_in=4 in=0:4 out=1:3 forwarded=3 dropped=1 drops=miss:1 punted=0 misses=1 \
             tx_failed=1 ring_drops=2 rx_truncated=0 stopped_by=packets seconds=1.500 mpps=0.000"
        );
        let p = Progress {
            elapsed: Duration::from_secs(2),
            counters: &run.counters,
            ports: &run.ports,
            interval_frames: 2_000_000,
            interval: Duration::from_secs(1),
        };
        assert_eq!(
            progress_line(&p),
            "[    2.0s] frames_in=4 forwarded=3 dropped=1 punted=0 tx_failed=1 ring_drops=2 mpps=2.000"
        );
    }
}
