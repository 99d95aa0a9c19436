//! Observability: a snapshot of the forwarder's counters, its Prometheus
//! and JSON forms, a small HTTP endpoint that serves them, a client for
//! that endpoint, and structured logging.
//!
//! * [`MetricsSnapshot`] is a plain value: per-port rx/tx frames and bytes,
//!   drops by reason, hits per action kind, misses, malformed frames by
//!   reason, ring drops, partly captured frames and tx failures per port,
//!   uptime, the FIB generation and any number of extra named counters or
//!   gauges (a follower's statistics, say). Build one from the pipeline's
//!   [`Counters`] with [`MetricsSnapshot::from_counters`], add the live
//!   loop's [`PortStats`](crate::live::PortStats) with
//!   [`MetricsSnapshot::with_port_stats`] (Linux).
//! * [`MetricsSnapshot::to_prometheus_text`] writes the Prometheus text
//!   exposition format 0.0.4; [`MetricsSnapshot::to_json`] writes JSON that
//!   [`MetricsSnapshot::from_json`] reads back.
//! * [`MetricsServer`] serves `GET /metrics` and `GET /stats.json` (and
//!   `HEAD` of both) on a loopback address unless told otherwise, from a
//!   [`SnapshotProvider`] called once per request. It stops and joins its
//!   thread when dropped.
//! * [`SharedSnapshot`] is the slot between them: the forwarding thread
//!   publishes a snapshot now and then, [`SharedSnapshot::provider`] serves
//!   the latest one.
//! * [`fetch_snapshot`] is the client `nexthop stats` uses.
//! * [`init_logging`] installs a `tracing` subscriber that writes text or
//!   JSON lines to stderr, filtered by `RUST_LOG` (default `info`).
//!
//! Threading: the server runs one accept thread and one short-lived thread
//! per connection (at most [`MetricsConfig::max_connections`] at once,
//! [`MAX_CONNECTIONS`] by default; more are answered `503` at once, counted
//! and logged). The provider is called from those threads, concurrently, so
//! it must be cheap and `Sync` (read a `Mutex`-guarded or atomically
//! published copy of the counters; never the pipeline itself).
//!
//! Slow clients: a connection has [`MetricsConfig::io_timeout`] from its
//! accept to send its whole request head (a deadline for the request, not
//! for each read, so a byte a second does not extend it); past it the
//! client gets `408` and is closed. A connection thread waiting for a head
//! costs a small stack and a descriptor, and the cap is set well above what
//! scrapers need, so a hundred clients that connect and trickle (or send
//! nothing) leave room for a scraper, and are gone at the deadline. The
//! endpoint counts its own connections, refusals and timeouts and appends
//! them to `/metrics` as `nexthop_metrics_http_*` (see [`EndpointStats`]);
//! `/stats.json` serves the provider's snapshot alone.
//!
//! ```
//! use std::sync::Arc;
//! use nexthop_dataplane::metrics::{MetricsServer, MetricsSnapshot, SnapshotProvider};
//!
//! let provider: SnapshotProvider = Arc::new(|| MetricsSnapshot::default());
//! let server = MetricsServer::start("127.0.0.1:0".parse()?, provider)?;
//! let snap = nexthop_dataplane::metrics::fetch_snapshot(
//!     &server.local_addr().to_string(),
//!     std::time::Duration::from_secs(5),
//! )?;
//! assert_eq!(snap.frames_in, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize};

use crate::counters::{Counters, PortCounter};

/// The address [`MetricsConfig::default`] listens on.
pub const DEFAULT_METRICS_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9464);

/// Longest request head (request line and headers) the server reads.
pub const MAX_REQUEST_BYTES: usize = 8192;

/// Default for [`MetricsConfig::max_connections`]: most connections
/// served at once; more are answered `503`.
pub const MAX_CONNECTIONS: usize = 256;

/// Stack of a connection thread (it parses a head and renders a snapshot).
const CONNECTION_STACK_BYTES: usize = 256 << 10;

/// Default time a server connection may take to send its request (and
/// to take the response).
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest response body [`fetch_snapshot`] accepts.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Prefix of every metric name.
pub const PREFIX: &str = "nexthop_";

/// What the server calls, once per request, for the counters to serve.
pub type SnapshotProvider = Arc<dyn Fn() -> MetricsSnapshot + Send + Sync>;

/// The latest published snapshot, shared between the forwarding thread
/// (which publishes, say once per progress report) and the server (which
/// reads it per request). Cloning shares the same slot.
#[derive(Clone, Debug, Default)]
pub struct SharedSnapshot(Arc<Mutex<MetricsSnapshot>>);

