//! `nexthop ndn fib build|lookup|stats`: glue over `nexthop-ndn`.
//!
//! Contract (outside tests rely on it):
//! * `build --routes FILE --out FILE`: routes are `NAME NEXTHOP[,NEXTHOP...]`
//!   per line (NDN URI names, `FACE` or `FACE:COST` next hops, `#`
//!   comments); a bad line fails with `FILE:LINE: reason`, a non-zero exit
//!   and no output file. The output is written to a temporary file beside
//!   it and renamed into place.
//! * `lookup --fib FILE [NAME ...]` (stdin, one name per line, when no
//!   name is given): one line per name, `PREFIX HOPS` (the matched prefix
//!   in canonical URI form, next hops joined by commas) or `-`. With
//!   `--json`, one object per line instead: `{"name", "prefix", "hops":
//!   [{"face", "cost"}]}` (`prefix` and `hops` null for no match; `probes`,
//!   `verifies`, `fallback` with `--trace`).
//! * `stats --fib FILE`: `key: value` lines (`--json`: one object).
//! * `run [--udp ADDR:PORT] [--tcp ADDR:PORT] [--unix PATH] [--config FILE]`
//!   (plus `--cs-packets`, `--cs-policy lru|lfu`, `--cs-admit-after K`,
//!   `--pit exact|fingerprint`, `--max-faces`, `--udp-idle-secs`, `--udp-mtu`,
//!   `--udp-socket-buffer`, `--metrics ADDR:PORT`): the NDN forwarder of `nexthop-ndnd` in the
//!   foreground until SIGINT/SIGTERM;
//!   prints `nexthop ndn: ready udp=ADDR tcp=ADDR unix=PATH` (the bound
//!   listeners; ` metrics=ADDR` added with `--metrics`) on stderr when it
//!   serves, and a `nexthop ndn: stopped
//!   key=value ...` summary on stderr at exit (status 0).
//! * `bench` and `lab`: see `crate::ndnlab::{bench, lab}`.
//! * `route add|remove|list`, `face list`, `strategy set|unset|list`,
//!   `status`: see `cmd_ndn_mgmt`.
//! * `repo put|get|delete|list`: see `cmd_ndn_repo`.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::metrics::{MetricsServer, MetricsSnapshot, PortMetrics, SharedSnapshot};
use nexthop_ndn::persist;
use nexthop_ndn::routes::{format_hops, parse_routes};
use nexthop_ndn::{Config, Fib, FibControl, NameView, Strategy, Trace};
use nexthop_ndnd::{CsPolicy, Daemon, DaemonMetrics, NdndConfig, PitKind};
use nexthop_wire::ndn::Name;

use crate::cmd_ndn_mgmt as mgmt;
use crate::textio::{count, for_each_input, write_atomic};

/// `nexthop ndn ...`
#[derive(Debug, Subcommand)]
pub enum NdnCmd {
    /// Name FIB files: build, lookup, stats.
    #[command(subcommand)]
    Fib(NdnFibCmd),
    /// Run the NDN forwarder in the foreground until SIGINT/SIGTERM.
    Run(RunArgs),
    /// The Repo's Redis store: put, get, delete, list (see `cmd_ndn_repo`).
    Repo(crate::cmd_ndn_repo::RepoArgs),
    /// Satisfied Interests/s through one forwarding thread over loopback UDP.
    Bench(crate::ndnlab::bench::BenchArgs),
    /// The NDN demo: a forwarder, a producer and consumers fetching an
    /// object by segments, byte-compared, with the forwarder's counters.
    Lab(crate::ndnlab::lab::LabArgs),
    /// Routes of a running forwarder: add, remove, list.
    Route {
        #[command(subcommand)]
        cmd: mgmt::RouteCmd,
        #[command(flatten)]
        conn: mgmt::ConnArgs,
    },
    /// Faces of a running forwarder: list.
    Face {
        #[command(subcommand)]
        cmd: mgmt::FaceCmd,
        #[command(flatten)]
        conn: mgmt::ConnArgs,
    },
    /// Strategy choices of a running forwarder: set, unset, list.
    Strategy {
        #[command(subcommand)]
        cmd: mgmt::StrategyCmd,
        #[command(flatten)]
        conn: mgmt::ConnArgs,
    },
    /// A running forwarder's status (status/general).
    Status {
        #[command(flatten)]
        conn: mgmt::ConnArgs,
    },
}

