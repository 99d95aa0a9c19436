//! `nexthop stats`: read a running forwarder's counters from its metrics
//! endpoint (`GET /stats.json`) and print them as a table or JSON;
//! `--watch` repeats and adds rates between samples.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use nexthop_dataplane::metrics::{fetch_snapshot, MetricsSnapshot, PortCount};

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The forwarder's metrics endpoint (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9464")]
    addr: String,
    /// Print the snapshot as JSON (one object per line) instead of a table.
    #[arg(long)]
    json: bool,
    /// Fetch again every SECS seconds and show rates between samples.
    #[arg(long, value_name = "SECS")]
    watch: Option<f64>,
    /// With --watch: stop after N samples (default: until interrupted).
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
    /// Seconds to wait for the connection and for each read.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    timeout: f64,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > 86_400.0 {
        bail!("--{name} must be more than 0 and at most 86400 seconds, not {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

pub fn run(a: &StatsArgs) -> anyhow::Result<()> {
    let timeout = seconds("timeout", a.timeout)?;
    let every = a.watch.map(|w| seconds("watch", w)).transpose()?;
    if a.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let mut out = std::io::stdout().lock();
    let mut prev: Option<(MetricsSnapshot, Instant)> = None;
    let mut taken = 0u64;
    loop {
        let snap = fetch_snapshot(&a.addr, timeout)
            .with_context(|| format!("fetching stats from {}", a.addr))?;
        let now = Instant::now();
        taken += 1;
        if a.json {
            writeln!(out, "{}", snap.to_json())?;
        } else {
            if every.is_some() && taken > 1 {
                writeln!(out)?;
            }
            let rates = prev
                .as_ref()
                .map(|(p, at)| Rates::between(p, &snap, now - *at));
            write!(out, "{}", table(&a.addr, &snap, rates.as_ref()))?;
        }
        out.flush()?;
        let Some(every) = every else {
            return Ok(());
        };
        if a.count.is_some_and(|n| taken >= n) {
            return Ok(());
        }
        prev = Some((snap, now));
        std::thread::sleep(every);
    }
}

/// Frames per second between two samples.
struct Rates {
    seconds: f64,
    /// The counters went down: the forwarder restarted in between.
    restarted: bool,
    frames_in: f64,
    forwarded: f64,
    dropped: f64,
    punted: f64,
    rx: Vec<(u16, f64)>,
    tx: Vec<(u16, f64)>,
}

impl Rates {
    fn between(a: &MetricsSnapshot, b: &MetricsSnapshot, wall: Duration) -> Rates {
        // The forwarder's own clock when it moved on, ours otherwise.
        let up = b.uptime_seconds - a.uptime_seconds;
        let seconds = if up > 0.0 { up } else { wall.as_secs_f64() };
        let restarted = b.uptime_seconds < a.uptime_seconds || b.frames_in < a.frames_in;
        let rate = |x: u64, y: u64| {
            if seconds > 0.0 {
                y.saturating_sub(x) as f64 / seconds
            } else {
                0.0
            }
        };
        let per_port = |old: &[nexthop_dataplane::metrics::PortMetrics],
                        new: &[nexthop_dataplane::metrics::PortMetrics]| {
            new.iter()
                .map(|n| {
                    let o = old
                        .iter()
                        .find(|o| o.port == n.port)
                        .map_or(0, |o| o.frames);
                    (n.port, rate(o, n.frames))
                })
                .collect()
        };
        Rates {
            seconds,
            restarted,
            frames_in: rate(a.frames_in, b.frames_in),
            forwarded: rate(a.forwarded, b.forwarded),
            dropped: rate(a.dropped, b.dropped),
            punted: rate(a.punted, b.punted),
            rx: per_port(&a.rx, &b.rx),
            tx: per_port(&a.tx, &b.tx),
        }
    }

    fn port(v: &[(u16, f64)], port: u16) -> Option<f64> {
        v.iter().find(|(p, _)| *p == port).map(|(_, r)| *r)
    }
}

fn count_of(v: &[PortCount], port: u16) -> u64 {
    v.iter().filter(|c| c.port == port).map(|c| c.count).sum()
}

fn fmt_rate(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.0}"))
}

/// The value of extra metric `name` (with or without the `nexthop_`
/// prefix), if the forwarder exports it.
fn extra(s: &MetricsSnapshot, name: &str) -> Option<f64> {
    s.extra
        .iter()
        .find(|m| {
            m.name == name || m.name.strip_prefix(nexthop_dataplane::metrics::PREFIX) == Some(name)
        })
        .map(|m| m.value)
}

