//! `nexthop lab --alternate SECS`: the traffic is cut into phases of SECS
//! seconds, alternately without and with live changes (starting without),
//! and each phase with changes is compared with its neighbours without.
//!
//! The machine's speed drifts between runs by more than the update path
//! costs (the same command's rate moved 1.4× between rounds in
//! docs/benchmarks.md), so rates of separate runs cannot show a 5% effect.
//! Neighbouring phases of one run share the drift: a phase with changes
//! divided by the mean of the phases just before and after it cancels a
//! drift that is linear over the three, and the median over the phases
//! discards the odd disturbed one.

/// Seconds with changes in the first `t` seconds of traffic when phases
/// of `alt` seconds alternate without, with, without, ... (`alt` 0: no
/// phases, changes all the time).
pub(crate) fn on_time(t: f64, alt: f64) -> f64 {
    let t = t.max(0.0);
    if alt <= 0.0 {
        return t;
    }
    let pairs = (t / (2.0 * alt)).floor();
    let rest = t - pairs * 2.0 * alt;
    pairs * alt + (rest - alt).clamp(0.0, alt)
}

/// Whether phase `k` (from 0) applies changes.
pub(crate) fn has_changes(k: usize) -> bool {
    k % 2 == 1
}

/// What one phase measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Phase {
    /// Whether the controller applied changes during the phase.
    pub changes: bool,
    /// Wall seconds of the phase.
    pub secs: f64,
    /// Frames the sinks received (forwarded by the forwarder).
    pub delivered: u64,
    /// Route changes the controller applied.
    pub applied: usize,
    /// Cores of the forwarder's workers.
    pub worker_cores: f64,
    /// Cores of the lab's source thread.
    pub source_cores: f64,
    /// Cores of the update path (controller apply, its connections, the
    /// forwarder's follower).
    pub update_cores: f64,
}

impl Phase {
    /// Frames forwarded to the sinks per second, in millions.
    pub fn mpps(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.delivered as f64 / self.secs / 1e6)
    }

    /// The same per second of worker CPU time: the worker cores' own rate
    /// whether or not they were the bottleneck.
    pub fn per_worker_cpu(&self) -> Option<f64> {
        let m = self.mpps()?;
        (self.worker_cores > 0.05).then(|| m / self.worker_cores)
    }
}

/// Median of `v` (mean of the middle two for an even length); `None` for
/// an empty slice or one holding a NaN.
pub(crate) fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// For every phase with changes that has a neighbour without: `f` of the
/// phase divided by the mean of `f` over its neighbours without changes
/// (the phase before and, where the run went on, the phase after).
/// Phases where `f` is `None` are skipped.
pub(crate) fn neighbour_ratios(phases: &[Phase], f: impl Fn(&Phase) -> Option<f64>) -> Vec<f64> {
    let mut out = Vec::new();
    for (i, p) in phases.iter().enumerate() {
        if !p.changes {
            continue;
        }
        let Some(on) = f(p) else { continue };
        let around: Vec<f64> = [i.checked_sub(1), Some(i + 1)]
            .into_iter()
            .flatten()
            .filter_map(|j| phases.get(j))
            .filter(|q| !q.changes)
            .filter_map(&f)
            .collect();
        if around.is_empty() {
            continue;
        }
        let base = around.iter().sum::<f64>() / around.len() as f64;
        if base > 0.0 {
            out.push(on / base);
        }
    }
    out
}

/// `median (min-max)` of a list of ratios, or "-" for none.
fn ratio_text(v: &[f64]) -> String {
    match median(v) {
        Some(m) => {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{m:.3} ({lo:.3}-{hi:.3})")
        }
        None => "-".into(),
    }
}