/// `run` arguments (flags override the config file).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// UDP unicast listen address (NFD's is 0.0.0.0:6363).
    #[arg(long, value_name = "ADDR:PORT")]
    udp: Option<std::net::SocketAddr>,
    /// TCP listen address.
    #[arg(long, value_name = "ADDR:PORT")]
    tcp: Option<std::net::SocketAddr>,
    /// Unix stream socket path (python-ndn's default: /run/nfd/nfd.sock).
    #[arg(long, value_name = "PATH")]
    unix: Option<PathBuf>,
    /// An NDN Ethernet face on this interface (ethertype 0x8624, multicast
    /// group 01:00:5e:00:17:aa; needs CAP_NET_RAW); repeatable. Its face
    /// id is in the readiness line (`ether=IFACE:FACEID`) and `ndn face
    /// list`.
    #[arg(long, value_name = "IFACE")]
    ether: Vec<String>,
    /// TOML file with the same keys as the flags (udp, tcp, unix, ether,
    /// cs_packets, cs_policy, cs_admit_after, pit, max_faces,
    /// udp_idle_secs, udp_mtu, udp_socket_buffer, metrics, threads) and
    /// stream_out_cap, reasm_max_partial, reasm_timeout_ms, ndt_prefix,
    /// ndt_bits, thread_queue, udp_input_threads, udp_gso.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Content Store capacity in packets (0: none).
    #[arg(long, value_name = "N")]
    cs_packets: Option<usize>,
    /// Content Store replacement policy (default lru).
    #[arg(long, value_enum)]
    cs_policy: Option<CsPolicyArg>,
    /// Selective caching: store a Data once its name was asked K times
    /// (0 or 1, the default: always; up to 255).
    #[arg(long, value_name = "K")]
    cs_admit_after: Option<u32>,
    /// The PIT: exact (edge, NFD's; the default) or fingerprint (core:
    /// fingerprint-only entries, no PIT tokens kept; needs --max-faces 32
    /// or fewer).
    #[arg(long, value_enum)]
    pit: Option<PitArg>,
    /// Most faces open at once.
    #[arg(long, value_name = "N")]
    max_faces: Option<u32>,
    /// Close a UDP face after this many seconds without a packet.
    #[arg(long, value_name = "S")]
    udp_idle_secs: Option<u64>,
    /// Largest UDP datagram sent (default 8800); larger packets are sent
    /// as NDNLPv2 fragments.
    #[arg(long, value_name = "BYTES")]
    udp_mtu: Option<usize>,
    /// Receive and send buffer asked for the UDP socket (default 4 MiB,
    /// 65536..=1073741824); the granted sizes are in the exit summary
    /// (`udp_rcvbuf=`, `udp_sndbuf=`) and the metrics.
    #[arg(long, value_name = "BYTES")]
    udp_socket_buffer: Option<usize>,
    /// Serve the counters at http://ADDR/metrics (Prometheus) and
    /// /stats.json (`nexthop stats`); loopback only.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<std::net::SocketAddr>,
    /// Forwarding threads (default 1: one thread does everything; 1..=64).
    /// With more, the socket thread dispatches Interests by a hash of
    /// their name's first components and Data and Nacks by the thread id
    /// in their PIT token; each thread has its own PIT and Content Store.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Sockets bound to the `--udp` address with SO_REUSEPORT (default 1;
    /// 1..=64): the kernel spreads remote endpoints over them, and each
    /// socket past the first has an input thread that reads it with
    /// recvmmsg and hands the batches to the polling thread. Datagrams per
    /// socket are in the exit summary (`udp_input_packets=`).
    #[arg(long, value_name = "N")]
    udp_input_threads: Option<usize>,
    /// No UDP segmentation offload: one `sendmmsg` entry per datagram and
    /// no `UDP_GRO` on the listening socket (TOML `udp_gso = false`). By
    /// default equal-sized datagrams to one endpoint go as one GSO
    /// message and coalesced runs are taken whole; receivers see the same
    /// datagrams either way.
    #[arg(long)]
    no_udp_gso: bool,
}

