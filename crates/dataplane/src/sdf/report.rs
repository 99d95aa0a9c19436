//! The run summaries every SDF run prints, built once for `nexthop sdf
//! run` and for the Python package's `run_pcap`/`run_live` (and so for
//! `python -m nexthop.sdf run`): the offline summary line
//! ([`pcap_summary_line`]), each slice's report ([`SliceReport`]), its
//! summary-line field ([`slice_fields`]), its JSON ([`SliceReport::json`])
//! and its metrics ([`slice_metrics`]).

use super::{SdfCounters, SdfPcapRun, SdfRuntime, SdfStats};
use crate::metrics::MetricsSnapshot;

/// One slice's name, app, what it owns and counters.
#[derive(Clone, Debug)]
pub struct SliceReport {
    /// The slice's name.
    pub name: String,
    /// Its app as the spec names it (a built-in name or an `APP.py`).
    pub app: String,
    /// What it owns: `ports=P,..` or `vlan=V`.
    pub owns: String,
    /// Its stages' SDF counters.
    pub pipeline: SdfCounters,
    /// Its cache's and app side's counters.
    pub stats: SdfStats,
}

impl SliceReport {
    /// The slice in a JSON summary: `name`, `app`, `owns`, `share`,
    /// `pipeline` (its [`SdfCounters`]), `app_calls`, `entries`, `masks`,
    /// `installs`, `evictions`, `revocations`, `app_drops`.
    pub fn json(&self) -> serde_json::Value {
        let s = &self.stats;
        serde_json::json!({
            "name": self.name,
            "app": self.app,
            "owns": self.owns,
            "share": s.capacity,
            "pipeline": self.pipeline,
            "app_calls": s.app.app_calls,
            "entries": s.entries,
            "masks": s.masks,
            "installs": s.cache.installs,
            "evictions": s.cache.evictions,
            "revocations": s.cache.revocations,
            "app_drops": s.app.drops.total(),
        })
    }

    /// Frames of the slice dropped: the pipeline's reasons and the app's.
    pub fn drops(&self) -> u64 {
        self.pipeline.drops.total() + self.stats.app.drops.total()
    }
}

impl SdfRuntime {
    /// Each slice's report, `pipeline` being each slice's SDF counters
    /// (in slice order, as [`SdfRuntime::slice_counters`] or
    /// [`SdfPcapRun::slices`] give them); none for a runtime without
    /// slices ([`SdfRuntime::start`]).
    pub fn slice_reports(&self, pipeline: &[SdfCounters]) -> Vec<SliceReport> {
        self.specs
            .iter()
            .enumerate()
            .map(|(i, spec)| SliceReport {
                name: spec.name.clone(),
                app: spec.app.clone(),
                owns: spec.matcher.to_string(),
                pipeline: pipeline.get(i).copied().unwrap_or_default(),
                stats: self.slice_stats(i).unwrap_or_default(),
            })
            .collect()
    }
}

/// The offline summary line: `frames_in=N forwarded=N out=PORT:N,...|-
/// dropped=N punted=N hits=N misses=N app_calls=N pending_waits=N
/// installs=N revocations=N entries=N masks=N app_drops=REASON:N,...|-
/// control_calls=N no_slice=N`, then [`slice_fields`].
pub fn pcap_summary_line(run: &SdfPcapRun, stats: &SdfStats, slices: &[SliceReport]) -> String {
    let c = &run.counters;
    format!(
        "frames_in={} forwarded={} out={} dropped={} punted={} hits={} misses={} app_calls={} \
         pending_waits={} installs={} revocations={} entries={} masks={} app_drops={} \
         control_calls={} no_slice={}{}",
        c.frames_in,
        c.forwarded,
        c.out_list(),
        c.dropped,
        c.punted,
        run.sdf.hits,
        run.sdf.misses,
        stats.app.app_calls,
        run.sdf.pending_waits,
        stats.cache.installs,
        stats.cache.revocations,
        stats.entries,
        stats.masks,
        app_drops(stats),
        stats.control_calls,
        run.sdf.drops.no_slice,
        slice_fields(slices),
    )
}

