//! `nexthop run`: forward frames between live Linux interfaces through a
//! FIB directory, or the FIB a controller serves (`--controller`, followed
//! live), run to completion on one thread, until a signal, a duration or a
//! frame count.
//!
//! Glue only: the ports and the loop are `nexthop_dataplane::afpacket` and
//! `nexthop_dataplane::live`; this module maps FIB port numbers to
//! interfaces, checks the mapping, and prints progress (stderr) and the
//! summary (stdout). With `--controller`, a `nexthop_control::FibFollower`
//! keeps the table; before each group of frames the loop takes its current
//! table once and swaps it into the pipeline when it changed (rebuilding
//! the action resolution when the action table changed). The contract is
//! in `docs/dataplane.md` ("Live ports", "Live updates").

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use nexthop_control::{AuthKey, FibFollower, FollowerConfig, FollowerStats, Table};
use nexthop_dataplane::afpacket::{RingConfig, RxRing, TxPort};
use nexthop_dataplane::live::{
    forward_live_refreshing, LivePorts, LiveRun, PortStats, Progress, StopAfter, StopFlag,
};
use nexthop_dataplane::metrics::{MetricsConfig, MetricsServer, MetricsSnapshot, SharedSnapshot};
use nexthop_dataplane::{
    Counters, MalformedKind, MissPolicy, NameSource, NameTable, Pipeline, PipelineConfig,
};
use nexthop_othello::fib::KeyType;
use nexthop_othello::QueryView;

use crate::cmd_fib::open_lookup;

/// `N=IFACE`: FIB port `N` is interface `IFACE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMap {
    port: u16,
    iface: String,
}

impl FromStr for PortMap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (n, iface) = s
            .split_once('=')
            .ok_or_else(|| format!("'{s}' is not PORT=IFACE (e.g. 1=eth1)"))?;
        let port = n
            .parse::<u16>()
            .map_err(|_| format!("'{n}' in '{s}' is not a port number (0 to 65535)"))?;
        if iface.is_empty() {
            return Err(format!("'{s}' names no interface after '='"));
        }
        Ok(PortMap {
            port,
            iface: iface.to_string(),
        })
    }
}

/// `nexthop run` arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// FIB directory (made by `nexthop fib build`). With --controller it
    /// is the table until the controller's first snapshot arrives.
    #[arg(long, value_name = "DIR", required_unless_present = "controller")]
    fib: Option<PathBuf>,
    /// Follow the FIB this controller serves (`nexthop controller`):
    /// snapshots replace the table, deltas update it in place while
    /// frames flow.
    #[arg(long, value_name = "ADDR", requires = "key_file")]
    controller: Option<SocketAddr>,
    /// Shared secret file of the controller (at least 16 bytes).
    #[arg(long, value_name = "FILE", requires = "controller")]
    key_file: Option<PathBuf>,
    /// Key type of the controller's FIB when there is no --fib (mac,
    /// ipv4, ipv6, u64 or str).
    #[arg(
        long,
        value_name = "TYPE",
        default_value = "mac",
        conflicts_with = "fib"
    )]
    key_type: KeyType,
    /// Without --fib: seconds to wait for the controller's first snapshot.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    snapshot_wait: f64,
    /// FIB port N is interface IFACE (repeat for each port). Every port
    /// that an action of the FIB names must be mapped.
    #[arg(long = "port", value_name = "N=IFACE", required = true)]
    ports: Vec<PortMap>,
    /// Input port(s) to receive on (repeatable; default: port 0).
    #[arg(long = "in", value_name = "N")]
    inputs: Vec<u16>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Stop once this many frames were received.
    #[arg(long, value_name = "N")]
    packets: Option<u64>,
    /// The name of a frame (as for `nexthop forward`): dst-mac, 5tuple or
    /// bytes:OFFSET:LEN.
    #[arg(long, value_name = "SOURCE", default_value = "dst-mac")]
    name: NameSource,
    /// Unknown names: drop, controller (counted as punted; no controller
    /// port here) or flood.
    #[arg(long, value_name = "POLICY", default_value = "drop")]
    miss: MissPolicy,
    /// Receive ring block size in bytes (a power of two, >= one page).
    #[arg(long, value_name = "BYTES", default_value_t = RingConfig::default().block_size)]
    block_size: usize,
    /// Receive ring blocks per input.
    #[arg(long, value_name = "N", default_value_t = RingConfig::default().block_count)]
    block_count: usize,
    /// Receive ring frame slot size (a multiple of 16).
    #[arg(long, value_name = "BYTES", default_value_t = RingConfig::default().frame_size)]
    frame_size: usize,
    /// Milliseconds before the kernel hands over a partly filled block.
    #[arg(long, value_name = "MS", default_value_t = RingConfig::default().block_timeout_ms)]
    block_timeout_ms: u32,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Serve the counters at http://ADDR/metrics (Prometheus text) and
    /// /stats.json (read them with `nexthop stats --addr ADDR`). Loopback
    /// only unless --metrics-allow-remote.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<std::net::SocketAddr>,
    /// Allow --metrics on an address that is not loopback.
    #[arg(long, requires = "metrics")]
    metrics_allow_remote: bool,
}