/// `--cs-policy`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CsPolicyArg {
    /// Least recently used.
    Lru,
    /// Least frequently used.
    Lfu,
}

/// `--pit`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PitArg {
    /// Names, aggregation, nonces, PIT tokens (edge router).
    Exact,
    /// Fingerprint-only entries with a face bit-vector (core router).
    Fingerprint,
}

/// `nexthop ndn fib ...`
#[derive(Debug, Subcommand)]
pub enum NdnFibCmd {
    /// Build a FIB file from a routes file (NAME NEXTHOP[,NEXTHOP...] per line).
    Build(BuildArgs),
    /// Longest-prefix match names (arguments, or stdin one per line).
    Lookup(LookupArgs),
    /// Print the contents and sizes of a FIB file.
    Stats(StatsArgs),
}

/// String-matching strategy on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StrategyArg {
    /// Verify the stored name at every fingerprint match (fast hash).
    VerifyEach,
    /// Verify once at the end (keyed SipHash), fall back on a false positive.
    VerifyAtEnd,
}

/// `build` arguments.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Routes file: NAME NEXTHOP[,NEXTHOP...] per line; NEXTHOP is FACE or
    /// FACE:COST; # comments.
    #[arg(long, value_name = "FILE")]
    routes: PathBuf,
    /// FIB file to write (replaced atomically).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// String-matching strategy.
    #[arg(long, value_enum, default_value = "verify-each")]
    strategy: StrategyArg,
    /// Largest component count of the FIB (default: the longest rule).
    #[arg(long, value_name = "K")]
    max_components: Option<usize>,
    /// Hash key (default: the wire Name's seed for verify-each, a random
    /// secret key for verify-at-end).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
}

/// `lookup` arguments.
#[derive(Debug, Args)]
pub struct LookupArgs {
    /// FIB file.
    #[arg(long, value_name = "FILE")]
    fib: PathBuf,
    /// Names in NDN URI form; without any, names are read from stdin, one
    /// per line (blank lines and # comment lines are skipped).
    #[arg(value_name = "NAME")]
    names: Vec<String>,
    /// Also print the hash probes each lookup took.
    #[arg(long)]
    trace: bool,
    /// Print one JSON object per name instead of text.
    #[arg(long)]
    json: bool,
}

/// `stats` arguments.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// FIB file.
    #[arg(long, value_name = "FILE")]
    fib: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Run an `ndn` command.
pub fn run(cmd: NdnCmd) -> Result<()> {
    match cmd {
        NdnCmd::Fib(NdnFibCmd::Build(a)) => build(&a),
        NdnCmd::Fib(NdnFibCmd::Lookup(a)) => lookup(&a),
        NdnCmd::Fib(NdnFibCmd::Stats(a)) => stats(&a.fib, a.json),
        NdnCmd::Run(a) => ndn_run(a),
        NdnCmd::Repo(a) => crate::cmd_ndn_repo::run(a),
        NdnCmd::Bench(a) => crate::ndnlab::bench::run(&a),
        NdnCmd::Lab(a) => crate::ndnlab::lab::run(&a),
        NdnCmd::Route { cmd, conn } => mgmt::route(cmd, &conn),
        NdnCmd::Face { cmd, conn } => mgmt::face(cmd, &conn),
        NdnCmd::Strategy { cmd, conn } => mgmt::strategy(cmd, &conn),
        NdnCmd::Status { conn } => mgmt::status(&conn),
    }
}