impl SharedSnapshot {
    /// A slot holding an empty snapshot.
    pub fn new() -> SharedSnapshot {
        SharedSnapshot::default()
    }

    /// Replace the published snapshot.
    pub fn publish(&self, snapshot: MetricsSnapshot) {
        // A panic while holding the lock cannot leave a half-written
        // snapshot (assignment is the only write), so poisoning is ignored.
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = snapshot;
    }

    /// A copy of the published snapshot.
    pub fn get(&self) -> MetricsSnapshot {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A provider for [`MetricsServer::start`] that serves the published
    /// snapshot.
    pub fn provider(&self) -> SnapshotProvider {
        let me = self.clone();
        Arc::new(move || me.get())
    }
}

/// Frames and bytes through one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortMetrics {
    /// Port number.
    pub port: u16,
    /// Frames.
    pub frames: u64,
    /// Bytes.
    pub bytes: u64,
}

/// One per-port count (ring drops, tx failures ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCount {
    /// Port number.
    pub port: u16,
    /// The count.
    pub count: u64,
}

/// Frames whose name matched, by the kind of action.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionMetrics {
    /// `Port(n)` actions.
    pub port: u64,
    /// Port-set actions.
    pub port_set: u64,
    /// `drop` actions.
    pub drop: u64,
    /// `controller` actions.
    pub controller: u64,
}

/// Whether an extra metric only grows or may go up and down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// Only grows (reset only when the process restarts).
    Counter,
    /// Any value.
    Gauge,
}

impl MetricKind {
    fn name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }
}

/// An extra named metric (a follower's statistics, say).
///
/// `name` is written after [`PREFIX`]; characters a Prometheus metric name
/// cannot hold become `_`, and so do those of label names. Label values
/// are escaped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedMetric {
    /// Name without the `nexthop_` prefix (`follower_deltas_total`).
    pub name: String,
    /// One line of help text.
    pub help: String,
    /// Counter or gauge.
    pub kind: MetricKind,
    /// Labels, `(name, value)`.
    #[serde(default)]
    pub labels: Vec<(String, String)>,
    /// The value (JSON writes a non-finite value as `null`, read back as NaN).
    #[serde(deserialize_with = "f64_or_nan")]
    pub value: f64,
}

fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A copy of every counter the forwarder reports.
///
/// Counters are totals since the forwarder started; `uptime_seconds`
/// lets a reader turn two snapshots into rates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricsSnapshot {
    /// Seconds since the forwarder started.
    pub uptime_seconds: f64,
    /// Generation of the FIB in use (0 when it never changed).
    pub fib_generation: u64,
    /// Frames given to the pipeline.
    pub frames_in: u64,
    /// Bytes given to the pipeline.
    pub bytes_in: u64,
    /// Frames sent out of at least one port.
    pub forwarded: u64,
    /// Frames discarded (the sum of `drops`).
    pub dropped: u64,
    /// Frames punted to the controller.
    pub punted: u64,
    /// Received frames and bytes per input port.
    pub rx: Vec<PortMetrics>,
    /// Sent frames and bytes per output port (copies, as the pipeline
    /// counts them; frames actually sent are these less `tx_failed`).
    pub tx: Vec<PortMetrics>,
    /// Dropped frames by reason: `action`, `miss`, `ttl_expired` (the IP
    /// pipeline), then each malformed reason (`runt`, `truncated` ...);
    /// reasons with none left out.
    pub drops: BTreeMap<String, u64>,
    /// Frames whose name matched, by action kind.
    pub actions: ActionMetrics,
    /// Names the FIB does not know.
    pub misses: u64,
    /// Frames that could not be named, by reason (every reason, zeros too).
    pub malformed: BTreeMap<String, u64>,
    /// Per input port: frames the kernel dropped because the ring was full.
    pub ring_drops: Vec<PortCount>,
    /// Per input port: frames skipped because they were captured in part.
    pub rx_truncated: Vec<PortCount>,
    /// Per output port: frames the kernel refused to send.
    pub tx_failed: Vec<PortCount>,
    /// Extra counters and gauges.
    pub extra: Vec<NamedMetric>,
}

fn port_metrics(it: impl Iterator<Item = (u16, PortCounter)>) -> Vec<PortMetrics> {
    it.map(|(port, c)| PortMetrics {
        port,
        frames: c.frames,
        bytes: c.bytes,
    })
    .collect()
}

