//! `nexthop run`: forward frames between live Linux interfaces through a
//! FIB directory, or the FIB a controller serves (`--controller`, followed
//! live), run to completion on each of `--workers` threads, until a
//! signal, a duration or a frame count.
//!
//! Glue only: the ports, the workers and their loop, and the output lines
//! are `nexthop_dataplane::engine` (over `afpacket` and `afxdp`); this
//! module parses the flags and the configuration file, maps FIB port
//! numbers to interfaces and checks the mapping, makes one pipeline per
//! worker, has `engine::open_ports` open each worker's ports (`--io`:
//! AF_PACKET by default; `auto`: AF_XDP where it binds, else AF_PACKET,
//! saying why in a log warning), makes one call to `Engine::run`, and
//! prints progress (stderr) and the summary (stdout).
//! With `--controller`, a `nexthop_control::FibFollower` keeps the table:
//! it is adapted to the engine's refresh (`engine::Follow` over
//! [`Followed`]), so before each group of frames a worker takes its
//! current table once and swaps it into the pipeline when it changed
//! (rebuilding the action resolution when the action table changed). With
//! `--redis URL --fib NAME` a `nexthop_control::RedisFollower` keeps it
//! the same way, following FIB NAME through Redis. The
//! contract is in `docs/dataplane.md` ("Live ports", "Live updates", "The
//! engine").
//!
//! With `--lpm TABLE --neighbors FILE` the workers run the IP pipeline
//! (`nexthop_dataplane::IpPipeline`) instead: IPv4/IPv6 routing by
//! longest-prefix match, ports named by the neighbour file
//! (`docs/dataplane.md`, "The IP pipeline").

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use nexthop_control::{
    AuthKey, FibFollower, FollowerConfig, FollowerStats, RedisFollower, RedisFollowerConfig, Table,
};
use nexthop_dataplane::affinity;
use nexthop_dataplane::afpacket::{FanoutMode, RingConfig};
use nexthop_dataplane::engine::{
    io_list, open_ports, progress_line, summary_line, Engine, EngineConfig, FibSnapshot, Follow,
    IoMode, LiveTable, NoRefresh, PortsConfig, PortsError, Report, Worker, XdpAttach,
};
use nexthop_dataplane::live::{LivePorts, PortStats, StopAfter, StopFlag};
use nexthop_dataplane::metrics::{MetricsConfig, MetricsServer, MetricsSnapshot, SharedSnapshot};
use nexthop_dataplane::{
    Counters, IpConfig, IpPipeline, MissPolicy, NameSource, Pipeline, PipelineConfig,
};
use nexthop_othello::fib::{Action, ActionTable, KeyType};
use nexthop_othello::Query;
use serde::Deserialize;

use crate::cmd_fib::open_lookup;
use crate::cmd_forward::open_ip;

/// `N=IFACE`: FIB port `N` is interface `IFACE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMap {
    pub(crate) port: u16,
    pub(crate) iface: String,
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

/// `nexthop run` arguments. Every setting can also come from a TOML file
/// (`--config`, see `docs/dataplane.md`); a flag given on the command line
/// wins over the file.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// TOML configuration file (ports, workers, ring, table, metrics).
    /// Flags override its values; unknown keys are errors.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// FIB directory (made by `nexthop fib build`). With --controller it
    /// is the table until the controller's first snapshot arrives. With
    /// --redis it is instead the FIB's name in Redis (`--fib NAME`, column
    /// 0), or `NAME/COLUMN`: one switch's column of a network FIB.
    #[arg(long, value_name = "DIR|NAME[/COLUMN]")]
    fib: Option<PathBuf>,
    /// Follow FIB --fib NAME through the Redis at this URL
    /// (`redis://HOST:PORT/`, `unix:///PATH`), as `nexthop controller
    /// --redis` publishes it: its latest snapshot, then its delta stream.
    /// Needs --key-file (the controller's shared secret).
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Follow the FIB this controller serves (`nexthop controller`):
    /// snapshots replace the table, deltas update it in place while
    /// frames flow. Needs --key-file.
    #[arg(long, value_name = "ADDR")]
    controller: Option<SocketAddr>,
    /// Shared secret file of the controller (at least 16 bytes).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// IP pipeline: route IPv4/IPv6 frames by longest-prefix match in
    /// this Bloomfwd table (`nexthop lpm build`) instead of a FIB; needs
    /// --neighbors.
    #[arg(long, value_name = "FILE")]
    lpm: Option<PathBuf>,
    /// IP pipeline: the neighbour file (`NEXT-HOP PORT DST-MAC SRC-MAC`
    /// per line); its ports are the ports frames are sent on.
    #[arg(long, value_name = "FILE")]
    neighbors: Option<PathBuf>,
    /// Key type of the controller's FIB when there is no --fib (mac,
    /// ipv4, ipv6, u64 or str; default mac).
    #[arg(long, value_name = "TYPE")]
    key_type: Option<KeyType>,
    /// Without --fib: seconds to wait for the controller's first snapshot
    /// (default 30).
    #[arg(long, value_name = "SECS")]
    snapshot_wait: Option<f64>,
    /// FIB port N is interface IFACE (repeat for each port). Every port
    /// that an action of the FIB names must be mapped.
    #[arg(long = "port", value_name = "N=IFACE")]
    ports: Vec<PortMap>,
    /// Input port(s) to receive on (repeatable; default: port 0).
    #[arg(long = "in", value_name = "N")]
    inputs: Vec<u16>,
    /// Worker threads (default 1). Each worker has its own receive ring on
    /// every input, joined in a PACKET_FANOUT group, its own transmit
    /// sockets and pipeline, and runs frames to completion.
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// How the kernel splits frames among workers: hash (flow order
    /// kept; the default), lb (round robin), cpu or queue.
    #[arg(long, value_name = "MODE")]
    fanout: Option<FanoutMode>,
    /// Port I/O: afpacket (TPACKET_V3 rings and sendmmsg; the default),
    /// auto (AF_XDP on each port where a socket binds, else AF_PACKET with
    /// a message saying why) or afxdp (AF_XDP or an error). AF_XDP
    /// runs one worker per queue: worker W binds queue --xdp-queue + W.
    #[arg(long, value_name = "IO")]
    io: Option<IoMode>,
    /// AF_XDP: how the receive program attaches: auto (native, else
    /// generic; the default), skb (generic) or native.
    #[arg(long, value_name = "MODE")]
    xdp_mode: Option<XdpAttach>,
    /// AF_XDP: the first interface queue to bind (default 0; veth has
    /// only queue 0, so binding another fails, and `--io auto` falls back
    /// to AF_PACKET).
    #[arg(long, value_name = "Q")]
    xdp_queue: Option<u32>,
    /// Pin worker W to the W-th CPU of LIST (cycling when there are more
    /// workers), e.g. `1` or `2-5`. Default: not pinned.
    #[arg(long, value_name = "LIST")]
    worker_cpus: Option<String>,
    /// Pin every other thread (the follower that applies FIB deltas, the
    /// metrics threads, the main thread) to the CPUs of LIST, e.g. `0`.
    /// Default: not pinned.
    #[arg(long, value_name = "LIST")]
    control_cpus: Option<String>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Stop once this many frames were received (one worker only).
    #[arg(long, value_name = "N")]
    packets: Option<u64>,
    /// The name of a frame (as for `nexthop forward`): dst-mac (default),
    /// 5tuple or bytes:OFFSET:LEN.
    #[arg(long, value_name = "SOURCE")]
    name: Option<NameSource>,
    /// Unknown names: drop (default), controller (counted as punted; no
    /// controller port here) or flood.
    #[arg(long, value_name = "POLICY")]
    miss: Option<MissPolicy>,
    /// Receive ring block size in bytes (a power of two, >= one page;
    /// default 262144).
    #[arg(long, value_name = "BYTES")]
    block_size: Option<usize>,
    /// Receive ring blocks per input and worker (default 64).
    #[arg(long, value_name = "N")]
    block_count: Option<usize>,
    /// Receive ring frame slot size (a multiple of 16; default 2048).
    #[arg(long, value_name = "BYTES")]
    frame_size: Option<usize>,
    /// Milliseconds before the kernel hands over a partly filled block
    /// (default 1).
    #[arg(long, value_name = "MS")]
    block_timeout_ms: Option<u32>,
    /// Benchmark baseline: send every frame to port P without a table
    /// lookup (the frame is still named), instead of using a FIB.
    #[arg(long, value_name = "P")]
    trivial_port: Option<u16>,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Serve the counters at http://ADDR/metrics (Prometheus text) and
    /// /stats.json (read them with `nexthop stats --addr ADDR`). Loopback
    /// only unless --metrics-allow-remote.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<std::net::SocketAddr>,
    /// Allow --metrics on an address that is not loopback.
    #[arg(long)]
    metrics_allow_remote: bool,
}