fn ndn_run(a: RunArgs) -> Result<()> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
            NdndConfig::from_toml(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?
        }
        None => NdndConfig::default(),
    };
    if a.udp.is_some() {
        cfg.udp = a.udp;
    }
    if a.tcp.is_some() {
        cfg.tcp = a.tcp;
    }
    if a.unix.is_some() {
        cfg.unix = a.unix;
    }
    if !a.ether.is_empty() {
        cfg.ether = a.ether;
    }
    cfg.cs_packets = a.cs_packets.unwrap_or(cfg.cs_packets);
    if let Some(p) = a.cs_policy {
        cfg.cs_policy = match p {
            CsPolicyArg::Lru => CsPolicy::Lru,
            CsPolicyArg::Lfu => CsPolicy::Lfu,
        };
    }
    cfg.cs_admit_after = a.cs_admit_after.unwrap_or(cfg.cs_admit_after);
    if let Some(p) = a.pit {
        cfg.pit = match p {
            PitArg::Exact => PitKind::Exact,
            PitArg::Fingerprint => PitKind::Fingerprint,
        };
    }
    cfg.max_faces = a.max_faces.unwrap_or(cfg.max_faces);
    cfg.udp_idle_secs = a.udp_idle_secs.unwrap_or(cfg.udp_idle_secs);
    cfg.udp_mtu = a.udp_mtu.unwrap_or(cfg.udp_mtu);
    cfg.udp_socket_buffer = a.udp_socket_buffer.unwrap_or(cfg.udp_socket_buffer);
    cfg.metrics = a.metrics.or(cfg.metrics);
    cfg.threads = a.threads.unwrap_or(cfg.threads);
    cfg.udp_input_threads = a.udp_input_threads.unwrap_or(cfg.udp_input_threads);
    if a.no_udp_gso {
        cfg.udp_gso = false;
    }
    cfg.validate().map_err(|e| anyhow!("{e}"))?;
    let stop = StopFlag::install().map_err(|e| anyhow!("installing signal handlers: {e}"))?;
    let metrics_addr = cfg.metrics;
    let mut d = Daemon::bind(cfg).context("binding the forwarder's listeners")?;
    let shared = SharedSnapshot::new();
    let server = match metrics_addr {
        Some(addr) => Some(
            MetricsServer::start(addr, shared.provider())
                .with_context(|| format!("starting the metrics endpoint on {addr}"))?,
        ),
        None => None,
    };
    match &server {
        Some(s) => eprintln!("{} metrics={}", d.ready_line(), s.local_addr()),
        None => eprintln!("{}", d.ready_line()),
    }
    let r = d.run_reporting(
        || stop.is_raised(),
        std::time::Duration::from_secs(1),
        |d| {
            if server.is_some() {
                shared.publish(ndn_snapshot(&d.metrics()));
            }
        },
    );
    eprintln!("{}", d.summary_line());
    r.context("forwarder loop")
}

/// The forwarder's counters as a metrics snapshot: faces are the ports
/// (rx/tx = Interests + Data + Nacks and bytes per face), drops by reason
/// (`nexthop_drops_total{reason}`), the rest as `nexthop_ndn_*` extras
/// (per-face packets by kind and bytes too, and each forwarding thread's
/// counters with the label `thread`).
fn ndn_snapshot(m: &DaemonMetrics) -> MetricsSnapshot {
    let mut s = MetricsSnapshot {
        uptime_seconds: m.uptime_secs,
        frames_in: m.packets_in,
        bytes_in: m.bytes_in,
        forwarded: m.packets_out,
        dropped: m.drops.iter().map(|d| d.1).sum(),
        drops: m
            .drops
            .iter()
            .filter(|d| d.1 > 0)
            .map(|&(k, v)| (k.to_string(), v))
            .collect(),
        ..MetricsSnapshot::default()
    };
    for f in &m.faces {
        let Ok(port) = u16::try_from(f.face_id) else {
            continue;
        };
        s.rx.push(PortMetrics {
            port,
            frames: f.in_interests + f.in_data + f.in_nacks,
            bytes: f.in_bytes,
        });
        s.tx.push(PortMetrics {
            port,
            frames: f.out_interests + f.out_data + f.out_nacks,
            bytes: f.out_bytes,
        });
    }
    for &(name, help, v) in &m.counters {
        s = s.with_counter(name, help, &[], v);
    }
    for &(name, help, v) in &m.gauges {
        s = s.with_gauge(name, help, &[], v as f64);
    }
    for (i, t) in m.threads.iter().enumerate() {
        let id = i.to_string();
        let l = [("thread", id.as_str())];
        for (name, help, v) in [
            (
                "ndn_thread_packets_total",
                "Packets a forwarding thread took",
                t.packets,
            ),
            (
                "ndn_thread_satisfied_total",
                "Data that satisfied a thread's PIT entry",
                t.satisfied,
            ),
            (
                "ndn_thread_cs_hits_total",
                "Interests a thread answered from its Content Store",
                t.cs_hits,
            ),
            (
                "ndn_thread_cs_misses_total",
                "Interests that missed a thread's Content Store",
                t.cs_misses,
            ),
            (
                "ndn_thread_suppressed_total",
                "Interests a thread aggregated",
                t.suppressed,
            ),
            (
                "ndn_thread_drops_total",
                "Packets a thread's pipeline dropped",
                t.drops,
            ),
        ] {
            s = s.with_counter(name, help, &l, v);
        }
        s = s.with_gauge(
            "ndn_thread_pit_entries",
            "A thread's PIT entries",
            &l,
            t.pit_entries as f64,
        );
        s = s.with_gauge(
            "ndn_thread_cs_entries",
            "A thread's Content Store entries",
            &l,
            t.cs_entries as f64,
        );
    }
    for f in &m.faces {
        let id = f.face_id.to_string();
        for (dir, kind, v) in [
            ("in", "interest", f.in_interests),
            ("in", "data", f.in_data),
            ("in", "nack", f.in_nacks),
            ("out", "interest", f.out_interests),
            ("out", "data", f.out_data),
            ("out", "nack", f.out_nacks),
        ] {
            s = s.with_counter(
                "ndn_face_packets_total",
                "Packets per face, direction and kind",
                &[("face", &id), ("direction", dir), ("kind", kind)],
                v,
            );
        }
        for (dir, v) in [("in", f.in_bytes), ("out", f.out_bytes)] {
            s = s.with_counter(
                "ndn_face_bytes_total",
                "Bytes per face and direction",
                &[("face", &id), ("direction", dir)],
                v,
            );
        }
    }
    s
}