fn port_counts(v: &[(u16, u64)]) -> Vec<PortCount> {
    v.iter()
        .map(|&(port, count)| PortCount { port, count })
        .collect()
}

impl MetricsSnapshot {
    /// A snapshot of a pipeline's counters (merge the workers' counters
    /// first with [`Counters::merge`]); uptime, generation, port-level
    /// counts and extras are left empty.
    pub fn from_counters(c: &Counters) -> MetricsSnapshot {
        // The IP pipeline always drops TTL-expired frames.
        let miss_drops = c
            .dropped
            .saturating_sub(c.hits.drop)
            .saturating_sub(c.ttl_expired)
            .saturating_sub(c.malformed.total());
        let mut drops = BTreeMap::new();
        for (reason, n) in [
            ("action", c.hits.drop),
            ("miss", miss_drops),
            ("ttl_expired", c.ttl_expired),
        ] {
            if n > 0 {
                drops.insert(reason.to_string(), n);
            }
        }
        let mut malformed = BTreeMap::new();
        for (k, n) in c.malformed.iter() {
            malformed.insert(k.name().to_string(), n);
            if n > 0 {
                drops.insert(k.name().to_string(), n);
            }
        }
        MetricsSnapshot {
            frames_in: c.frames_in,
            bytes_in: c.bytes_in,
            forwarded: c.forwarded,
            dropped: c.dropped,
            punted: c.punted,
            rx: port_metrics(c.rx_ports()),
            tx: port_metrics(c.tx_ports()),
            drops,
            actions: ActionMetrics {
                port: c.hits.port,
                port_set: c.hits.port_set,
                drop: c.hits.drop,
                controller: c.hits.controller,
            },
            misses: c.misses,
            malformed,
            ..MetricsSnapshot::default()
        }
    }

    /// Add the live loop's port-level counts (ring drops, partly captured
    /// frames, tx failures).
    #[cfg(target_os = "linux")]
    pub fn with_port_stats(mut self, p: &crate::live::PortStats) -> MetricsSnapshot {
        self.ring_drops = port_counts(&p.ring_drops);
        self.rx_truncated = port_counts(&p.rx_truncated);
        self.tx_failed = port_counts(&p.tx_failed);
        self
    }

    /// Set the per-port counts from `(port, count)` lists, for callers
    /// that keep them in their own form.
    pub fn with_port_counts(
        mut self,
        ring_drops: &[(u16, u64)],
        rx_truncated: &[(u16, u64)],
        tx_failed: &[(u16, u64)],
    ) -> MetricsSnapshot {
        self.ring_drops = port_counts(ring_drops);
        self.rx_truncated = port_counts(rx_truncated);
        self.tx_failed = port_counts(tx_failed);
        self
    }

    /// Set the uptime.
    pub fn with_uptime(mut self, uptime: Duration) -> MetricsSnapshot {
        self.uptime_seconds = uptime.as_secs_f64();
        self
    }

    /// Set the FIB generation.
    pub fn with_fib_generation(mut self, generation: u64) -> MetricsSnapshot {
        self.fib_generation = generation;
        self
    }

    /// Add an extra counter (`name` without the `nexthop_` prefix).
    pub fn with_counter(
        self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        value: u64,
    ) -> MetricsSnapshot {
        self.with_metric(name, help, MetricKind::Counter, labels, value as f64)
    }

    /// Add an extra gauge (`name` without the `nexthop_` prefix).
    pub fn with_gauge(
        self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        value: f64,
    ) -> MetricsSnapshot {
        self.with_metric(name, help, MetricKind::Gauge, labels, value)
    }

    fn with_metric(
        mut self,
        name: &str,
        help: &str,
        kind: MetricKind,
        labels: &[(&str, &str)],
        value: f64,
    ) -> MetricsSnapshot {
        self.extra.push(NamedMetric {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value,
        });
        self
    }

    /// Frames received on all input ports.
    pub fn rx_frames_total(&self) -> u64 {
        self.rx.iter().map(|p| p.frames).sum()
    }

    /// Frames counted out on all output ports.
    pub fn tx_frames_total(&self) -> u64 {
        self.tx.iter().map(|p| p.frames).sum()
    }

