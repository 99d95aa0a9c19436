//! `nexthop sdf run`: software-defined forwarding. A built-in app (by
//! name) decides the packets its decision cache misses; the cache answers
//! the rest. Offline: frames from pcap files (`--in-pcap [PORT=]FILE`,
//! merged by timestamp), one pcap per output port in `--out-dir`, as
//! `nexthop forward` does.
//!
//! Glue only: the app API and the cache are `nexthop-sdf`'s, the pipeline
//! and its pcap driver `nexthop-dataplane::sdf`'s. The contract is in
//! `docs/dataplane.md` ("The SDF pipeline").

use std::io::{self, Write};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use nexthop_dataplane::pcap::{PcapIn, PcapInError, PcapPorts};
use nexthop_dataplane::sdf::{
    forward_pcap_sdf, App, PcapInput, SdfConfig, SdfPcapRun, SdfRuntime, SdfStats,
};
use nexthop_sdf::app::{DropReason, L2Config, L2Switch};

/// The built-in apps, by name.
const APPS: &[&str] = &["l2switch"];

/// `nexthop sdf` subcommands.
#[derive(Debug, Subcommand)]
pub enum SdfCmd {
    /// Run an app over pcap files: misses go to the app, its decisions are
    /// cached (marks + state ids) and revoked when its state changes; one
    /// pcap per output port.
    Run(RunArgs),
}

/// An `--in-pcap` value: `[PORT=]FILE`.
#[derive(Clone, Debug)]
pub struct InPcap {
    port: u16,
    path: PathBuf,
}

impl FromStr for InPcap {
    type Err = String;

    fn from_str(s: &str) -> Result<InPcap, String> {
        if let Some((p, f)) = s.split_once('=') {
            if let Ok(port) = p.parse::<u16>() {
                if f.is_empty() {
                    return Err(format!("{s:?}: no file after {p}="));
                }
                return Ok(InPcap {
                    port,
                    path: f.into(),
                });
            }
        }
        Ok(InPcap {
            port: 0,
            path: s.into(),
        })
    }
}

/// A `--ports` value: a comma list of port numbers.
#[derive(Clone, Debug)]
pub struct PortList(Vec<u16>);

impl FromStr for PortList {
    type Err = String;

    fn from_str(s: &str) -> Result<PortList, String> {
        s.split(',')
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .map_err(|e| format!("port {p:?}: {e}"))
            })
            .collect::<Result<_, _>>()
            .map(PortList)
    }
}

/// `nexthop sdf run` arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The app: a built-in app by name (l2switch: an Ethernet learning
    /// switch).
    #[arg(long, value_name = "NAME")]
    app: String,
    /// Input: a classic pcap file of Ethernet frames, received on PORT
    /// (default 0). Repeat for several ports: the files are merged in
    /// timestamp order.
    #[arg(long, value_name = "[PORT=]FILE", required = true)]
    in_pcap: Vec<InPcap>,
    /// Output directory: port-N.pcap per output port that sent frames,
    /// controller.pcap for frames sent to the control port (earlier
    /// outputs are replaced).
    #[arg(long, value_name = "DIR")]
    out_dir: PathBuf,
    /// The switch's ports (comma list); the input ports are added.
    #[arg(long, value_name = "LIST", default_value = "0,1,2,3")]
    ports: PortList,
    /// l2switch: a MAC binding this many seconds old is forgotten.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    mac_timeout: u64,
    /// l2switch: MAC bindings held at most.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    max_macs: usize,
    /// Cached decisions at most (LRU eviction).
    #[arg(long, value_name = "N", default_value_t = 65536)]
    cache_capacity: usize,
    /// Distinct masks (wildcard subtables) at most.
    #[arg(long, value_name = "N", default_value_t = 64)]
    max_masks: usize,
    /// Misses queued to the app at most.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    queue: usize,
    /// Print the summary as JSON instead of one line.
    #[arg(long)]
    json: bool,
}

/// `nexthop sdf`.
pub fn run(cmd: SdfCmd) -> Result<()> {
    match cmd {
        SdfCmd::Run(a) => run_pcap(&a),
    }
}

fn builtin(a: &RunArgs) -> Result<Box<dyn App>> {
    match a.app.as_str() {
        "l2switch" => {
            if a.max_macs == 0 {
                bail!("--max-macs must be at least 1");
            }
            Ok(Box::new(L2Switch::new(L2Config {
                timeout: Duration::from_secs(a.mac_timeout),
                max_macs: a.max_macs,
            })))
        }
        other => bail!(
            "--app {other:?}: no such built-in app (built in: {})",
            APPS.join(", ")
        ),
    }
}