/// App-side drops with their reasons (`REASON:N,...`), `-` when none.
pub fn app_drops(stats: &SdfStats) -> String {
    let v: Vec<String> = stats
        .app
        .drops
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{}:{n}", r.name()))
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// ` slice.NAME=hits:N,misses:N,app_calls:N,entries:N,share:N,evictions:N,drops:N`
/// per slice (nothing without slices).
pub fn slice_fields(slices: &[SliceReport]) -> String {
    slices
        .iter()
        .map(|s| {
            format!(
                " slice.{}=hits:{},misses:{},app_calls:{},entries:{},share:{},evictions:{},drops:{}",
                s.name,
                s.pipeline.hits,
                s.pipeline.misses,
                s.stats.app.app_calls,
                s.stats.entries,
                s.stats.capacity,
                s.stats.cache.evictions,
                s.drops(),
            )
        })
        .collect()
}

/// `m` with each slice's counters (`nexthop_sdf_slice_*{slice="NAME"}`).
pub fn slice_metrics(mut m: MetricsSnapshot, slices: &[SliceReport]) -> MetricsSnapshot {
    for s in slices {
        let l = [("slice", s.name.as_str())];
        m = m
            .with_counter(
                "sdf_slice_hits_total",
                "Frames a slice's cache answered.",
                &l,
                s.pipeline.hits,
            )
            .with_counter(
                "sdf_slice_misses_total",
                "Frames a slice's cache missed.",
                &l,
                s.pipeline.misses,
            )
            .with_counter(
                "sdf_slice_app_calls_total",
                "Packets a slice's app decided.",
                &l,
                s.stats.app.app_calls,
            )
            .with_counter(
                "sdf_slice_evictions_total",
                "Decisions evicted from a slice's cache.",
                &l,
                s.stats.cache.evictions,
            )
            .with_counter(
                "sdf_slice_drops_total",
                "Frames of a slice dropped (pipeline and app reasons).",
                &l,
                s.drops(),
            )
            .with_gauge(
                "sdf_slice_entries",
                "Decisions in a slice's cache now.",
                &l,
                s.stats.entries as f64,
            )
            .with_gauge(
                "sdf_slice_share",
                "A slice's share of the cache (entries).",
                &l,
                s.stats.capacity as f64,
            );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_slices() -> Vec<SliceReport> {
        let mut stats = SdfStats {
            entries: 3,
            capacity: 100,
            ..SdfStats::default()
        };
        stats.app.app_calls = 2;
        stats.cache.evictions = 9;
        let pipeline = SdfCounters {
            hits: 5,
            misses: 2,
            ..SdfCounters::default()
        };
        vec![
            SliceReport {
                name: "a".into(),
                app: "l2switch".into(),
                owns: "ports=1,2".into(),
                pipeline,
                stats,
            },
            SliceReport {
                name: "b".into(),
                app: "apps/l2switch.py".into(),
                owns: "vlan=10".into(),
                pipeline: SdfCounters::default(),
                stats: SdfStats::default(),
            },
        ]
    }

    #[test]
    fn each_slice_has_its_labelled_metrics_summary_field_and_json() {
        let slices = two_slices();
        let text = slice_metrics(MetricsSnapshot::default(), &slices).to_prometheus_text();
        for want in [
            "nexthop_sdf_slice_hits_total{slice=\"a\"} 5",
            "nexthop_sdf_slice_misses_total{slice=\"a\"} 2",
            "nexthop_sdf_slice_app_calls_total{slice=\"a\"} 2",
            "nexthop_sdf_slice_evictions_total{slice=\"a\"} 9",
            "nexthop_sdf_slice_entries{slice=\"a\"} 3",
            "nexthop_sdf_slice_share{slice=\"a\"} 100",
            "nexthop_sdf_slice_hits_total{slice=\"b\"} 0",
        ] {
            assert!(text.contains(want), "no {want:?} in\n{text}");
        }
        assert_eq!(
            slice_fields(&slices),
            " slice.a=hits:5,misses:2,app_calls:2,entries:3,share:100,evictions:9,drops:0 \
             slice.b=hits:0,misses:0,app_calls:0,entries:0,share:0,evictions:0,drops:0"
        );
        assert_eq!(slice_fields(&[]), "");
        let j = slices[0].json();
        assert_eq!(j["owns"], "ports=1,2");
        assert_eq!(j["share"], 100);
        assert_eq!(j["pipeline"]["hits"], 5);
        assert_eq!(slices[1].json()["app"], "apps/l2switch.py");
    }

    #[test]
    fn the_offline_line_lists_outputs_drops_and_slices_or_says_none() {
        let mut run = SdfPcapRun {
            counters: crate::Counters::default(),
            sdf: SdfCounters::default(),
            slices: Vec::new(),
            elapsed: std::time::Duration::ZERO,
            stopped_by: Vec::new(),
            unanswered: 0,
            outputs: Vec::new(),
        };
        let mut stats = SdfStats::default();
        let line = pcap_summary_line(&run, &stats, &[]);
        assert!(line.starts_with("frames_in=0 forwarded=0 out=- "), "{line}");
        assert!(line.contains(" app_drops=- "), "{line}");
        assert!(line.ends_with(" no_slice=0"), "{line}");
        run.sdf.drops.no_slice = 4;
        stats.app.drops.add(nexthop_sdf::app::DropReason::AppError);
        let line = pcap_summary_line(&run, &stats, &two_slices());
        assert!(line.contains(" app_drops=app_error:1 "), "{line}");
        assert!(line.contains(" no_slice=4 slice.a=hits:5,"), "{line}");
        assert!(!line.contains("  "), "{line}");
    }
}