    /// The snapshot as JSON (one line).
    pub fn to_json(&self) -> String {
        // Serializing plain structs, maps with string keys and f64s
        // cannot fail; keep a valid document should that ever change.
        serde_json::to_string(self)
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string())
    }

    /// Read a snapshot written by [`MetricsSnapshot::to_json`] (missing
    /// fields read as zero or empty).
    ///
    /// # Errors
    /// The text is not JSON of that shape.
    pub fn from_json(text: &str) -> Result<MetricsSnapshot, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The snapshot in the Prometheus text exposition format 0.0.4.
    pub fn to_prometheus_text(&self) -> String {
        let mut w = PromWriter::default();
        w.family(
            "uptime_seconds",
            "Seconds since the forwarder started.",
            MetricKind::Gauge,
        );
        w.sample("uptime_seconds", &[], self.uptime_seconds);
        w.family(
            "fib_generation",
            "Generation of the FIB in use.",
            MetricKind::Gauge,
        );
        w.int("fib_generation", &[], self.fib_generation);
        for (name, help, v) in [
            (
                "frames_in_total",
                "Frames given to the pipeline.",
                self.frames_in,
            ),
            (
                "bytes_in_total",
                "Bytes given to the pipeline.",
                self.bytes_in,
            ),
            (
                "forwarded_total",
                "Frames sent out of at least one port.",
                self.forwarded,
            ),
            (
                "dropped_total",
                "Frames discarded, all reasons.",
                self.dropped,
            ),
            (
                "punted_total",
                "Frames punted to the controller.",
                self.punted,
            ),
            ("misses_total", "Names the FIB does not know.", self.misses),
        ] {
            w.family(name, help, MetricKind::Counter);
            w.int(name, &[], v);
        }
        for (name, help, ports, bytes) in [
            (
                "rx_frames_total",
                "Frames received per input port.",
                &self.rx,
                false,
            ),
            (
                "rx_bytes_total",
                "Bytes received per input port.",
                &self.rx,
                true,
            ),
            (
                "tx_frames_total",
                "Frames sent per output port (copies).",
                &self.tx,
                false,
            ),
            (
                "tx_bytes_total",
                "Bytes sent per output port (copies).",
                &self.tx,
                true,
            ),
        ] {
            w.family(name, help, MetricKind::Counter);
            for p in ports.iter() {
                let port = p.port.to_string();
                let v = if bytes { p.bytes } else { p.frames };
                w.int(name, &[("port", &port)], v);
            }
        }
        w.family(
            "drops_total",
            "Dropped frames by reason.",
            MetricKind::Counter,
        );
        for (reason, &n) in &self.drops {
            w.int("drops_total", &[("reason", reason)], n);
        }
        w.family(
            "action_hits_total",
            "Frames whose name matched, by action kind.",
            MetricKind::Counter,
        );
        let a = &self.actions;
        for (kind, n) in [
            ("port", a.port),
            ("port_set", a.port_set),
            ("drop", a.drop),
            ("controller", a.controller),
        ] {
            w.int("action_hits_total", &[("action", kind)], n);
        }
        w.family(
            "malformed_total",
            "Frames that could not be named, by reason.",
            MetricKind::Counter,
        );
        for (reason, &n) in &self.malformed {
            w.int("malformed_total", &[("reason", reason)], n);
        }
        for (name, help, counts) in [
            (
                "ring_drops_total",
                "Frames the kernel dropped because the receive ring was full.",
                &self.ring_drops,
            ),
            (
                "rx_truncated_total",
                "Frames skipped because they were captured in part.",
                &self.rx_truncated,
            ),
            (
                "tx_failed_total",
                "Frames the kernel refused to send.",
                &self.tx_failed,
            ),
        ] {
            w.family(name, help, MetricKind::Counter);
            for c in counts.iter() {
                let port = c.port.to_string();
                w.int(name, &[("port", &port)], c.count);
            }
        }
        // Extras: one family per name, in first-seen order.
        let mut names: Vec<String> = Vec::new();
        for m in &self.extra {
            let n = metric_name(&m.name);
            if !names.contains(&n) {
                names.push(n);
            }
        }
        for n in &names {
            let mut first = true;
            for m in self.extra.iter().filter(|m| metric_name(&m.name) == *n) {
                if first {
                    w.family(n, &m.help, m.kind);
                    first = false;
                }
                let labels: Vec<(String, &str)> = m
                    .labels
                    .iter()
                    .map(|(k, v)| (label_name(k), v.as_str()))
                    .collect();
                let labels: Vec<(&str, &str)> =
                    labels.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                w.sample(n, &labels, m.value);
            }
        }
        w.out
    }
}

#[derive(Default)]
struct PromWriter {
    out: String,
}