fn build(a: &BuildArgs) -> Result<()> {
    let bytes = std::fs::read(&a.routes).with_context(|| format!("{}", a.routes.display()))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        anyhow!("{}:{line}: not UTF-8 text", a.routes.display())
    })?;
    let routes = parse_routes(text)
        .map_err(|e| anyhow!("{}:{}: {}", a.routes.display(), e.line, e.reason))?;
    let longest = routes
        .iter()
        .map(|r| r.name.component_count())
        .max()
        .unwrap_or(1)
        .max(1);
    let k = a.max_components.unwrap_or(longest);
    if k < longest {
        return Err(anyhow!(
            "--max-components {k} is below the longest rule ({longest} components)"
        ));
    }
    let strategy = match a.strategy {
        StrategyArg::VerifyEach => Strategy::VerifyEach,
        StrategyArg::VerifyAtEnd => Strategy::VerifyAtEnd,
    };
    let mut cfg = Config {
        max_components: k,
        strategy,
        ..Config::default()
    };
    match (a.seed, strategy) {
        (Some(s), _) => cfg.key = (s, s.rotate_left(32) ^ 0x5eed),
        (None, Strategy::VerifyAtEnd) => cfg.key = (rand::random(), rand::random()),
        (None, _) => {}
    }
    let mut ctl = FibControl::new(cfg).map_err(|e| anyhow!("{e}"))?;
    for r in &routes {
        ctl.insert(&r.name, &r.hops)
            .map_err(|e| anyhow!("{}:{}: {e}", a.routes.display(), r.line))?;
    }
    let st = ctl.stats();
    let file = persist::encode(ctl.fib(), ctl.len() as u64);
    write_atomic(&a.out, &file)?;
    println!(
        "built {}: {}, {} ({}), {} bytes ({:.1} B/rule)",
        a.out.display(),
        count(st.rules as u64, "rule", "rules"),
        count(st.keys as u64, "key", "keys"),
        count(st.markers as u64, "marker", "markers"),
        st.bytes,
        st.bytes as f64 / st.rules.max(1) as f64
    );
    Ok(())
}

fn load(path: &Path) -> Result<(Fib, u64)> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    persist::decode(&bytes).map_err(|e| anyhow!("{}: {e}", path.display()))
}