/// The `[ring]` table of a run configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RingFile {
    block_size: Option<usize>,
    block_count: Option<usize>,
    frame_size: Option<usize>,
    block_timeout_ms: Option<u32>,
}

/// A run configuration file: the same settings as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunFile {
    fib: Option<PathBuf>,
    lpm: Option<PathBuf>,
    neighbors: Option<PathBuf>,
    controller: Option<SocketAddr>,
    redis: Option<String>,
    key_file: Option<PathBuf>,
    key_type: Option<String>,
    snapshot_wait: Option<f64>,
    /// Port number (as a string key) to interface name.
    ports: Option<BTreeMap<String, String>>,
    inputs: Option<Vec<u16>>,
    workers: Option<usize>,
    fanout: Option<String>,
    io: Option<String>,
    xdp_mode: Option<String>,
    xdp_queue: Option<u32>,
    worker_cpus: Option<String>,
    control_cpus: Option<String>,
    duration: Option<f64>,
    packets: Option<u64>,
    name: Option<String>,
    miss: Option<String>,
    ring: Option<RingFile>,
    quiet: Option<bool>,
    metrics: Option<SocketAddr>,
    metrics_allow_remote: Option<bool>,
}

/// The most workers a run may ask for.
pub const MAX_WORKERS: usize = 64;

/// Every setting of a run, from flags over the file over defaults, checked.
#[derive(Debug)]
struct Settings {
    trivial_port: Option<u16>,
    fib: Option<PathBuf>,
    /// The IP pipeline's LPM table and neighbour file.
    ip: Option<(PathBuf, PathBuf)>,
    controller: Option<(SocketAddr, PathBuf)>,
    /// Redis URL, FIB name and column, key file.
    redis: Option<(String, (String, u32), PathBuf)>,
    key_type: KeyType,
    snapshot_wait: Duration,
    ports: Vec<PortMap>,
    inputs: Vec<u16>,
    workers: usize,
    fanout: FanoutMode,
    io: IoMode,
    // Checked and kept without the `afxdp` feature too, so that a
    // configuration means the same in both builds; only AF_XDP uses them.
    xdp_mode: XdpAttach,
    xdp_queue: u32,
    /// CPUs for the workers (worker W: entry W mod len) and for the other
    /// threads; empty: not pinned.
    worker_cpus: Vec<usize>,
    control_cpus: Vec<usize>,
    after: StopAfter,
    name: NameSource,
    miss: MissPolicy,
    ring: RingConfig,
    quiet: bool,
    metrics: Option<SocketAddr>,
    metrics_allow_remote: bool,
}