impl PromWriter {
    fn family(&mut self, name: &str, help: &str, kind: MetricKind) {
        let _ = writeln!(
            self.out,
            "# HELP {PREFIX}{name} {}\n# TYPE {PREFIX}{name} {}",
            escape_help(help),
            kind.name()
        );
    }

    fn labels(&mut self, name: &str, labels: &[(&str, &str)]) {
        self.out.push_str(PREFIX);
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label_value(v));
            }
            self.out.push('}');
        }
    }

    fn int(&mut self, name: &str, labels: &[(&str, &str)], v: u64) {
        self.labels(name, labels);
        let _ = writeln!(self.out, " {v}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.labels(name, labels);
        let _ = writeln!(self.out, " {}", prom_float(v));
    }
}

/// A float as Prometheus writes it (`+Inf`, `-Inf`, `NaN`).
fn prom_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{v}")
    }
}

/// Escape a label value: backslash, double quote and line feed.
pub fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Escape help text: backslash and line feed.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A valid metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`): others become `_`.
fn metric_name(n: &str) -> String {
    sanitize(n, true)
}

/// A valid label name (`[a-zA-Z_][a-zA-Z0-9_]*`): others become `_`.
fn label_name(n: &str) -> String {
    sanitize(n, false)
}

fn sanitize(n: &str, colon: bool) -> String {
    let mut s: String = n
        .chars()
        .enumerate()
        .map(|(i, c)| {
            let ok = c.is_ascii_alphabetic()
                || c == '_'
                || (colon && c == ':')
                || (i > 0 && c.is_ascii_digit());
            if ok {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('_');
    }
    s
}

/// Where and how a [`MetricsServer`] listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Address to listen on (port 0: any free port).
    pub addr: SocketAddr,
    /// Allow an address that is not loopback (the endpoint has no
    /// authentication: anyone who can reach it reads the counters).
    pub allow_non_loopback: bool,
    /// Longest time a client may take, from its accept, to send its whole
    /// request head, and the write timeout of the response; slower clients
    /// get `408` and are closed.
    pub io_timeout: Duration,
    /// Most connections open at once (reading a request or being
    /// answered); a connection beyond it is answered `503` at once,
    /// counted and logged.
    pub max_connections: usize,
}

impl Default for MetricsConfig {
    fn default() -> MetricsConfig {
        MetricsConfig {
            addr: DEFAULT_METRICS_ADDR,
            allow_non_loopback: false,
            io_timeout: IO_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// The endpoint's own counters, from [`MetricsServer::stats`] and appended
/// to every `/metrics` answer as `nexthop_metrics_http_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointStats {
    /// Connections accepted (served or refused).
    pub accepted: u64,
    /// Connections answered `503` because [`MetricsConfig::max_connections`]
    /// were open.
    pub refused: u64,
    /// Connections answered `408` because their request head was not
    /// complete at the deadline.
    pub timed_out: u64,
    /// Requests answered (any status but `503` and `408`).
    pub answered: u64,
    /// Connections open now.
    pub active: u64,
}

/// Shared between the accept thread, the connection threads and
/// [`MetricsServer::stats`].
#[derive(Debug, Default)]
struct EndpointCounters {
    accepted: AtomicU64,
    refused: AtomicU64,
    timed_out: AtomicU64,
    answered: AtomicU64,
    active: AtomicUsize,
    /// When a refusal was last logged (ms since `start`), to log at most
    /// one line a second while a flood is refused.
    last_refusal_log_ms: AtomicU64,
}

impl EndpointCounters {
    fn stats(&self) -> EndpointStats {
        EndpointStats {
            accepted: self.accepted.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
            answered: self.answered.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed) as u64,
        }
    }
}

impl EndpointStats {
    /// The counters in the Prometheus text format, as appended to
    /// `/metrics`.
    pub fn to_prometheus_text(&self) -> String {
        let mut w = PromWriter::default();
        let counters = [
            (
                "metrics_http_connections_total",
                "Connections the metrics endpoint accepted.",
                self.accepted,
            ),
            (
                "metrics_http_refused_total",
                "Connections answered 503 because the connection cap was reached.",
                self.refused,
            ),
            (
                "metrics_http_timed_out_total",
                "Connections answered 408 because the request head missed its deadline.",
                self.timed_out,
            ),
            (
                "metrics_http_answered_total",
                "Requests the metrics endpoint answered (not counting 503 and 408).",
                self.answered,
            ),
        ];
        for (name, help, v) in counters {
            w.family(name, help, MetricKind::Counter);
            w.int(name, &[], v);
        }
        w.family(
            "metrics_http_connections_active",
            "Connections open on the metrics endpoint.",
            MetricKind::Gauge,
        );
        w.int("metrics_http_connections_active", &[], self.active);
        w.out
    }
}