fn lookup(a: &LookupArgs) -> Result<()> {
    let (fib, _) = load(&a.fib)?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let one = |uri: &str, out: &mut BufWriter<std::io::StdoutLock>| -> Result<()> {
        let name = Name::from_uri(uri).map_err(|e| anyhow!("invalid name '{uri}': {e}"))?;
        let mut tr = Trace::default();
        let found = fib.lookup_name(&name, &mut tr);
        if a.json {
            let mut v = serde_json::json!({
                "name": uri,
                "prefix": found.as_ref().map(|m| name.prefix(m.len).to_string()),
                "hops": found.as_ref().map(|m| {
                    fib.next_hops(m.nh)
                        .iter()
                        .map(|h| serde_json::json!({"face": h.face, "cost": h.cost}))
                        .collect::<Vec<_>>()
                }),
            });
            if a.trace {
                v["probes"] = tr.probes.into();
                v["verifies"] = tr.verifies.into();
                v["fallback"] = tr.fallback.into();
            }
            writeln!(out, "{v}")?;
            return Ok(());
        }
        match found {
            Some(m) => write!(
                out,
                "{} {}",
                name.prefix(m.len),
                format_hops(fib.next_hops(m.nh))
            )?,
            None => write!(out, "-")?,
        }
        if a.trace {
            write!(
                out,
                " probes={} verifies={} fallback={}",
                tr.probes, tr.verifies, tr.fallback
            )?;
        }
        writeln!(out)?;
        Ok(())
    };
    for_each_input(&a.names, |n| one(n, &mut out))?;
    out.flush()?;
    Ok(())
}

fn stats(path: &Path, json: bool) -> Result<()> {
    let (fib, rules) = load(path)?;
    let c = fib.config();
    let keys: Vec<usize> = fib.tables().iter().map(|t| t.len()).collect();
    let total: usize = keys.iter().sum();
    let bytes = fib.bytes();
    let strategy = match c.strategy {
        Strategy::VerifyEach => "verify-each",
        Strategy::VerifyAtEnd => "verify-at-end",
    };
    let bytes_per_rule = bytes as f64 / rules.max(1) as f64;
    if json {
        let v = serde_json::json!({
            "file": path.display().to_string(),
            "rules": rules,
            "keys": total,
            "keys_per_level": keys,
            "max_components": c.max_components,
            "max_probes": fib.search_tree().depth(),
            "strategy": strategy,
            "bucket_bytes": fib.bucket_bytes(),
            "bytes": bytes,
            "bytes_per_rule": bytes_per_rule,
        });
        println!("{v}");
        return Ok(());
    }
    println!("file: {}", path.display());
    println!("rules: {rules}");
    println!("keys: {total}");
    println!(
        "keys_per_level: {}",
        keys.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!("max_components: {}", c.max_components);
    println!("max_probes: {}", fib.search_tree().depth());
    println!("strategy: {strategy}");
    println!("bucket_bytes: {}", fib.bucket_bytes());
    println!("bytes: {bytes}");
    println!("bytes_per_rule: {bytes_per_rule:.1}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_ndnd::ThreadMetrics;

    #[test]
    fn snapshot_has_a_series_per_forwarding_thread_beside_the_sums() {
        let m = DaemonMetrics {
            counters: vec![("ndn_satisfied_total", "Data", 12)],
            threads: vec![
                ThreadMetrics {
                    packets: 20,
                    satisfied: 7,
                    pit_entries: 3,
                    ..ThreadMetrics::default()
                },
                ThreadMetrics {
                    packets: 10,
                    satisfied: 5,
                    cs_hits: 2,
                    ..ThreadMetrics::default()
                },
            ],
            ..DaemonMetrics::default()
        };
        let text = ndn_snapshot(&m).to_prometheus_text();
        for line in [
            "nexthop_ndn_satisfied_total 12",
            "nexthop_ndn_thread_satisfied_total{thread=\"0\"} 7",
            "nexthop_ndn_thread_satisfied_total{thread=\"1\"} 5",
            "nexthop_ndn_thread_packets_total{thread=\"0\"} 20",
            "nexthop_ndn_thread_cs_hits_total{thread=\"1\"} 2",
            "nexthop_ndn_thread_pit_entries{thread=\"0\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