/// `nexthop run`.
pub fn run(a: RunArgs) -> Result<()> {
    let after = StopAfter {
        duration: match a.duration {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
            Some(s) => bail!("--duration {s}: expected a positive number of seconds"),
        },
        frames: match a.packets {
            Some(0) => bail!("--packets 0: expected at least 1"),
            n => n,
        },
    };
    let ring = RingConfig {
        block_size: a.block_size,
        block_count: a.block_count,
        frame_size: a.frame_size,
        block_timeout_ms: a.block_timeout_ms,
    };
    ring.validate().map_err(|e| anyhow!("receive ring: {e}"))?;

    let mut by_port: BTreeMap<u16, &str> = BTreeMap::new();
    let mut by_iface: BTreeMap<&str, u16> = BTreeMap::new();
    for m in &a.ports {
        if by_port.insert(m.port, &m.iface).is_some() {
            bail!("--port {}: port {} is mapped twice", m.port, m.port);
        }
        if let Some(p) = by_iface.insert(&m.iface, m.port) {
            bail!(
                "--port {}={}: interface {} is already port {p}",
                m.port,
                m.iface,
                m.iface
            );
        }
    }
    let inputs: BTreeSet<u16> = if a.inputs.is_empty() {
        if !by_port.contains_key(&0) {
            bail!("no input: map port 0 (--port 0=IFACE) or name inputs with --in N");
        }
        BTreeSet::from([0])
    } else {
        a.inputs.iter().copied().collect()
    };
    for p in &inputs {
        if !by_port.contains_key(p) {
            bail!("--in {p}: port {p} has no interface (add --port {p}=IFACE)");
        }
    }

    let stop = StopFlag::install().map_err(|e| anyhow!("installing signal handlers: {e}"))?;
    let follower = match (a.controller, &a.key_file) {
        (Some(addr), Some(key_file)) => {
            let key = AuthKey::from_file(key_file).map_err(|e| anyhow!("--key-file: {e}"))?;
            let id = format!("nexthop-run-{}", std::process::id());
            Some(FibFollower::start(key, FollowerConfig::new(addr, id))?)
        }
        _ => None,
    };
    let fib = a.fib.as_deref().map(open_lookup).transpose()?;
    let cfg = PipelineConfig {
        name: a.name,
        miss: a.miss,
        ..PipelineConfig::default()
    };
    let (mut pipeline, origin) = match (&fib, &follower) {
        (Some(fib), _) => {
            let origin = a
                .fib
                .as_deref()
                .map_or_else(String::new, |d| d.display().to_string());
            let p = Pipeline::new(
                Current::Dir(fib.mapped.view()),
                &fib.actions,
                fib.current.key_type,
                cfg,
            )
            .map_err(|e| anyhow!("{origin}: {e}"))?;
            (p, origin)
        }
        (None, Some(f)) => {
            let addr = a.controller.map_or_else(String::new, |c| c.to_string());
            let wait = match a.snapshot_wait {
                s if s.is_finite() && s > 0.0 && s < 1e9 => Duration::from_secs_f64(s),
                s => bail!("--snapshot-wait {s}: expected a positive number of seconds"),
            };
            let t = first_table(f, &addr, wait, &stop)?;
            let origin = format!("controller {addr}");
            let p = Pipeline::new(Current::Followed(t.clone()), t.actions(), a.key_type, cfg)
                .map_err(|e| anyhow!("{origin}: {e}"))?;
            (p, origin)
        }
        (None, None) => bail!("no table: give --fib DIR or --controller ADDR"),
    };
    let missing: Vec<String> = pipeline
        .ports()
        .iter()
        .filter(|p| !by_port.contains_key(p))
        .map(|p| p.to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{origin}: the FIB sends to port(s) {} with no interface (add --port N=IFACE)",
            missing.join(",")
        );
    }

    let mut ports = LivePorts::new();
    for (&port, &iface) in &by_port {
        ports.add_output(port, TxPort::open(iface)?);
        if inputs.contains(&port) {
            ports.add_input(port, RxRing::open(iface, &ring)?);
        }
    }
    let show = |ps: &dyn Fn(u16) -> bool| {
        by_port
            .iter()
            .filter(|(p, _)| ps(**p))
            .map(|(p, i)| format!("{p}={i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    eprintln!(
        "nexthop run: forwarding in={} out={} ring={}x{}B (Ctrl-C stops)",
        show(&|p| inputs.contains(&p)),
        show(&|p| pipeline.ports().contains(&p)),
        ring.block_count,
        ring.block_size
    );

    // The metrics endpoint is refreshed from the progress callback, so it
    // needs the callback even when progress lines are off.
    let report = (!a.quiet || a.metrics.is_some()).then_some(Duration::from_secs(1));
    let shared = SharedSnapshot::new();
    let _metrics_server = match a.metrics {
        Some(addr) => {
            let config = MetricsConfig {
                addr,
                allow_non_loopback: a.metrics_allow_remote,
                ..MetricsConfig::default()
            };
            let server = MetricsServer::start_with(&config, shared.provider())
                .with_context(|| format!("starting the metrics endpoint on {addr}"))?;
            eprintln!("nexthop run: metrics on http://{addr}/metrics and /stats.json");
            Some(server)
        }
        None => None,
    };
    let snapshot_of = |counters: &Counters, ports: &PortStats, elapsed: Duration| {
        let mut m = MetricsSnapshot::from_counters(counters)
            .with_port_stats(ports)
            .with_uptime(elapsed);
        if let Some(f) = &follower {
            let st = f.stats();
            m = m
                .with_counter(
                    "fib_snapshots_total",
                    "FIB snapshots installed.",
                    &[],
                    st.snapshots,
                )
                .with_counter("fib_deltas_total", "FIB deltas applied.", &[], st.deltas);
        }
        m
    };
    let swaps = Cell::new(0u64);
    let mut warned: BTreeSet<u16> = BTreeSet::new();
    let refresh = |p: &mut Pipeline<Current<'_>>| {
        let Some(t) = follower.as_ref().and_then(FibFollower::table) else {
            return;
        };
        if swap_in(p, t) {
            swaps.set(swaps.get() + 1);
            for &port in p.ports() {
                if !by_port.contains_key(&port) && warned.insert(port) {
                    eprintln!(
                        "nexthop run: the FIB now sends to port {port}, which has no \
                         interface; its frames are counted as tx_failed"
                    );
                }
            }
        }
    };
    let progress = |p: &Progress<'_>| {
        if a.metrics.is_some() {
            shared.publish(snapshot_of(p.counters, p.ports, p.elapsed));
        }
        if a.quiet {
            return;
        }
        let mut line = progress_line(p);
        if let Some(f) = &follower {
            line.push_str(&follower_fields(&f.stats(), swaps.get(), false));
        }
        eprintln!("{line}");
    };
    let run = forward_live_refreshing(
        &mut pipeline,
        &mut ports,
        after,
        &stop,
        report,
        progress,
        refresh,
    )?;
    if a.metrics.is_some() {
        shared.publish(snapshot_of(&run.counters, &run.ports, run.elapsed));
    }
    let mut line = summary_line(&run);
    if let Some(f) = follower {
        line.push_str(&follower_fields(&f.stats(), swaps.get(), true));
        f.stop();
    }
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    Ok(())
}