/// Why a [`MetricsServer`] did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// The address is not loopback and that was not allowed.
    #[error(
        "metrics address {addr} is not a loopback address; the endpoint has no \
         authentication, so allow non-loopback addresses explicitly to listen there"
    )]
    NonLoopback {
        /// The refused address.
        addr: SocketAddr,
    },
    /// Binding or setting up the socket failed.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause (part of the message, so not a `source()`).
        error: io::Error,
    },
    /// [`MetricsConfig::io_timeout`] is zero.
    #[error("the metrics endpoint's I/O timeout must be more than zero")]
    ZeroTimeout,
    /// [`MetricsConfig::max_connections`] is zero.
    #[error("the metrics endpoint's connection cap must be at least 1")]
    ZeroConnections,
    /// The accept thread could not be started.
    #[error("cannot start the metrics thread: {0}")]
    Thread(io::Error),
}

/// An HTTP endpoint serving `GET /metrics` (Prometheus text) and
/// `GET /stats.json` (JSON); other paths get `404`, other methods `405`.
/// Dropping it stops the accept thread and waits for it.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    counters: Arc<EndpointCounters>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Serve on `addr`, which must be loopback (see
    /// [`MetricsServer::start_with`] to allow others).
    ///
    /// # Errors
    /// See [`MetricsError`].
    pub fn start(
        addr: SocketAddr,
        provider: SnapshotProvider,
    ) -> Result<MetricsServer, MetricsError> {
        MetricsServer::start_with(
            &MetricsConfig {
                addr,
                ..MetricsConfig::default()
            },
            provider,
        )
    }

    /// Serve as `config` says.
    ///
    /// # Errors
    /// See [`MetricsError`].
    pub fn start_with(
        config: &MetricsConfig,
        provider: SnapshotProvider,
    ) -> Result<MetricsServer, MetricsError> {
        let addr = config.addr;
        if config.io_timeout.is_zero() {
            return Err(MetricsError::ZeroTimeout);
        }
        if config.max_connections == 0 {
            return Err(MetricsError::ZeroConnections);
        }
        let limits = Limits {
            io_timeout: config.io_timeout,
            max_connections: config.max_connections,
        };
        if !addr.ip().is_loopback() && !config.allow_non_loopback {
            return Err(MetricsError::NonLoopback { addr });
        }
        let bind_err = |error| MetricsError::Bind { addr, error };
        let listener = TcpListener::bind(addr).map_err(bind_err)?;
        let local = listener.local_addr().map_err(bind_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let counters = Arc::new(EndpointCounters::default());
        let counters2 = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("nexthop-metrics".to_string())
            .spawn(move || accept_loop(listener, provider, stop2, limits, counters2))
            .map_err(MetricsError::Thread)?;
        tracing::info!(
            addr = %local,
            max_connections = limits.max_connections,
            "metrics endpoint listening"
        );
        Ok(MetricsServer {
            addr: local,
            stop,
            counters,
            thread: Some(thread),
        })
    }

    /// The endpoint's own counters now.
    pub fn stats(&self) -> EndpointStats {
        self.counters.stats()
    }

    /// The address it listens on (with the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        let woke = TcpStream::connect_timeout(&wake, Duration::from_secs(2)).is_ok();
        if let Some(t) = self.thread.take() {
            if woke {
                let _ = t.join();
            }
            // Otherwise leave the thread behind rather than hang: it exits
            // at its next accept.
        }
    }
}

/// What the accept loop and the connections need from the config.
#[derive(Clone, Copy, Debug)]
struct Limits {
    io_timeout: Duration,
    max_connections: usize,
}

