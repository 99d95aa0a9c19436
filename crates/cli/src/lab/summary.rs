//! `summary.json`: every figure of the lab's text summary, written beside
//! the other files of the run (`--out`), for scripts
//! (`scripts/lab-rounds.sh`) instead of scraping the text.
//!
//! Figures a variant does not measure are `null` (the pcap variant has no
//! source, sinks or CPU split; `--trivial` checks no frame, so
//! `misforwarded` is `null`).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use super::cpu::CpuSplit;
use super::phases::PhasesSummary;

/// The whole summary.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Summary {
    /// `live` (namespaces) or `pcap` (offline).
    pub variant: &'static str,
    /// Whether the run passed its checks (the exit status).
    pub ok: bool,
    /// Wall seconds of the whole run.
    pub seconds: f64,
    /// Seed of names, actions and changes.
    pub seed: u64,
    /// The FIB.
    pub fib: FibPart,
    /// The traffic source (live).
    pub source: Option<SourcePart>,
    /// The forwarder.
    pub forwarder: ForwarderPart,
    /// Frames received per output port (sinks, or pcap files).
    pub ports: BTreeMap<u16, u64>,
    /// Frames of all output ports.
    pub delivered: u64,
    /// Frames the sinks' rings dropped (live).
    pub sink_ring_drops: Option<u64>,
    /// Frames on a port their name's actions never named (`null`: not
    /// checked, `--trivial`).
    pub misforwarded: Option<u64>,
    /// Route changes.
    pub updates: UpdatesPart,
    /// Controller change to forwarder acknowledgement (live).
    pub propagation: Option<PropagationPart>,
    /// Whether every delta was acknowledged after the traffic (live).
    pub converged: Option<bool>,
    /// Cores during the traffic (live).
    pub cpu: Option<CpuSplit>,
    /// `--alternate` phases.
    pub phases: Option<PhasesSummary>,
    /// The final wave (live).
    pub final_wave: Option<FinalWavePart>,
}

/// The FIB's size and where its final state is.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct FibPart {
    /// Traffic names.
    pub names: usize,
    /// Names added live.
    pub added: usize,
    /// Names deleted live.
    pub deleted: usize,
    /// Bytes of the data-plane arrays.
    pub data_plane_bytes: u64,
    /// Data-plane bits per name.
    pub bits_per_name: f64,
    /// The FIB directory (`OUT/fib`).
    pub dir: String,
    /// Its generation at the start (what the controller served first).
    pub initial_generation: u64,
    /// Its generation at the end, holding every change of the run (`null`
    /// when the run stopped before saving it).
    pub final_generation: Option<u64>,
}

/// What the source sent during the traffic.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct SourcePart {
    /// Frames sent.
    pub frames: u64,
    /// Bytes per frame.
    pub frame_bytes: usize,
    /// Seconds of traffic.
    pub seconds: f64,
    /// Frames offered per second, in millions.
    pub offered_mpps: f64,
    /// Frames the kernel refused.
    pub refused: u64,
}

/// The forwarder's counters.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ForwarderPart {
    /// Worker threads.
    pub workers: usize,
    /// Frames it received during the traffic (metrics before and after).
    pub traffic_frames_in: Option<u64>,
    /// `traffic_frames_in` per second of traffic, in millions: the
    /// forwarding rate.
    pub traffic_mpps: Option<f64>,
    /// `traffic_mpps` per second of worker CPU time.
    pub traffic_mpps_per_worker_cpu: Option<f64>,
    /// Frames received over its whole run (its summary line's `frames_in`).
    pub frames_in: Option<u64>,
    /// Seconds of its whole run, idle time before and after the traffic
    /// included (its summary line's `seconds`).
    pub run_seconds: Option<f64>,
    /// `frames_in / run_seconds` in millions (its summary line's `mpps`,
    /// what `forwarder.out` prints): lower than `traffic_mpps` because it
    /// counts idle time.
    pub run_mpps: Option<f64>,
    /// Frames forwarded.
    pub forwarded: Option<u64>,
    /// Frames dropped.
    pub dropped: Option<u64>,
    /// Frames punted to the controller.
    pub punted: Option<u64>,
    /// Frames its rings dropped.
    pub ring_drops: Option<u64>,
    /// FIB deltas it applied.
    pub fib_deltas: Option<u64>,
    /// FIB messages it rejected.
    pub fib_rejects: Option<u64>,
    /// Frames per second through the pipeline alone (pcap variant), in
    /// millions.
    pub pipeline_mpps: Option<f64>,
}

/// The route changes of the run.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct UpdatesPart {
    /// Changes applied.
    pub changes: usize,
    /// Seconds over which they were applied.
    pub seconds: f64,
    /// Changes per second.
    pub per_second: f64,
    /// Microseconds of the controller's `apply_changes` per change (live).
    pub apply_us_each: Option<f64>,
    /// Deltas the controller pushed.
    pub deltas: Option<u64>,
}

/// Propagation from a controller change to the forwarder's Ack.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct PropagationPart {
    /// Median, microseconds.
    pub median_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Maximum, microseconds.
    pub max_us: f64,
    /// Changes measured.
    pub samples: u64,
}

/// The final wave: one frame per sampled name after the changes.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct FinalWavePart {
    /// Names sent one frame each.
    pub names: usize,
    /// Frames per second of the wave.
    pub rate: f64,
    /// Names whose frame arrived on exactly its final ports.
    pub exact: usize,
    /// Names seen on a port their final action does not name.
    pub wrong: usize,
    /// Names whose frame did not arrive on every port.
    pub lost: usize,
    /// Frames the forwarder received during the wave (settled counters
    /// before and after it; `null` when its metrics did not settle).
    pub forwarder_received: Option<u64>,
    /// Frames its rings dropped during the wave.
    pub forwarder_ring_drops: Option<u64>,
}

impl Summary {
    /// Write `dir/summary.json` (pretty, one trailing newline), and with
    /// `stdout` also print it there (`nexthop lab --json`).
    pub fn write(&self, dir: &Path, stdout: bool) -> Result<()> {
        let path = dir.join("summary.json");
        let mut json = serde_json::to_string_pretty(self).context("encoding summary.json")?;
        json.push('\n');
        fs::write(&path, &json).with_context(|| format!("{}: cannot write", path.display()))?;
        if stdout {
            print!("{json}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_json_names_every_part_and_nulls_what_was_not_measured() {
        let mut s = Summary {
            variant: "pcap",
            ok: true,
            seed: 7,
            ..Summary::default()
        };
        s.ports.insert(3, 42);
        s.fib.final_generation = Some(2);
        let t = tempfile::tempdir().unwrap();
        s.write(t.path(), false).unwrap();
        let text = fs::read_to_string(t.path().join("summary.json")).unwrap();
        assert!(text.ends_with("}\n"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for k in [
            "variant",
            "ok",
            "seconds",
            "seed",
            "fib",
            "source",
            "forwarder",
            "ports",
            "delivered",
            "sink_ring_drops",
            "misforwarded",
            "updates",
            "propagation",
            "converged",
            "cpu",
            "phases",
            "final_wave",
        ] {
            assert!(v.get(k).is_some(), "{k} missing: {text}");
        }
        assert_eq!(v["variant"], "pcap");
        assert_eq!(v["ports"]["3"], 42);
        assert_eq!(v["fib"]["final_generation"], 2);
        assert!(v["source"].is_null() && v["cpu"].is_null());
        assert!(v["forwarder"]["traffic_mpps"].is_null());
    }
}