/// Parse `text` (from `path`) as a run configuration file. A UTF-8
/// byte-order mark at the start is skipped, as by every nexthop text parser.
fn parse_run_file(text: &str, path: &Path) -> Result<RunFile> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    toml::from_str(text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// `NAME` (column 0) or `NAME/COLUMN` (a network FIB's column, below
/// [`nexthop_control::redis_bus::MAX_COLUMNS`]).
fn fib_column(s: &str) -> Option<(String, u32)> {
    match s.rsplit_once('/') {
        None => Some((s.to_owned(), 0)),
        Some((name, col)) => {
            let c: u32 = col.parse().ok()?;
            ((c as usize) < nexthop_control::redis_bus::MAX_COLUMNS && !col.starts_with('+'))
                .then(|| (name.to_owned(), c))
        }
    }
}

fn positive_secs(what: &str, s: f64) -> Result<Duration> {
    if s.is_finite() && s > 0.0 && s < 1e9 {
        Ok(Duration::from_secs_f64(s))
    } else {
        bail!("{what} {s}: expected a positive number of seconds")
    }
}

impl Settings {
    fn resolve(a: RunArgs) -> Result<Settings> {
        let (file, base) = match &a.config {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading {}", p.display()))?;
                let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
                (parse_run_file(&text, p)?, base)
            }
            None => (RunFile::default(), PathBuf::new()),
        };
        let cfg_name = a
            .config
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string());
        let in_file = |what: &str, e: String| anyhow!("{cfg_name}: {what}: {e}");
        // Paths in the file are relative to the file.
        let rel = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };

        let controller = a.controller.or(file.controller);
        let key_file = a.key_file.or(file.key_file.map(rel));
        // With --redis, --fib names the FIB in Redis (not a path).
        let (fib, redis) = match a.redis.or(file.redis) {
            Some(url) => {
                let Some(name) = a.fib.or(file.fib) else {
                    bail!("--redis needs --fib NAME (the FIB's name in Redis)");
                };
                let Some(name) = name.to_str().and_then(fib_column) else {
                    bail!(
                        "--fib {}: not a valid FIB name (NAME or NAME/COLUMN)",
                        name.display()
                    );
                };
                if controller.is_some() {
                    bail!("--redis and --controller are two ways to follow a FIB: give one");
                }
                let Some(k) = key_file.clone() else {
                    bail!("--redis needs --key-file (the controller's shared secret)");
                };
                (None, Some((url, name, k)))
            }
            None => (a.fib.or(file.fib.map(rel)), None),
        };
        let key_file = if redis.is_some() { None } else { key_file };
        let controller = match (controller, key_file) {
            (Some(c), Some(k)) => Some((c, k)),
            (Some(_), None) => {
                bail!("--controller needs --key-file (the controller's shared secret)")
            }
            (None, Some(_)) => bail!("--key-file is only used with --controller or --redis"),
            (None, None) => None,
        };
        let ip = match (
            a.lpm.or(file.lpm.map(rel)),
            a.neighbors.or(file.neighbors.map(rel)),
        ) {
            (Some(l), Some(n)) => Some((l, n)),
            (Some(_), None) => bail!("--lpm needs --neighbors (the neighbour file)"),
            (None, Some(_)) => bail!("--neighbors is only used with --lpm"),
            (None, None) => None,
        };
        let followed = controller.is_some() || redis.is_some();
        if ip.is_some() {
            if fib.is_some() || followed || a.trivial_port.is_some() {
                bail!(
                    "--lpm replaces the FIB: give it without --fib, --controller or --trivial-port"
                );
            }
            if a.name.is_some() || file.name.is_some() || a.miss.is_some() || file.miss.is_some() {
                bail!("--name and --miss are for the flat-name pipeline, not --lpm (frames without a route are dropped)");
            }
        }
        if a.trivial_port.is_some() && (fib.is_some() || followed) {
            bail!("--trivial-port replaces the table: give it without --fib or --controller");
        }
        if fib.is_none() && !followed && a.trivial_port.is_none() && ip.is_none() {
            bail!("no table: give --fib DIR, --controller ADDR or --lpm FILE --neighbors FILE (flags or --config)");
        }
        let key_type = match (a.key_type, file.key_type) {
            (Some(k), _) => Some(k),
            (None, Some(k)) => Some(
                k.parse::<KeyType>()
                    .map_err(|e| in_file("key_type", e.to_string()))?,
            ),
            (None, None) => None,
        };
        if key_type.is_some() && (fib.is_some() || ip.is_some()) {
            bail!("--key-type is only for a controller's FIB without --fib (a FIB directory records its key type)");
        }
        let mut ports = a.ports;
        if ports.is_empty() {
            for (n, iface) in file.ports.unwrap_or_default() {
                ports.push(
                    format!("{n}={iface}")
                        .parse::<PortMap>()
                        .map_err(|e| in_file("ports", e))?,
                );
            }
        }
        if ports.is_empty() {
            bail!("no ports: map FIB ports to interfaces with --port N=IFACE (or [ports] in --config)");
        }
        let inputs = if a.inputs.is_empty() {
            file.inputs.unwrap_or_default()
        } else {
            a.inputs
        };
        let workers = a.workers.or(file.workers).unwrap_or(1);
        if !(1..=MAX_WORKERS).contains(&workers) {
            bail!("--workers {workers}: expected 1 to {MAX_WORKERS}");
        }
        let fanout = match (a.fanout, file.fanout) {
            (Some(f), _) => f,
            (None, Some(f)) => f.parse().map_err(|e| in_file("fanout", e))?,
            (None, None) => FanoutMode::Hash,
        };
        let io = match (a.io, file.io) {
            (Some(m), _) => m,
            (None, Some(m)) => m.parse().map_err(|e| in_file("io", e))?,
            (None, None) => IoMode::default(),
        };
        let xdp_mode = match (a.xdp_mode, file.xdp_mode) {
            (Some(m), _) => m,
            (None, Some(m)) => m.parse().map_err(|e| in_file("xdp_mode", e))?,
            (None, None) => XdpAttach::default(),
        };
        let xdp_queue = a.xdp_queue.or(file.xdp_queue).unwrap_or(0);
        if !matches!(xdp_queue.checked_add(workers as u32 - 1), Some(q) if q < 1 << 16) {
            bail!(
                "--xdp-queue {xdp_queue}: expected a queue number below 65536 (for every worker)"
            );
        }
        let allowed =
            affinity::allowed_cpus().map_err(|e| anyhow!("reading this process's CPUs: {e}"))?;
        let cpus =
            |flag: &str, key: &str, v: Option<String>, f: Option<String>| -> Result<Vec<usize>> {
                let (text, from_file) = match (v, f) {
                    (Some(t), _) => (t, false),
                    (None, Some(t)) => (t, true),
                    (None, None) => return Ok(Vec::new()),
                };
                let what = |e: String| {
                    if from_file {
                        in_file(key, e)
                    } else {
                        anyhow!("{flag} {text}: {e}")
                    }
                };
                let list = affinity::parse_cpu_list(&text).map_err(&what)?;
                if let Some(c) = list.iter().find(|c| !allowed.contains(c)) {
                    return Err(what(format!(
                        "CPU {c} is not available (this process may use {})",
                        affinity::format_cpu_list(&allowed)
                    )));
                }
                Ok(list)
            };
        let worker_cpus = cpus(
            "--worker-cpus",
            "worker_cpus",
            a.worker_cpus,
            file.worker_cpus,
        )?;
        let control_cpus = cpus(
            "--control-cpus",
            "control_cpus",
            a.control_cpus,
            file.control_cpus,
        )?;
        let duration = a
            .duration
            .or(file.duration)
            .map(|s| positive_secs("--duration", s))
            .transpose()?;
        let packets = match a.packets.or(file.packets) {
            Some(0) => bail!("--packets 0: expected at least 1"),
            Some(_) if workers > 1 => {
                bail!(
                    "--packets counts one worker's frames: use it with --workers 1 (or --duration)"
                )
            }
            n => n,
        };
        let name = match (a.name, file.name) {
            (Some(n), _) => n,
            (None, Some(n)) => {
                n.parse()
                    .map_err(|e: nexthop_dataplane::ParseNameSourceError| {
                        in_file("name", e.to_string())
                    })?
            }
            (None, None) => NameSource::default(),
        };
        let miss = match (a.miss, file.miss) {
            (Some(m), _) => m,
            (None, Some(m)) => {
                m.parse()
                    .map_err(|e: nexthop_dataplane::ParseMissPolicyError| {
                        in_file("miss", e.to_string())
                    })?
            }
            (None, None) => MissPolicy::default(),
        };
        let rf = file.ring.unwrap_or_default();
        let d = RingConfig::default();
        let ring = RingConfig {
            block_size: a.block_size.or(rf.block_size).unwrap_or(d.block_size),
            block_count: a.block_count.or(rf.block_count).unwrap_or(d.block_count),
            frame_size: a.frame_size.or(rf.frame_size).unwrap_or(d.frame_size),
            block_timeout_ms: a
                .block_timeout_ms
                .or(rf.block_timeout_ms)
                .unwrap_or(d.block_timeout_ms),
        };
        ring.validate().map_err(|e| anyhow!("receive ring: {e}"))?;
        let snapshot_wait = positive_secs(
            "--snapshot-wait",
            a.snapshot_wait.or(file.snapshot_wait).unwrap_or(30.0),
        )?;
        Ok(Settings {
            trivial_port: a.trivial_port,
            fib,
            ip,
            controller,
            redis,
            key_type: key_type.unwrap_or(KeyType::Mac),
            snapshot_wait,
            ports,
            inputs,
            workers,
            fanout,
            io,
            xdp_mode,
            xdp_queue,
            worker_cpus,
            control_cpus,
            after: StopAfter {
                duration,
                frames: packets,
            },
            name,
            miss,
            ring,
            quiet: a.quiet || file.quiet.unwrap_or(false),
            metrics: a.metrics.or(file.metrics),
            metrics_allow_remote: a.metrics_allow_remote
                || file.metrics_allow_remote.unwrap_or(false),
        })
    }
}