/// Decrements the connection count when a connection thread ends,
/// however it ends.
struct Slot(Arc<EndpointCounters>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(
    listener: TcpListener,
    provider: SnapshotProvider,
    stop: Arc<AtomicBool>,
    limits: Limits,
    counters: Arc<EndpointCounters>,
) {
    let started = Instant::now();
    let io_timeout = limits.io_timeout;
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let mut stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "metrics accept failed");
                // Out of descriptors and the like: do not spin.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // The request deadline runs from the accept.
        let deadline = Instant::now() + io_timeout;
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_read_timeout(Some(io_timeout));
        let _ = stream.set_write_timeout(Some(io_timeout));
        if counters.active.fetch_add(1, Ordering::SeqCst) >= limits.max_connections {
            counters.active.fetch_sub(1, Ordering::SeqCst);
            refuse(&mut stream, &counters, started, limits.max_connections);
            continue;
        }
        let slot = Slot(Arc::clone(&counters));
        let provider = Arc::clone(&provider);
        let conn_counters = Arc::clone(&counters);
        let spawned = std::thread::Builder::new()
            .name("nexthop-metrics-conn".to_string())
            .stack_size(CONNECTION_STACK_BYTES)
            .spawn(move || {
                let _slot = slot;
                serve_connection(stream, &provider, deadline, io_timeout, &conn_counters);
            });
        if let Err(e) = spawned {
            // The closure (and its slot) was dropped with the error.
            tracing::warn!(error = %e, "cannot start a metrics connection thread");
        }
    }
}

/// Answer `503` to a connection beyond the cap, count it, and log it (at
/// most one line a second, with the running total).
fn refuse(
    stream: &mut TcpStream,
    counters: &EndpointCounters,
    started: Instant,
    max_connections: usize,
) {
    let total = counters.refused.fetch_add(1, Ordering::Relaxed) + 1;
    let now_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let last = counters.last_refusal_log_ms.load(Ordering::Relaxed);
    if total == 1 || now_ms.saturating_sub(last) >= 1000 {
        counters
            .last_refusal_log_ms
            .store(now_ms, Ordering::Relaxed);
        tracing::warn!(
            max_connections,
            refused_total = total,
            "metrics endpoint at its connection cap: refusing connections with 503"
        );
    }
    let _ = write_response(
        stream,
        &Response::text(503, "too many connections\n"),
        false,
    );
}

struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    allow: bool,
}

impl Response {
    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.to_string(),
            allow: false,
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

fn write_response(stream: &mut TcpStream, r: &Response, head_only: bool) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason_phrase(r.status),
        r.content_type,
        r.body.len()
    );
    if r.allow {
        head.push_str("Allow: GET, HEAD\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(r.body.as_bytes())?;
    }
    stream.flush()
}

/// Outcome of reading a request head.
enum Head {
    Complete(Vec<u8>),
    TooLarge,
    TimedOut,
    Closed,
}

/// Read up to the blank line that ends the head, at most
/// [`MAX_REQUEST_BYTES`], before `deadline` (a client trickling bytes
/// does not hold the connection past it).
fn read_head(stream: &mut TcpStream, deadline: Instant) -> Head {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&buf) {
            buf.truncate(end);
            return Head::Complete(buf);
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return Head::TooLarge;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Head::TimedOut;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Head::Closed,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Head::TimedOut
            }
            Err(_) => return Head::Closed,
        }
    }
}

fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
    .filter(|&e| e <= MAX_REQUEST_BYTES)
}

/// The response to a request head (method, target, version); `/metrics`
/// ends with the endpoint's own counters, `endpoint`.
fn respond(
    head: &[u8],
    provider: &SnapshotProvider,
    endpoint: &EndpointCounters,
) -> (Response, bool) {
    let Ok(text) = std::str::from_utf8(head) else {
        return (Response::text(400, "request is not UTF-8\n"), false);
    };
    let line = text.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (Response::text(400, "malformed request line\n"), false);
    };
    if method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !target.starts_with('/')
        || !matches!(version, "HTTP/1.0" | "HTTP/1.1")
    {
        return (Response::text(400, "malformed request line\n"), false);
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let mut r = Response::text(405, "only GET and HEAD are allowed\n");
        r.allow = true;
        return (r, false);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let prometheus;
    let content_type;
    match path {
        "/metrics" => {
            prometheus = true;
            content_type = "text/plain; version=0.0.4";
        }
        "/stats.json" => {
            prometheus = false;
            content_type = "application/json";
        }
        _ => {
            return (
                Response::text(404, "not found: try /metrics or /stats.json\n"),
                head_only,
            )
        }
    }
    let render = || {
        let snapshot = provider();
        if prometheus {
            let mut text = snapshot.to_prometheus_text();
            text.push_str(&endpoint.stats().to_prometheus_text());
            text
        } else {
            snapshot.to_json()
        }
    };
    match catch_unwind(AssertUnwindSafe(render)) {
        Ok(body) => (
            Response {
                status: 200,
                content_type,
                body,
                allow: false,
            },
            head_only,
        ),
        Err(_) => {
            tracing::error!("metrics snapshot provider panicked");
            (Response::text(500, "snapshot provider failed\n"), head_only)
        }
    }
}

