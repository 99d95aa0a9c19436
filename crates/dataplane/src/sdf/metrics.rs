//! The SDF counters on the Prometheus endpoint (`nexthop_sdf_*`), for
//! every live SDF run that serves `--metrics`: `nexthop sdf run` with a
//! built-in app and the Python package's `run_live` (a Python app).

#[cfg(target_os = "linux")]
use std::time::Duration;

use nexthop_sdf::app::DropReason;

#[cfg(target_os = "linux")]
use super::SdfRuntime;
use super::{SdfCounters, SdfStats};
#[cfg(target_os = "linux")]
use crate::live::PortStats;
use crate::metrics::MetricsSnapshot;
#[cfg(target_os = "linux")]
use crate::Counters;

/// The snapshot of a live run: its frame and port counters, its uptime and
/// `rt`'s SDF counters (every stage's as last published, the cache's and
/// the app side's), as [`sdf_metrics`] names them, and each slice's
/// ([`slice_metrics`](super::slice_metrics); none without slices).
#[cfg(target_os = "linux")]
pub fn sdf_snapshot(
    rt: &SdfRuntime,
    c: &Counters,
    ports: &PortStats,
    elapsed: Duration,
) -> MetricsSnapshot {
    let m = sdf_metrics(
        MetricsSnapshot::from_counters(c)
            .with_port_stats(ports)
            .with_uptime(elapsed),
        &rt.stage_counters(),
        &rt.stats(),
    );
    super::slice_metrics(m, &rt.slice_reports(&rt.slice_counters()))
}

/// `m` with the SDF counters added (`nexthop_sdf_*`; `docs/dataplane.md`,
/// "The SDF pipeline", lists them).
pub fn sdf_metrics(m: MetricsSnapshot, sdf: &SdfCounters, stats: &SdfStats) -> MetricsSnapshot {
    let k = &stats.cache;
    let mut m = m
        .with_counter(
            "sdf_hits_total",
            "Frames the decision cache answered, by level.",
            &[("level", "front")],
            k.front_hits,
        )
        .with_counter(
            "sdf_hits_total",
            "Frames the decision cache answered, by level.",
            &[("level", "wildcard")],
            k.wildcard_hits,
        )
        .with_counter(
            "sdf_misses_total",
            "Frames the decision cache missed.",
            &[],
            sdf.misses,
        )
        .with_counter(
            "sdf_app_calls_total",
            "Packets the app decided.",
            &[],
            stats.app.app_calls,
        )
        .with_counter(
            "sdf_pending_waits_total",
            "Misses that waited for a decision already in flight.",
            &[],
            sdf.pending_waits,
        )
        .with_counter(
            "sdf_installs_total",
            "Decisions installed in the cache.",
            &[],
            k.installs,
        )
        .with_counter(
            "sdf_revocations_total",
            "Cached decisions revoked by a removed state id.",
            &[],
            k.revocations,
        )
        .with_counter(
            "sdf_evictions_total",
            "Cached decisions evicted (LRU).",
            &[],
            k.evictions,
        )
        .with_gauge(
            "sdf_entries",
            "Cached decisions now.",
            &[],
            stats.entries as f64,
        )
        .with_gauge(
            "sdf_masks",
            "Wildcard masks (subtables) now.",
            &[],
            stats.masks as f64,
        )
        .with_counter(
            "sdf_control_requests_total",
            "Misses sent to the app's control queue.",
            &[],
            sdf.control_requests,
        )
        .with_counter(
            "sdf_control_calls_total",
            "Requests the app took from its control queue.",
            &[],
            stats.control_calls,
        );
    for (reason, n) in sdf.drops.named() {
        m = m.with_counter(
            "sdf_drops_total",
            "Frames the SDF pipeline dropped, by reason.",
            &[("reason", reason)],
            n,
        );
    }
    for r in DropReason::ALL {
        m = m.with_counter(
            "sdf_app_drops_total",
            "Packets dropped for a fault of the app's decision, by reason.",
            &[("reason", r.name())],
            stats.app.drops.get(r),
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdf::SdfDrops;

    #[test]
    fn sdf_metrics_export_every_counter_with_its_labels() {
        let sdf = SdfCounters {
            misses: 3,
            pending_waits: 2,
            drops: SdfDrops {
                queue_full: 5,
                ..SdfDrops::default()
            },
            ..SdfCounters::default()
        };
        let mut stats = SdfStats::default();
        stats.cache.front_hits = 7;
        stats.cache.wildcard_hits = 11;
        stats.cache.installs = 4;
        stats.cache.revocations = 1;
        stats.app.app_calls = 3;
        stats.entries = 2;
        stats.masks = 1;
        let m = sdf_metrics(MetricsSnapshot::default(), &sdf, &stats);
        let text = m.to_prometheus_text();
        for want in [
            "nexthop_sdf_hits_total{level=\"front\"} 7",
            "nexthop_sdf_hits_total{level=\"wildcard\"} 11",
            "nexthop_sdf_misses_total 3",
            "nexthop_sdf_app_calls_total 3",
            "nexthop_sdf_pending_waits_total 2",
            "nexthop_sdf_installs_total 4",
            "nexthop_sdf_revocations_total 1",
            "nexthop_sdf_entries 2",
            "nexthop_sdf_masks 1",
            "nexthop_sdf_drops_total{reason=\"queue_full\"} 5",
            "nexthop_sdf_app_drops_total{reason=\"unknown_port\"} 0",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
        assert_eq!(text.matches("# TYPE nexthop_sdf_hits_total").count(), 1);
        let back = MetricsSnapshot::from_json(&m.to_json()).unwrap();
        assert_eq!(back.extra.len(), m.extra.len());
    }
}