/// The `--port N=IFACE` maps as port -> interface, each port and each
/// interface mapped once (`nexthop run`, `nexthop cluster run`).
///
/// # Errors
/// A port or an interface mapped twice, named.
pub(crate) fn port_table(ports: &[PortMap]) -> Result<BTreeMap<u16, &str>> {
    nexthop_dataplane::live::port_map(ports.iter().map(|m| (m.port, m.iface.as_str())))
        .map_err(|e| anyhow!(e))
}

/// `nexthop run`.
pub fn run(a: RunArgs) -> Result<()> {
    let st = Settings::resolve(a)?;
    let by_port = port_table(&st.ports)?;
    let inputs: BTreeSet<u16> = if st.inputs.is_empty() {
        if !by_port.contains_key(&0) {
            bail!("no input: map port 0 (--port 0=IFACE) or name inputs with --in N");
        }
        BTreeSet::from([0])
    } else {
        st.inputs.iter().copied().collect()
    };
    for p in &inputs {
        if !by_port.contains_key(p) {
            bail!("--in {p}: port {p} has no interface (add --port {p}=IFACE)");
        }
    }

    let stop = StopFlag::install().map_err(|e| anyhow!("installing signal handlers: {e}"))?;
    // Before any thread starts: threads inherit the main thread's CPUs
    // (workers re-pin themselves to theirs).
    if !st.control_cpus.is_empty() {
        affinity::pin_current_thread(&st.control_cpus)
            .map_err(|e| anyhow!("--control-cpus: {e}"))?;
    }
    let id = format!("nexthop-run-{}", std::process::id());
    let follower = match (&st.controller, &st.redis) {
        (Some((addr, key_file)), _) => {
            let key = AuthKey::from_file(key_file).map_err(|e| anyhow!("--key-file: {e}"))?;
            Some(Source::Tcp(FibFollower::start(
                key,
                FollowerConfig::new(*addr, id),
            )?))
        }
        (None, Some((url, (name, column), key_file))) => {
            let key = AuthKey::from_file(key_file).map_err(|e| anyhow!("--key-file: {e}"))?;
            let mut cfg = RedisFollowerConfig::new(url.as_str(), name.as_str(), id);
            cfg.column = *column;
            Some(Source::Redis(
                RedisFollower::start(&key, cfg).map_err(|e| anyhow!("--redis {url}: {e}"))?,
            ))
        }
        (None, None) => None,
    };
    let fib = st.fib.as_deref().map(open_lookup).transpose()?;
    let ip = st.ip.as_ref().map(|(l, n)| open_ip(l, n)).transpose()?;
    let cfg = PipelineConfig {
        name: st.name,
        miss: st.miss,
        ..PipelineConfig::default()
    };
    let mut trivial_actions = ActionTable::new();
    if let Some(p) = st.trivial_port {
        trivial_actions.intern(&Action::Port(p), 1)?;
    }
    let first = match (&fib, &follower) {
        (Some(_), _) => None,
        (None, None) if ip.is_some() => None,
        (None, None) if st.trivial_port.is_some() => None,
        (None, Some(f)) => {
            let addr = match (&st.controller, &st.redis) {
                (Some(c), _) => c.0.to_string(),
                (None, Some((url, (name, col), _))) => format!("{url} (FIB {name}/{col})"),
                (None, None) => String::new(),
            };
            Some(first_table(f, &addr, st.snapshot_wait, &stop)?)
        }
        (None, None) => bail!("no table: give --fib DIR or --controller ADDR"),
    };
    let origin = match (&st.fib, &st.controller) {
        (_, _) if st.ip.is_some() => st.ip.as_ref().map_or_else(String::new, |(l, n)| {
            format!("{} with {}", l.display(), n.display())
        }),
        (Some(d), _) => d.display().to_string(),
        (None, Some((addr, _))) => format!("controller {addr}"),
        (None, None) => match &st.redis {
            Some((url, (name, col), _)) => format!("Redis {url} FIB {name}/{col}"),
            None => "the trivial pipeline".to_string(),
        },
    };
    let new_pipeline = || -> Result<Pipeline<Current<'_>>> {
        let p = match (&fib, &first) {
            (Some(fib), _) => Pipeline::new(
                LiveTable::Mapped(fib.mapped.view()),
                &fib.actions,
                fib.current.key_type,
                cfg,
            ),
            (None, Some(t)) => Pipeline::new(
                LiveTable::Followed(Followed(t.clone())),
                t.actions(),
                st.key_type,
                cfg,
            ),
            (None, None) => Pipeline::new(LiveTable::Fixed(0), &trivial_actions, st.key_type, cfg),
        };
        p.map_err(|e| anyhow!("{origin}: {e}"))
    };
    // One pipeline per worker: the IP pipeline over the LPM table, or the
    // flat-name pipeline over the FIB (fixed, followed or trivial).
    let mut ip_pipelines = Vec::new();
    let mut flat_pipelines = Vec::new();
    for _ in 0..st.workers {
        match &ip {
            Some((table, nb)) => ip_pipelines.push(
                IpPipeline::new(table, nb, IpConfig::default())
                    .map_err(|e| anyhow!("{origin}: {e}"))?,
            ),
            None => flat_pipelines.push(new_pipeline()?),
        }
    }
    let out_ports: Vec<u16> = match (ip_pipelines.first(), flat_pipelines.first()) {
        (Some(p), _) => p.ports().to_vec(),
        (None, Some(p)) => p.ports().to_vec(),
        (None, None) => bail!("no worker to run"),
    };
    let missing: Vec<String> = out_ports
        .iter()
        .filter(|p| !by_port.contains_key(p))
        .map(|p| p.to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{origin}: the {} sends to port(s) {} with no interface (add --port N=IFACE)",
            if ip.is_some() {
                "neighbour file"
            } else {
                "FIB"
            },
            missing.join(",")
        );
    }

    // Each worker's ports: AF_XDP sockets where asked and they bind (one
    // per worker and port, worker W on queue --xdp-queue + W), else
    // AF_PACKET (a ring per worker on every input, joined in a fanout
    // group, and a transmit socket per worker on every port).
    let ports_cfg = PortsConfig {
        workers: st.workers,
        io: st.io,
        xdp_attach: st.xdp_mode,
        xdp_queue: st.xdp_queue,
        ring: st.ring,
        fanout: st.fanout,
        fanout_group_base: (std::process::id() & 0x7fff) as u16,
    };
    let worker_ports = open_ports(&by_port, &inputs, &ports_cfg).map_err(|e| match e {
        PortsError::Xdp { .. } => anyhow!("{e} (--io auto falls back to AF_PACKET)"),
        e => e.into(),
    })?;
    let io_names = io_list(&worker_ports[0], by_port.keys().copied());
    let show = |ps: &dyn Fn(u16) -> bool| {
        by_port
            .iter()
            .filter(|(p, _)| ps(**p))
            .map(|(p, i)| format!("{p}={i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut workers_note = if st.workers > 1 {
        format!(" workers={} fanout={}", st.workers, st.fanout.name())
    } else {
        " workers=1".to_string()
    };
    if !st.worker_cpus.is_empty() {
        workers_note += &format!(
            " worker_cpus={}",
            affinity::format_cpu_list(&st.worker_cpus)
        );
    }
    if !st.control_cpus.is_empty() {
        workers_note += &format!(
            " control_cpus={}",
            affinity::format_cpu_list(&st.control_cpus)
        );
    }
    // The readiness line (output, not a log event: scripts wait for it).
    eprintln!(
        "nexthop run: forwarding in={} out={} io={io_names} ring={}x{}B{workers_note} (Ctrl-C stops)",
        show(&|p| inputs.contains(&p)),
        show(&|p| out_ports.contains(&p)),
        st.ring.block_count,
        st.ring.block_size
    );

    let shared = SharedSnapshot::new();
    let _metrics_server = start_metrics(st.metrics, st.metrics_allow_remote, &shared)?;
    // A forwarder on a FIB directory serves that directory's generation; one
    // following a controller reports the snapshots and deltas it applied.
    let dir_generation = fib.as_ref().map(|f| f.current.manifest.generation);
    let snapshot_of = |counters: &Counters, ports: &PortStats, elapsed: Duration| {
        let mut m = MetricsSnapshot::from_counters(counters)
            .with_port_stats(ports)
            .with_uptime(elapsed);
        if let Some(g) = dir_generation {
            m = m.with_fib_generation(g);
        }
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
    // The merged reports, once a second: the metrics endpoint and the
    // progress lines (output on stderr, not log events).
    let mut on_report = |r: &Report<'_>| {
        let p = &r.merged;
        if st.metrics.is_some() {
            shared.publish(snapshot_of(p.counters, p.ports, p.elapsed));
        }
        if !st.quiet {
            let mut line = progress_line(p);
            if let Some(f) = &follower {
                line.push_str(&follower_fields(&f.stats(), r.swaps, false));
            }
            eprintln!("{line}");
        }
    };
    let engine = Engine::new(EngineConfig {
        after: st.after,
        report_every: (!st.quiet || st.metrics.is_some()).then_some(Duration::from_secs(1)),
    });
    let done = if ip.is_some() {
        // The LPM table is fixed for the run.
        engine.run(
            workers(ip_pipelines, worker_ports, &st.worker_cpus),
            &NoRefresh,
            &stop,
            &mut on_report,
        )
    } else {
        // Before each group, the follower's current table (if any).
        let follow = Follow(|| follower.as_ref().and_then(Source::table).map(Followed));
        engine.run(
            workers(flat_pipelines, worker_ports, &st.worker_cpus),
            &follow,
            &stop,
            &mut on_report,
        )
    }?;
    let run = &done.merged;
    if st.metrics.is_some() {
        shared.publish(snapshot_of(&run.counters, &run.ports, run.elapsed));
    }
    let mut line = summary_line(run);
    line.push_str(&format!(" io={io_names}"));
    if st.workers > 1 {
        let per: Vec<String> = done
            .workers
            .iter()
            .map(|r| r.counters.frames_in.to_string())
            .collect();
        line.push_str(&format!(
            " workers={} per_worker_in={}",
            st.workers,
            per.join(",")
        ));
    }
    if let Some(f) = follower {
        line.push_str(&follower_fields(&f.stats(), done.swaps, true));
        drop(f);
    }
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    Ok(())
}

/// Worker W: pipeline W over ports W, pinned to the W-th CPU of `cpus`
/// (cycling; not pinned when `cpus` is empty).
fn workers<P>(pipelines: Vec<P>, ports: Vec<LivePorts>, cpus: &[usize]) -> Vec<Worker<P>> {
    pipelines
        .into_iter()
        .zip(ports)
        .enumerate()
        .map(|(w, (pipeline, ports))| Worker {
            pipeline,
            ports,
            cpu: (!cpus.is_empty()).then(|| cpus[w % cpus.len()]),
        })
        .collect()
}

/// The control crate's followed table as the engine's snapshot handle
/// (`nexthop-dataplane` does not depend on `nexthop-control`).
#[derive(Clone)]
pub(crate) struct Followed(pub(crate) Arc<Table>);

impl FibSnapshot for Followed {
    type Names = Query;

    fn names(&self) -> &Query {
        self.0.query()
    }

    fn actions(&self) -> &ActionTable {
        self.0.actions()
    }

    fn same_snapshot(&self, other: &Followed) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The table a flat-name pipeline reads: the FIB directory's mapped
/// snapshot, the follower's current table, or the trivial pipeline's one
/// action.
pub(crate) type Current<'a> = LiveTable<'a, Followed>;

/// What keeps a followed table: a controller's TCP protocol, or Redis.
enum Source {
    Tcp(FibFollower),
    Redis(RedisFollower),
}

impl Source {
    fn table(&self) -> Option<Arc<Table>> {
        match self {
            Source::Tcp(f) => f.table(),
            Source::Redis(f) => f.table(),
        }
    }

    fn stats(&self) -> FollowerStats {
        match self {
            Source::Tcp(f) => f.stats(),
            Source::Redis(f) => f.stats().into(),
        }
    }
}

/// Wait for the follower's first table, at most `wait` (or until a signal).
fn first_table(f: &Source, addr: &str, wait: Duration, stop: &StopFlag) -> Result<Arc<Table>> {
    tracing::info!("waiting for the first snapshot from {addr}");
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

/// The metrics endpoint of a live forwarder (`nexthop run`, `nexthop sdf
/// run`) serving `shared`, when `--metrics ADDR` was given.
pub(crate) fn start_metrics(
    addr: Option<std::net::SocketAddr>,
    allow_remote: bool,
    shared: &SharedSnapshot,
) -> Result<Option<MetricsServer>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let config = MetricsConfig {
        addr,
        allow_non_loopback: allow_remote,
        ..MetricsConfig::default()
    };
    let server = MetricsServer::start_with(&config, shared.provider())
        .with_context(|| format!("starting the metrics endpoint on {addr}"))?;
    tracing::info!("metrics on http://{addr}/metrics and /stats.json");
    Ok(Some(server))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_table_refuses_a_port_or_interface_mapped_twice() {
        let maps = |v: &[&str]| -> Vec<PortMap> { v.iter().map(|s| s.parse().unwrap()).collect() };
        let ok = maps(&["2=b", "1=a"]);
        let t = port_table(&ok).unwrap();
        assert_eq!(t.into_iter().collect::<Vec<_>>(), [(1, "a"), (2, "b")]);
        let e = port_table(&maps(&["1=a", "1=b"])).unwrap_err();
        assert!(e.to_string().contains("port 1 is mapped twice"), "{e}");
        let e = port_table(&maps(&["1=a", "2=a"])).unwrap_err();
        assert!(
            e.to_string().contains("interface a is already port 1"),
            "{e}"
        );
    }

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

    #[derive(Debug, clap::Parser)]
    struct T {
        #[command(flatten)]
        a: RunArgs,
    }

    #[test]
    fn redis_flags_and_config_keys() {
        // --fib is the FIB's name in Redis, not a path.
        let s = settings(
            &[
                "--redis",
                "redis://127.0.0.1:6379/",
                "--fib",
                "core",
                "--key-file",
                "k",
                "--port",
                "0=e",
            ],
            None,
        )
        .unwrap();
        let (url, name, key) = s.redis.unwrap();
        assert_eq!(
            (url.as_str(), name.0.as_str(), name.1),
            ("redis://127.0.0.1:6379/", "core", 0)
        );
        assert_eq!(key, PathBuf::from("k"));
        assert!(s.fib.is_none() && s.controller.is_none());
        // The same from the file: the name is not joined to its directory.
        let s = settings(
            &["--port", "0=e"],
            Some("redis = \"unix:///tmp/r.sock\"\nfib = \"core\"\nkey_file = \"k\"\n"),
        )
        .unwrap();
        assert_eq!(s.redis.unwrap().1, ("core".to_owned(), 0));
        // NAME/COLUMN follows one column of a network FIB, from the flag
        // or the file.
        let s = settings(
            &["--port", "0=e"],
            Some("redis = \"unix:///tmp/r.sock\"\nfib = \"fabric/3\"\nkey_file = \"k\"\n"),
        )
        .unwrap();
        assert_eq!(s.redis.unwrap().1, ("fabric".to_owned(), 3));
        let flag = |fib: &str| {
            settings(
                &[
                    "--redis",
                    "redis://h/",
                    "--fib",
                    fib,
                    "--key-file",
                    "k",
                    "--port",
                    "0=e",
                ],
                None,
            )
        };
        assert_eq!(flag("fabric/15").unwrap().redis.unwrap().1 .1, 15);
        for bad in [
            "fabric/x",
            "fabric/-1",
            "fabric/+2",
            "fabric/4096",
            "fabric/",
        ] {
            let e = flag(bad).unwrap_err().to_string();
            assert!(e.contains("NAME/COLUMN"), "{bad}: {e}");
        }
        for (args, want) in [
            (
                &["--redis", "redis://h/", "--key-file", "k", "--port", "0=e"][..],
                "--fib NAME",
            ),
            (
                &["--redis", "redis://h/", "--fib", "core", "--port", "0=e"][..],
                "--key-file",
            ),
            (
                &[
                    "--redis",
                    "redis://h/",
                    "--fib",
                    "c",
                    "--key-file",
                    "k",
                    "--controller",
                    "127.0.0.1:1",
                    "--port",
                    "0=e",
                ][..],
                "give one",
            ),
        ] {
            let e = settings(args, None).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    fn settings(args: &[&str], file: Option<&str>) -> Result<Settings> {
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        let mut all = vec!["run".to_string()];
        if let Some(text) = file {
            let p = dir.path().join("run.toml");
            std::fs::write(&p, text).unwrap();
            all.push("--config".into());
            all.push(p.display().to_string());
        }
        all.extend(args.iter().map(|s| s.to_string()));
        let t = T::try_parse_from(all).map_err(|e| anyhow!("{e}"))?;
        Settings::resolve(t.a)
    }

    #[test]
    fn a_byte_order_mark_before_the_config_is_skipped() {
        let text = "workers = 3\ninputs = [0, 2]\n";
        let path = Path::new("run.toml");
        let bom = parse_run_file(&format!("\u{feff}{text}"), path).unwrap();
        assert_eq!(bom.workers, Some(3));
        assert_eq!(bom.inputs, Some(vec![0, 2]));
        // Only at the start: elsewhere it is not TOML, and the error names
        // the file.
        let e = parse_run_file("workers = 3\n\u{feff}inputs = [0]\n", path).unwrap_err();
        assert!(e.to_string().starts_with("run.toml: "), "{e}");
    }

    #[test]
    fn a_config_file_gives_every_setting_and_flags_win() {
        let file = r#"
            fib = "fibdir"
            workers = 2
            fanout = "lb"
            io = "afpacket"
            xdp_mode = "skb"
            xdp_queue = 2
            name = "5tuple"
            miss = "flood"
            inputs = [0]
            duration = 2.5
            metrics = "127.0.0.1:9464"
            [ports]
            0 = "eth0"
            1 = "eth1"
            [ring]
            block_size = 131072
            block_count = 8
        "#;
        let s = settings(&[], Some(file)).unwrap();
        assert!(s.fib.as_ref().unwrap().ends_with("fibdir"));
        assert!(
            s.fib.as_ref().unwrap().is_absolute(),
            "relative to the file"
        );
        assert_eq!((s.workers, s.fanout), (2, FanoutMode::LoadBalance));
        assert_eq!(s.ports.len(), 2);
        assert_eq!(s.ring.block_size, 131072);
        assert_eq!(s.ring.block_count, 8);
        assert_eq!(s.ring.frame_size, RingConfig::default().frame_size);
        assert_eq!(s.after.duration, Some(Duration::from_secs_f64(2.5)));
        assert_eq!(s.miss, MissPolicy::Flood);
        assert_eq!(
            (s.io, s.xdp_mode, s.xdp_queue),
            (IoMode::Afpacket, XdpAttach::Skb, 2)
        );
        let s = settings(
            &[
                "--workers",
                "3",
                "--port",
                "0=veth9",
                "--fanout",
                "hash",
                "--io",
                "afxdp",
                "--xdp-mode",
                "native",
                "--xdp-queue",
                "0",
            ],
            Some(file),
        )
        .unwrap();
        assert_eq!((s.workers, s.fanout), (3, FanoutMode::Hash));
        assert_eq!(
            (s.io, s.xdp_mode, s.xdp_queue),
            (IoMode::Afxdp, XdpAttach::Native, 0)
        );
        let d = settings(&["--fib", "d", "--port", "0=e"], None).unwrap();
        assert_eq!(
            (d.io, d.xdp_mode, d.xdp_queue),
            (IoMode::Afpacket, XdpAttach::Auto, 0)
        );
        assert_eq!(
            s.ports,
            vec![PortMap {
                port: 0,
                iface: "veth9".into()
            }]
        );
    }

    #[test]
    fn cpu_lists_come_from_flags_or_the_file_and_must_be_usable() {
        let cpus = affinity::allowed_cpus().unwrap();
        let first = cpus[0].to_string();
        let base = ["--fib", "d", "--port", "0=e"];
        let s = settings(&base, None).unwrap();
        assert!(s.worker_cpus.is_empty() && s.control_cpus.is_empty());
        let file = format!("worker_cpus = \"{first}\"\ncontrol_cpus = \"{first}\"\n");
        let s = settings(&base, Some(&file)).unwrap();
        assert_eq!(
            (s.worker_cpus.clone(), s.control_cpus.clone()),
            (vec![cpus[0]], vec![cpus[0]])
        );
        let mut args = base.to_vec();
        args.extend(["--worker-cpus", &first]);
        let s = settings(&args, Some("control_cpus = \"1023\"\n"));
        let e = format!("{:#}", s.unwrap_err());
        assert!(
            e.contains("control_cpus") && e.contains("CPU 1023 is not available"),
            "{e}"
        );
        for bad in ["x", "3-1", "0,0", "1023"] {
            let mut args = base.to_vec();
            args.extend(["--worker-cpus", bad]);
            let e = format!("{:#}", settings(&args, None).unwrap_err());
            assert!(e.contains(&format!("--worker-cpus {bad}")), "{e}");
        }
    }

    #[test]
    fn the_ip_pipeline_comes_from_flags_or_the_file_and_excludes_the_fib() {
        let st = settings(
            &[],
            Some("lpm = \"t.lpm\"\nneighbors = \"nb.txt\"\n[ports]\n0 = \"e\"\n"),
        )
        .unwrap();
        let (l, n) = st.ip.unwrap();
        assert!(l.ends_with("t.lpm") && l.is_absolute(), "{}", l.display());
        assert!(n.ends_with("nb.txt"));
        assert!(st.fib.is_none());
        let st = settings(&["--lpm", "a", "--neighbors", "b", "--port", "0=e"], None).unwrap();
        assert_eq!(st.ip, Some((PathBuf::from("a"), PathBuf::from("b"))));
        let cases: &[(&[&str], &str)] = &[
            (&["--lpm", "a", "--port", "0=e"], "--lpm needs --neighbors"),
            (
                &["--neighbors", "b", "--fib", "d", "--port", "0=e"],
                "only used with --lpm",
            ),
            (
                &[
                    "--lpm",
                    "a",
                    "--neighbors",
                    "b",
                    "--fib",
                    "d",
                    "--port",
                    "0=e",
                ],
                "--lpm replaces the FIB",
            ),
            (
                &[
                    "--lpm",
                    "a",
                    "--neighbors",
                    "b",
                    "--miss",
                    "flood",
                    "--port",
                    "0=e",
                ],
                "--name and --miss are for the flat-name pipeline",
            ),
            (
                &[
                    "--lpm",
                    "a",
                    "--neighbors",
                    "b",
                    "--key-type",
                    "ipv4",
                    "--port",
                    "0=e",
                ],
                "--key-type is only",
            ),
        ];
        for (args, want) in cases {
            let e = settings(args, None).unwrap_err().to_string();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let cases: &[(&[&str], Option<&str>, &str)] = &[
            (
                &[],
                Some("fib = \"d\"\nwokers = 2\n[ports]\n0 = \"e\"\n"),
                "wokers",
            ),
            (
                &[],
                Some("fib = \"d\"\n[ports]\nx = \"e\"\n"),
                "not a port number",
            ),
            (
                &[],
                Some("fib = \"d\"\nfanout = \"spray\"\n[ports]\n0 = \"e\"\n"),
                "fanout",
            ),
            (
                &[],
                Some("fib = \"d\"\nio = \"dpdk\"\n[ports]\n0 = \"e\"\n"),
                "io: unknown I/O 'dpdk'",
            ),
            (
                &[],
                Some("fib = \"d\"\nxdp_mode = \"zc\"\n[ports]\n0 = \"e\"\n"),
                "xdp_mode: unknown XDP mode 'zc'",
            ),
            (
                &["--fib", "d", "--port", "0=e", "--io", "xdp"],
                None,
                "unknown I/O 'xdp'",
            ),
            (
                &[
                    "--fib",
                    "d",
                    "--port",
                    "0=e",
                    "--xdp-queue",
                    "65535",
                    "--workers",
                    "2",
                ],
                None,
                "--xdp-queue 65535",
            ),
            (&[], Some("fib = [1\n"), "run.toml"),
            (&["--fib", "d"], None, "no ports"),
            (&["--port", "0=e"], None, "no table"),
            (
                &["--fib", "d", "--port", "0=e", "--workers", "0"],
                None,
                "--workers 0",
            ),
            (
                &[
                    "--fib",
                    "d",
                    "--port",
                    "0=e",
                    "--workers",
                    "2",
                    "--packets",
                    "9",
                ],
                None,
                "--packets",
            ),
            (
                &["--controller", "127.0.0.1:1", "--port", "0=e"],
                None,
                "--key-file",
            ),
            (
                &["--fib", "d", "--port", "0=e", "--trivial-port", "1"],
                None,
                "--trivial-port",
            ),
            (
                &["--fib", "d", "--port", "0=e", "--duration", "0"],
                None,
                "--duration",
            ),
            (
                &["--fib", "d", "--port", "0=e", "--block-size", "1000"],
                None,
                "receive ring",
            ),
        ];
        for (args, file, needle) in cases {
            let e = settings(args, *file).unwrap_err().to_string();
            assert!(e.contains(needle), "{args:?} {file:?}: {e}");
        }
    }
}