/// The table a pipeline reads: the FIB directory's mapped snapshot, or the
/// follower's current table (kept alive by the `Arc` for as long as the
/// pipeline holds it).
pub(crate) enum Current<'a> {
    Dir(QueryView<'a>),
    Followed(Arc<Table>),
}

impl NameTable for Current<'_> {
    #[inline]
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
        match self {
            Current::Dir(v) => v.lookup_batch(names, out),
            Current::Followed(t) => t.query().lookup_batch(names, out),
        }
    }
}

/// Put `t` into the pipeline unless it is the table already there;
/// rebuild the action resolution when `t`'s action table is another one
/// (a snapshot, or a delta that added actions). Whether it swapped.
pub(crate) fn swap_in(p: &mut Pipeline<Current<'_>>, t: Arc<Table>) -> bool {
    let same_actions = match p.table() {
        Current::Followed(cur) if Arc::ptr_eq(cur, &t) => return false,
        Current::Followed(cur) => std::ptr::eq(cur.actions(), t.actions()),
        Current::Dir(_) => false,
    };
    if !same_actions {
        p.set_actions(t.actions());
    }
    p.replace_table(Current::Followed(t));
    true
}

/// Wait for the follower's first table, at most `wait` (or until a signal).
fn first_table(f: &FibFollower, addr: &str, wait: Duration, stop: &StopFlag) -> Result<Arc<Table>> {
    eprintln!("nexthop run: waiting for the first snapshot from {addr}");
    let end = Instant::now() + wait;
    loop {
        if let Some(t) = f.table() {
            return Ok(t);
        }
        if stop.is_raised() {
            bail!("stopped before the controller sent a snapshot");
        }
        if Instant::now() >= end {
            bail!(
                "no snapshot from controller {addr} within {:.1} s",
                wait.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// ` fib_snapshots=.. fib_deltas=.. ...` for a progress line or the summary.
fn follower_fields(s: &FollowerStats, swaps: u64, all: bool) -> String {
    let mut line = format!(
        " fib_snapshots={} fib_deltas={} fib_rejects={}",
        s.snapshots,
        s.deltas,
        s.total_rejects()
    );
    if all {
        line.push_str(&format!(
            " fib_connects={} fib_resyncs={} fib_skipped={} fib_swaps={swaps}",
            s.connects, s.resyncs, s.skipped
        ));
    }
    line
}

fn progress_line(p: &Progress<'_>) -> String {
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
fn port_list(it: impl Iterator<Item = (u16, u64)>) -> String {
    let v: Vec<String> = it.map(|(p, n)| format!("{p}:{n}")).collect();
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(",")
    }
}

/// Drops by reason: `action` (drop actions), `miss` (unknown names
/// dropped by the miss policy) and each malformed reason; `-` when none.
fn drop_reasons(c: &Counters) -> String {
    let miss = c
        .dropped
        .saturating_sub(c.hits.drop)
        .saturating_sub(c.malformed.total());
    let mut v: Vec<String> = Vec::new();
    for (name, n) in [("action", c.hits.drop), ("miss", miss)] {
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

/// The one-line summary.
fn summary_line(run: &LiveRun) -> String {
    let c = &run.counters;
    format!(
        "frames_in={} in={} out={} forwarded={} dropped={} drops={} punted={} misses={} \
         tx_failed={} ring_drops={} rx_truncated={} stopped_by={} seconds={:.3} mpps={:.3}",
        c.frames_in,
        port_list(c.rx_ports().map(|(p, pc)| (p, pc.frames))),
        port_list(c.tx_ports().map(|(p, pc)| (p, pc.frames))),
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
    use super::*;

    #[test]
    fn port_maps_parse_and_refuse_with_the_argument() {
        assert_eq!(
            "3=veth3".parse::<PortMap>(),
            Ok(PortMap {
                port: 3,
                iface: "veth3".into()
            })
        );
        for bad in ["3", "x=eth0", "70000=eth0", "1="] {
            let e = bad.parse::<PortMap>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn drop_reasons_split_actions_misses_and_malformed() {
        assert_eq!(drop_reasons(&Counters::default()), "-");
        let mut c = Counters::default();
        c.dropped = 10;
        c.hits.drop = 3;
        c.misses = 7;
        assert_eq!(drop_reasons(&c), "action:3,miss:7");
    }
}