/// Read one request before `deadline` and answer it; the response write
/// has `io_timeout`.
fn serve_connection(
    mut stream: TcpStream,
    provider: &SnapshotProvider,
    deadline: Instant,
    io_timeout: Duration,
    counters: &EndpointCounters,
) {
    let head = read_head(&mut stream, deadline);
    let _ = stream.set_write_timeout(Some(io_timeout));
    let (response, head_only) = match head {
        Head::Complete(h) => respond(&h, provider, counters),
        Head::TooLarge => (Response::text(431, "request head too large\n"), false),
        Head::TimedOut => (Response::text(408, "request timed out\n"), false),
        Head::Closed => return,
    };
    if response.status == 408 {
        counters.timed_out.fetch_add(1, Ordering::Relaxed);
    } else {
        counters.answered.fetch_add(1, Ordering::Relaxed);
    }
    if response.status >= 400 {
        tracing::debug!(status = response.status, "metrics request refused");
    }
    let _ = write_response(&mut stream, &response, head_only);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    // Drain what the client still sends (briefly) so closing does not
    // reset the connection before it read the response.
    let until = Instant::now() + Duration::from_millis(500);
    let mut sink = [0u8; 1024];
    let mut drained = 0usize;
    while drained < 64 * 1024 {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Why [`fetch_snapshot`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The address did not resolve.
    #[error("cannot resolve {addr}: {error}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// The cause (part of the message, so not a `source()`).
        error: io::Error,
    },
    /// Nothing accepted a connection there.
    #[error(
        "cannot connect to {addr}: {error}; is a forwarder's metrics endpoint listening there?"
    )]
    Connect {
        /// The address as given.
        addr: String,
        /// The cause (of the last address tried).
        error: io::Error,
    },
    /// Sending the request or reading the response failed.
    #[error("reading from {addr}: {error}")]
    Io {
        /// The address as given.
        addr: String,
        /// The cause (part of the message, so not a `source()`).
        error: io::Error,
    },
    /// The response was not HTTP, not `200` or longer than allowed.
    #[error("bad response from {addr}: {what}")]
    BadResponse {
        /// The address as given.
        addr: String,
        /// What was wrong.
        what: String,
    },
    /// The body was not a snapshot.
    #[error("response from {addr} is not a stats document: {error}")]
    Json {
        /// The address as given.
        addr: String,
        /// The cause (part of the message, so not a `source()`).
        error: serde_json::Error,
    },
}

/// Fetch `/stats.json` from the metrics endpoint at `addr` (`HOST:PORT`),
/// waiting at most `timeout` to connect and for each read.
///
/// # Errors
/// See [`FetchError`].
pub fn fetch_snapshot(addr: &str, timeout: Duration) -> Result<MetricsSnapshot, FetchError> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|error| FetchError::Resolve {
            addr: addr.to_string(),
            error,
        })?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let Some(mut stream) = stream else {
        return Err(FetchError::Connect {
            addr: addr.to_string(),
            error: last,
        });
    };
    let io_err = |error| FetchError::Io {
        addr: addr.to_string(),
        error,
    };
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_write_timeout(Some(timeout)).map_err(io_err)?;
    let req = format!(
        "GET /stats.json HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).map_err(io_err)?;
    let mut raw = Vec::new();
    (&mut stream)
        .take(MAX_RESPONSE_BYTES as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(io_err)?;
    let bad = |what: String| FetchError::BadResponse {
        addr: addr.to_string(),
        what,
    };
    if raw.len() > MAX_RESPONSE_BYTES {
        return Err(bad(format!("longer than {MAX_RESPONSE_BYTES} bytes")));
    }
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Err(bad("no HTTP header".to_string()));
    };
    let head = String::from_utf8_lossy(&raw[..end]);
    let body = &raw[end + 4..];
    let status_line = head.lines().next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(bad(format!("status line {status_line:?}")));
    };
    if !version.starts_with("HTTP/") {
        return Err(bad(format!("status line {status_line:?}")));
    }
    if code != "200" {
        return Err(bad(format!("status {}", status_line.trim())));
    }
    let body = std::str::from_utf8(body).map_err(|e| bad(format!("body is not UTF-8: {e}")))?;
    MetricsSnapshot::from_json(body).map_err(|error| FetchError::Json {
        addr: addr.to_string(),
        error,
    })
}

mod logging;
pub use logging::{init_logging, init_logging_at, LoggingError, DEFAULT_LOG_FILTER};

#[cfg(test)]
mod tests;