fn run_pcap(a: &RunArgs) -> Result<()> {
    let app = builtin(a)?;
    let mut ports = a.ports.0.clone();
    ports.extend(a.in_pcap.iter().map(|i| i.port));
    ports.sort_unstable();
    ports.dedup();
    let cfg = SdfConfig {
        cache: nexthop_sdf::Config {
            capacity: a.cache_capacity,
            max_masks: a.max_masks,
            seed: rand_seed(),
            ..nexthop_sdf::Config::default()
        },
        ports,
        queue: a.queue,
        ..SdfConfig::default()
    };
    let mut inputs = Vec::with_capacity(a.in_pcap.len());
    for i in &a.in_pcap {
        let input = PcapIn::open(&i.path).map_err(|e| anyhow!("{}: {e}", i.path.display()))?;
        inputs.push(PcapInput {
            port: i.port,
            input,
        });
    }
    let header = inputs[0].input.header();
    let rt = SdfRuntime::start(app, cfg).map_err(|e| anyhow!("{e}"))?;
    let mut stage = rt.stage();
    let out = PcapPorts::create(&a.out_dir, header)?;
    let run = forward_pcap_sdf(&mut stage, &mut inputs, out, Duration::from_secs(10))?;
    drop(stage);
    let stats = rt.shutdown();
    let mut stdout = io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut stdout, &summary_json(a, &run, &stats))
            .map_err(io::Error::from)?;
        writeln!(stdout)?;
    } else {
        writeln!(stdout, "{}", summary_line(&run, &stats))?;
    }
    stdout.flush()?;
    for (port, e) in &run.stopped_by {
        let file = a
            .in_pcap
            .iter()
            .find(|i| i.port == *port)
            .map_or_else(String::new, |i| i.path.display().to_string());
        match e {
            // A capture cut short is routine (a killed tcpdump): warn.
            PcapInError::TruncatedRecord { .. } => eprintln!("warning: {file}: {e}"),
            _ => bail!("{file}: {e}"),
        }
    }
    Ok(())
}

/// A per-process hash seed: cache keys are attacker-controlled.
fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

fn out_list(run: &SdfPcapRun) -> String {
    let out: Vec<String> = run
        .counters
        .tx_ports()
        .map(|(p, pc)| format!("{p}:{}", pc.frames))
        .collect();
    if out.is_empty() {
        "-".to_string()
    } else {
        out.join(",")
    }
}

/// App-side drops with their reasons, `-` when none.
fn app_drops(stats: &SdfStats) -> String {
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

/// `frames_in=N forwarded=N out=PORT:N,... dropped=N punted=N hits=N
/// misses=N app_calls=N pending_waits=N installs=N revocations=N
/// entries=N masks=N app_drops=REASON:N,...|-`.
fn summary_line(run: &SdfPcapRun, stats: &SdfStats) -> String {
    let c = &run.counters;
    format!(
        "frames_in={} forwarded={} out={} dropped={} punted={} hits={} misses={} app_calls={} \
         pending_waits={} installs={} revocations={} entries={} masks={} app_drops={}",
        c.frames_in,
        c.forwarded,
        out_list(run),
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
    )
}

fn summary_json(a: &RunArgs, run: &SdfPcapRun, stats: &SdfStats) -> serde_json::Value {
    let c = &run.counters;
    let ports = |it: &mut dyn Iterator<Item = (u16, nexthop_dataplane::PortCounter)>| {
        it.map(|(p, pc)| serde_json::json!({"port": p, "frames": pc.frames, "bytes": pc.bytes}))
            .collect::<Vec<_>>()
    };
    let app_drops: serde_json::Map<String, serde_json::Value> = DropReason::ALL
        .iter()
        .map(|&r| (r.name().to_string(), stats.app.drops.get(r).into()))
        .collect();
    let files: Vec<serde_json::Value> = run
        .outputs
        .iter()
        .map(|f| {
            serde_json::json!({"port": f.port, "path": f.path.display().to_string(), "frames": f.frames})
        })
        .collect();
    let inputs: Vec<serde_json::Value> = a
        .in_pcap
        .iter()
        .map(|i| serde_json::json!({"port": i.port, "path": i.path.display().to_string()}))
        .collect();
    let k = &stats.cache;
    serde_json::json!({
        "app": a.app,
        "inputs": inputs,
        "out_dir": a.out_dir.display().to_string(),
        "frames_in": c.frames_in,
        "bytes_in": c.bytes_in,
        "forwarded": c.forwarded,
        "dropped": c.dropped,
        "punted": c.punted,
        "in": ports(&mut c.rx_ports()),
        "out": ports(&mut c.tx_ports()),
        "files": files,
        "pipeline": run.sdf,
        "cache": {
            "lookups": k.lookups,
            "front_hits": k.front_hits,
            "wildcard_hits": k.wildcard_hits,
            "misses": k.misses,
            "subtables_probed": k.subtables_probed,
            "installs": k.installs,
            "replaced": k.replaced,
            "evictions": k.evictions,
            "revocations": k.revocations,
            "removed_calls": k.removed_calls,
            "not_cached_no_deps": k.not_cached_no_deps,
            "not_cached_stale": k.not_cached_stale,
            "mask_refusals": k.admission_refusals(),
            "entries": stats.entries,
            "masks": stats.masks,
            "state_ids": stats.state_ids,
        },
        "app_side": {
            "calls": stats.app.app_calls,
            "cacheable": stats.app.cacheable,
            "uncacheable": stats.app.uncacheable,
            "install_errors": stats.app.install_errors,
            "drops": app_drops,
        },
        "unanswered": run.unanswered,
        "stopped_by": run.stopped_by.iter().map(|(p, e)| serde_json::json!({"port": p, "error": e.to_string()})).collect::<Vec<_>>(),
        "seconds": run.elapsed.as_secs_f64(),
    })
}