/// The summary's `phases` lines: medians of each kind of phase and the
/// neighbour ratios (phases shorter than 90% of `alt`, the run's last one,
/// are left out).
pub(crate) fn summary(phases: &[Phase], alt: f64) -> Vec<String> {
    let full: Vec<Phase> = phases
        .iter()
        .filter(|p| p.secs >= 0.9 * alt)
        .cloned()
        .collect();
    let of = |changes: bool, f: &dyn Fn(&Phase) -> Option<f64>| -> String {
        let v: Vec<f64> = full
            .iter()
            .filter(|p| p.changes == changes)
            .filter_map(f)
            .collect();
        median(&v).map_or("-".into(), |m| format!("{m:.3}"))
    };
    let n_on = full.iter().filter(|p| p.changes).count();
    let n_off = full.len() - n_on;
    let rate = neighbour_ratios(&full, Phase::mpps);
    let per_cpu = neighbour_ratios(&full, Phase::per_worker_cpu);
    vec![
        format!(
            "{} phases of {alt:.1} s ({n_off} without changes, {n_on} with): forwarded {} Mpps without, {} with (medians); \
             with / without {} (median of each phase with changes against its neighbours, min-max)",
            full.len(),
            of(false, &Phase::mpps),
            of(true, &Phase::mpps),
            ratio_text(&rate)
        ),
        format!(
            "per worker CPU-second {} Mpps without, {} with: {}; cores without / with: workers {} / {}, source {} / {}, update path {} / {}",
            of(false, &Phase::per_worker_cpu),
            of(true, &Phase::per_worker_cpu),
            ratio_text(&per_cpu),
            of(false, &|p| Some(p.worker_cores)),
            of(true, &|p| Some(p.worker_cores)),
            of(false, &|p| Some(p.source_cores)),
            of(true, &|p| Some(p.source_cores)),
            of(false, &|p| Some(p.update_cores)),
            of(true, &|p| Some(p.update_cores)),
        ),
    ]
}

/// A list of ratios as `summary.json` gives it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Ratios {
    /// Median (`null` for none).
    pub median: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Each phase with changes against its neighbours without.
    pub each: Vec<f64>,
}

impl Ratios {
    fn of(v: Vec<f64>) -> Ratios {
        Ratios {
            median: median(&v),
            min: v.iter().copied().reduce(f64::min),
            max: v.iter().copied().reduce(f64::max),
            each: v,
        }
    }
}

/// `summary.json`'s `phases`: what the `phases` lines say, as numbers.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct PhasesSummary {
    /// Seconds of a phase (`--alternate`).
    pub phase_seconds: f64,
    /// Every phase, the last (cut short) one included.
    pub phases: Vec<Phase>,
    /// Full phases counted below (those of at least 90% of `phase_seconds`).
    pub full: usize,
    /// Median forwarded Mpps of full phases without changes.
    pub mpps_without: Option<f64>,
    /// The same with changes.
    pub mpps_with: Option<f64>,
    /// Forwarded rate, with / without (neighbour ratios).
    pub rate_ratio: Ratios,
    /// Mpps per worker CPU-second, with / without (neighbour ratios).
    pub per_worker_cpu_ratio: Ratios,
}