/// The header's FIB part: the generation the forwarder reports and, for a
/// forwarder following a controller, the snapshots and deltas it applied
/// (`fib_snapshots_total`, `fib_deltas_total`). A following forwarder that
/// reports generation 0 while it applied updates does not export its
/// generation: the header says so instead of showing 0.
fn fib_header(s: &MetricsSnapshot) -> String {
    let snapshots = extra(s, "fib_snapshots_total");
    let deltas = extra(s, "fib_deltas_total");
    let applied = snapshots.unwrap_or(0.0) + deltas.unwrap_or(0.0);
    let generation = if s.fib_generation == 0 && applied > 1.0 {
        "fib generation not reported".to_string()
    } else {
        format!("fib generation {}", s.fib_generation)
    };
    match (snapshots, deltas) {
        (None, None) => generation,
        (sn, de) => {
            let n = |v: Option<f64>, one: &str, many: &str| {
                crate::textio::count(v.unwrap_or(0.0).max(0.0) as u64, one, many)
            };
            format!(
                "{generation} ({} and {} applied from the controller)",
                n(sn, "snapshot", "snapshots"),
                n(de, "delta", "deltas")
            )
        }
    }
}

/// The readable form of a snapshot (and rates since the previous one).
fn table(addr: &str, s: &MetricsSnapshot, rates: Option<&Rates>) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "forwarder {addr}  uptime {:.1}s  {}\n",
        s.uptime_seconds,
        fib_header(s)
    ));
    if let Some(r) = rates {
        o.push_str(&format!(
            "rates over {:.2}s{}: frames_in {:.0}/s  forwarded {:.0}/s  dropped {:.0}/s  punted {:.0}/s\n",
            r.seconds,
            if r.restarted {
                " (counters went down: the forwarder restarted)"
            } else {
                ""
            },
            r.frames_in,
            r.forwarded,
            r.dropped,
            r.punted
        ));
    }
    o.push_str(&format!(
        "frames_in {}  bytes_in {}  forwarded {}  dropped {}  punted {}  misses {}\n",
        s.frames_in, s.bytes_in, s.forwarded, s.dropped, s.punted, s.misses
    ));
    let a = &s.actions;
    o.push_str(&format!(
        "actions   port {}  port_set {}  drop {}  controller {}\n",
        a.port, a.port_set, a.drop, a.controller
    ));
    let list = |m: &std::collections::BTreeMap<String, u64>| {
        let v: Vec<String> = m
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join("  ")
        }
    };
    o.push_str(&format!("drops     {}\n", list(&s.drops)));
    o.push_str(&format!("malformed {}\n", list(&s.malformed)));

    let mut ports: Vec<u16> =
        s.rx.iter()
            .chain(&s.tx)
            .map(|p| p.port)
            .chain(
                s.ring_drops
                    .iter()
                    .chain(&s.rx_truncated)
                    .chain(&s.tx_failed)
                    .map(|c| c.port),
            )
            .collect();
    ports.sort_unstable();
    ports.dedup();
    if !ports.is_empty() {
        let mut head = vec![
            "port",
            "rx_frames",
            "rx_bytes",
            "tx_frames",
            "tx_bytes",
            "tx_failed",
            "ring_drops",
            "rx_truncated",
        ];
        if rates.is_some() {
            head.extend(["rx_fps", "tx_fps"]);
        }
        let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
        for p in ports {
            let rx = s.rx.iter().find(|x| x.port == p);
            let tx = s.tx.iter().find(|x| x.port == p);
            let mut row = vec![
                p.to_string(),
                rx.map_or(0, |x| x.frames).to_string(),
                rx.map_or(0, |x| x.bytes).to_string(),
                tx.map_or(0, |x| x.frames).to_string(),
                tx.map_or(0, |x| x.bytes).to_string(),
                count_of(&s.tx_failed, p).to_string(),
                count_of(&s.ring_drops, p).to_string(),
                count_of(&s.rx_truncated, p).to_string(),
            ];
            if let Some(r) = rates {
                row.push(fmt_rate(Rates::port(&r.rx, p)));
                row.push(fmt_rate(Rates::port(&r.tx, p)));
            }
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i == 0 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            o.push_str(cells.join("  ").trim_end());
            o.push('\n');
        }
    }
    for m in &s.extra {
        let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", labels.join(","))
        };
        o.push_str(&format!("{}{labels} {}\n", m.name, m.value));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_dataplane::metrics::PortMetrics;

    fn snap(uptime: f64, frames: u64) -> MetricsSnapshot {
        MetricsSnapshot {
            uptime_seconds: uptime,
            frames_in: frames,
            forwarded: frames,
            rx: vec![PortMetrics {
                port: 0,
                frames,
                bytes: frames * 60,
            }],
            tx: vec![PortMetrics {
                port: 1,
                frames,
                bytes: frames * 60,
            }],
            ..MetricsSnapshot::default()
        }
    }

    #[test]
    fn rates_use_the_forwarders_uptime_between_samples() {
        let r = Rates::between(&snap(10.0, 1000), &snap(12.0, 5000), Duration::from_secs(7));
        assert_eq!(r.seconds, 2.0);
        assert_eq!(r.frames_in, 2000.0);
        assert_eq!(Rates::port(&r.rx, 0), Some(2000.0));
        assert_eq!(Rates::port(&r.tx, 1), Some(2000.0));
        assert!(!r.restarted);
    }

    #[test]
    fn a_restarted_forwarder_gives_no_negative_rates() {
        let r = Rates::between(&snap(100.0, 9000), &snap(1.0, 10), Duration::from_secs(1));
        assert!(r.restarted);
        assert_eq!(r.seconds, 1.0);
        assert_eq!(r.frames_in, 0.0);
    }

    #[test]
    fn table_lists_every_port_with_rates_when_watching() {
        let a = snap(1.0, 0);
        let mut b = snap(2.0, 500);
        b.tx_failed = vec![PortCount { port: 1, count: 3 }];
        let t = table("h:1", &b, Some(&Rates::between(&a, &b, Duration::ZERO)));
        assert!(t.contains("rates over 1.00s: frames_in 500/s"), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        let head = lines.iter().position(|l| l.starts_with("port")).unwrap();
        assert!(lines[head].ends_with("rx_fps  tx_fps"), "{t}");
        let p0: Vec<&str> = lines[head + 1].split_whitespace().collect();
        assert_eq!(
            p0,
            ["0", "500", "30000", "0", "0", "0", "0", "0", "500", "-"]
        );
        let p1: Vec<&str> = lines[head + 2].split_whitespace().collect();
        assert_eq!(
            p1,
            ["1", "0", "0", "500", "30000", "3", "0", "0", "-", "500"]
        );
    }

    #[test]
    fn watch_and_timeout_must_be_positive() {
        assert!(seconds("watch", 0.0).is_err());
        assert!(seconds("watch", f64::NAN).is_err());
        assert!(seconds("watch", 0.5).is_ok());
    }

    fn counter(name: &str, value: f64) -> nexthop_dataplane::metrics::NamedMetric {
        nexthop_dataplane::metrics::NamedMetric {
            name: name.to_string(),
            help: String::new(),
            kind: nexthop_dataplane::metrics::MetricKind::Counter,
            labels: Vec::new(),
            value,
        }
    }

    /// A forwarder following a controller shows the updates it applied,
    /// not a bare "fib generation 0".
    #[test]
    fn header_shows_applied_deltas_and_never_a_stale_generation_0() {
        let mut s = snap(3.0, 10);
        assert!(
            table("h:1", &s, None).starts_with("forwarder h:1  uptime 3.0s  fib generation 0\n")
        );
        s.extra = vec![
            counter("fib_snapshots_total", 1.0),
            counter("fib_deltas_total", 4711.0),
        ];
        let t = table("h:1", &s, None);
        assert!(
            t.contains("fib generation not reported (1 snapshot and 4711 deltas applied from the controller)"),
            "{t}"
        );
        s.fib_generation = 4712;
        let t = table("h:1", &s, None);
        assert!(
            t.contains(
                "fib generation 4712 (1 snapshot and 4711 deltas applied from the controller)"
            ),
            "{t}"
        );
        // Only the snapshot so far: generation 0 is then real.
        s.fib_generation = 0;
        s.extra = vec![counter("nexthop_fib_snapshots_total", 1.0)];
        let t = table("h:1", &s, None);
        assert!(
            t.contains("fib generation 0 (1 snapshot and 0 deltas applied from the controller)"),
            "{t}"
        );
    }
}