/// The numbers of [`summary`].
pub(crate) fn summary_numbers(phases: &[Phase], alt: f64) -> PhasesSummary {
    let full: Vec<Phase> = phases
        .iter()
        .filter(|p| p.secs >= 0.9 * alt)
        .cloned()
        .collect();
    let med = |changes: bool| {
        let v: Vec<f64> = full
            .iter()
            .filter(|p| p.changes == changes)
            .filter_map(Phase::mpps)
            .collect();
        median(&v)
    };
    PhasesSummary {
        phase_seconds: alt,
        phases: phases.to_vec(),
        full: full.len(),
        mpps_without: med(false),
        mpps_with: med(true),
        rate_ratio: Ratios::of(neighbour_ratios(&full, Phase::mpps)),
        per_worker_cpu_ratio: Ratios::of(neighbour_ratios(&full, Phase::per_worker_cpu)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_time_counts_only_the_phases_with_changes() {
        // Phases of 2 s: 0-2 off, 2-4 on, 4-6 off, 6-8 on.
        for (t, want) in [
            (0.0, 0.0),
            (1.5, 0.0),
            (2.0, 0.0),
            (3.0, 1.0),
            (4.0, 2.0),
            (5.0, 2.0),
            (7.5, 3.5),
            (8.0, 4.0),
            (9.0, 4.0),
        ] {
            assert!((on_time(t, 2.0) - want).abs() < 1e-9, "t={t}");
        }
        // No phases: always on.
        assert_eq!(on_time(3.5, 0.0), 3.5);
        assert_eq!(on_time(-1.0, 2.0), 0.0);
        assert!(!has_changes(0) && has_changes(1) && !has_changes(2));
    }

    #[test]
    fn medians_of_odd_even_and_bad_lists() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    fn phase(changes: bool, delivered: u64, worker_cores: f64) -> Phase {
        Phase {
            changes,
            secs: 1.0,
            delivered,
            worker_cores,
            ..Phase::default()
        }
    }

    #[test]
    fn each_phase_with_changes_is_divided_by_its_neighbours_mean() {
        // A linear drift (100, 110, 120, 130, 140 without changes) is
        // cancelled: every phase with changes sits 10% below the line.
        let p = [
            phase(false, 100_000_000, 1.0),
            phase(true, 99_000_000, 1.0),
            phase(false, 120_000_000, 1.0),
            phase(true, 117_000_000, 0.5),
            phase(false, 140_000_000, 1.0),
            // The run's last phase with changes has one neighbour.
            phase(true, 135_000_000, 1.0),
        ];
        let r = neighbour_ratios(&p, Phase::mpps);
        assert_eq!(r.len(), 3);
        assert!((r[0] - 0.9).abs() < 1e-9, "{r:?}");
        assert!((r[1] - 0.9).abs() < 1e-9, "{r:?}");
        assert!((r[2] - 135.0 / 140.0).abs() < 1e-9, "{r:?}");
        // Per worker CPU-second: the second phase with changes used half
        // the CPU, so its own rate doubled.
        let c = neighbour_ratios(&p, Phase::per_worker_cpu);
        assert!((c[1] - 1.8).abs() < 1e-9, "{c:?}");
        // A phase with changes and no neighbour without gives no ratio;
        // an idle worker (no CPU) gives no per-CPU rate.
        assert!(neighbour_ratios(&[phase(true, 1, 1.0)], Phase::mpps).is_empty());
        assert_eq!(phase(false, 5, 0.0).per_worker_cpu(), None);
    }

    #[test]
    fn the_summary_leaves_out_a_short_last_phase() {
        let mut p = vec![
            phase(false, 1_000_000, 1.0),
            phase(true, 900_000, 1.0),
            phase(false, 1_000_000, 1.0),
        ];
        p.push(Phase {
            secs: 0.2,
            ..phase(true, 10, 1.0)
        });
        let s = summary(&p, 1.0);
        assert!(
            s[0].starts_with("3 phases of 1.0 s (2 without changes, 1 with)"),
            "{}",
            s[0]
        );
        for (line, want) in [
            (0, "forwarded 1.000 Mpps without, 0.900 with"),
            (0, "with / without 0.900 (0.900-0.900)"),
            (
                1,
                "per worker CPU-second 1.000 Mpps without, 0.900 with: 0.900",
            ),
        ] {
            assert!(s[line].contains(want), "{}", s[line]);
        }
    }

    #[test]
    fn summary_numbers_agree_with_the_summary_lines() {
        let p = |changes: bool, delivered: u64| Phase {
            changes,
            secs: 1.0,
            delivered,
            worker_cores: 1.0,
            ..Phase::default()
        };
        let phases = [
            p(false, 2_000_000),
            p(true, 1_800_000),
            p(false, 2_000_000),
            p(true, 1_900_000),
            Phase {
                secs: 0.2,
                ..p(false, 10)
            },
        ];
        let n = summary_numbers(&phases, 1.0);
        assert_eq!(n.phases.len(), 5);
        assert_eq!(n.full, 4);
        assert_eq!(n.mpps_without, Some(2.0));
        assert_eq!(n.mpps_with, Some(1.85));
        assert_eq!(n.rate_ratio.each.len(), 2);
        assert_eq!(n.rate_ratio.min, Some(0.9));
        assert_eq!(n.rate_ratio.max, Some(0.95));
        let lines = summary(&phases, 1.0);
        assert!(
            lines[0].contains("with / without 0.925 (0.900-0.950)"),
            "{lines:?}"
        );
        assert!((n.rate_ratio.median.unwrap() - 0.925).abs() < 1e-12);
    }
}
