//! `nexthop forward`: forward the frames of a pcap file through a FIB
//! directory (the flat-name pipeline, the default) or through an LPM table
//! and a neighbour file (`--lpm --neighbors`, the IP pipeline), writing one
//! pcap file per output port.
//!
//! Glue only: the pipelines and the pcap ports are `nexthop-dataplane`'s;
//! this module opens the FIB (see [`crate::cmd_fib::open_lookup`]) or the
//! LPM table, wires them together and prints the summary. The contract is
//! in `docs/dataplane.md`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::Args;
use nexthop_dataplane::pcap::{
    forward_pcap, forward_pcap_ip, PcapIn, PcapInError, PcapPorts, PcapRun,
};
use nexthop_dataplane::{
    IpConfig, IpPipeline, MissPolicy, NameSource, Neighbors, Pipeline, PipelineConfig,
};
use nexthop_lpm::persist::LpmTable;

use crate::cmd_fib::open_lookup;

/// The input port number of the pcap file in counters.
const IN_PORT: u16 = 0;

/// `nexthop forward` arguments.
#[derive(Debug, Args)]
pub struct ForwardArgs {
    /// FIB directory (made by `nexthop fib build`): the flat-name
    /// pipeline. Give it or --lpm.
    #[arg(long, value_name = "DIR", required_unless_present = "lpm")]
    fib: Option<PathBuf>,
    /// IP pipeline: route IPv4/IPv6 frames by longest-prefix match in
    /// this Bloomfwd table (made by `nexthop lpm build`) instead of --fib;
    /// needs --neighbors.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "fib",
        requires = "neighbors"
    )]
    lpm: Option<PathBuf>,
    /// IP pipeline: the neighbour file, one `NEXT-HOP PORT DST-MAC SRC-MAC`
    /// line per next hop of the --lpm table.
    #[arg(long, value_name = "FILE", requires = "lpm")]
    neighbors: Option<PathBuf>,
    /// Input: a classic pcap file of Ethernet frames (microsecond or
    /// nanosecond timestamps, either byte order).
    #[arg(long, value_name = "FILE")]
    in_pcap: PathBuf,
    /// Output directory: port-N.pcap per output port that sent frames,
    /// controller.pcap for punted frames (earlier outputs are replaced).
    #[arg(long, value_name = "DIR")]
    out_dir: PathBuf,
    /// The name of a frame: dst-mac (a mac FIB), 5tuple (13 bytes, a str
    /// FIB) or bytes:OFFSET:LEN (LEN bytes from OFFSET of the frame; the
    /// FIB key type must hold LEN-byte names: mac 6, ipv4 4, ipv6 16,
    /// u64 8 little-endian, str any).
    #[arg(
        long,
        value_name = "SOURCE",
        default_value = "dst-mac",
        conflicts_with = "lpm"
    )]
    name: NameSource,
    /// Unknown names (with `fib build --check-bits R`): drop, controller
    /// (punt to controller.pcap) or flood (to every port of the FIB).
    #[arg(
        long,
        value_name = "POLICY",
        default_value = "drop",
        conflicts_with = "lpm"
    )]
    miss: MissPolicy,
    /// Print the summary as JSON instead of one line.
    #[arg(long)]
    json: bool,
}

/// `nexthop forward`.
pub fn run(a: ForwardArgs) -> Result<()> {
    let (run, json) = match (&a.fib, &a.lpm, &a.neighbors) {
        (Some(dir), None, None) => forward_fib(&a, dir)?,
        (None, Some(lpm), Some(nb)) => forward_ip(&a, lpm, nb)?,
        _ => {
            return Err(anyhow!(
                "give --fib DIR, or --lpm FILE with --neighbors FILE"
            ))
        }
    };
    let mut stdout = io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut stdout, &json).map_err(io::Error::from)?;
        writeln!(stdout)?;
    } else if a.lpm.is_some() {
        writeln!(stdout, "{}", summary_line_ip(&run))?;
    } else {
        writeln!(stdout, "{}", summary_line(&run))?;
    }
    stdout.flush()?;
    match run.stopped_by {
        None => Ok(()),
        // A capture cut short is routine (a killed tcpdump): warn, succeed.
        Some(e @ PcapInError::TruncatedRecord { .. }) => {
            eprintln!(
                "warning: {}: {e}; {} before it forwarded",
                a.in_pcap.display(),
                frames(run.counters.frames_in)
            );
            Ok(())
        }
        Some(e) => Err(anyhow!(
            "{}: {e}; {} before it forwarded",
            a.in_pcap.display(),
            frames(run.counters.frames_in)
        )),
    }
}

/// The flat-name pipeline over the FIB directory `dir`.
fn forward_fib(a: &ForwardArgs, dir: &Path) -> Result<(PcapRun, serde_json::Value)> {
    let fib = open_lookup(dir)?;
    let cfg = PipelineConfig {
        name: a.name,
        miss: a.miss,
        ..PipelineConfig::default()
    };
    let key_type = fib.current.key_type;
    let mut pipeline = Pipeline::new(fib.mapped.view(), &fib.actions, key_type, cfg)
        .map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    let mut input =
        PcapIn::open(&a.in_pcap).map_err(|e| anyhow!("{}: {e}", a.in_pcap.display()))?;
    let out = PcapPorts::create(&a.out_dir, input.header())?;
    let run = forward_pcap(&mut pipeline, IN_PORT, &mut input, out)?;
    let json = summary_json(a, dir, key_type.name(), &run);
    Ok((run, json))
}

/// Read and decode an LPM table file (`nexthop lpm build`).
pub(crate) fn load_lpm(path: &Path) -> Result<LpmTable> {
    let bytes = std::fs::read(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    LpmTable::decode(&bytes).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Load an LPM table and its neighbour file and check that they fit.
pub(crate) fn open_ip(lpm: &Path, neighbors: &Path) -> Result<(LpmTable, Neighbors)> {
    let table = load_lpm(lpm)?;
    let nb = Neighbors::load(neighbors)?;
    // Checked here too so the error names both files before any port opens.
    IpPipeline::new(&table, &nb, IpConfig::default())
        .map_err(|e| anyhow!("{} with {}: {e}", lpm.display(), neighbors.display()))?;
    Ok((table, nb))
}

/// The IP pipeline over the LPM table `lpm` and the neighbour file `nb`.
fn forward_ip(a: &ForwardArgs, lpm: &Path, nb: &Path) -> Result<(PcapRun, serde_json::Value)> {
    let (table, neighbors) = open_ip(lpm, nb)?;
    let mut pipeline = IpPipeline::new(&table, &neighbors, IpConfig::default())
        .map_err(|e| anyhow!("{}: {e}", lpm.display()))?;
    let mut input =
        PcapIn::open(&a.in_pcap).map_err(|e| anyhow!("{}: {e}", a.in_pcap.display()))?;
    let out = PcapPorts::create(&a.out_dir, input.header())?;
    let run = forward_pcap_ip(&mut pipeline, IN_PORT, &mut input, out)?;
    let json = summary_json_ip(a, lpm, nb, &run);
    Ok((run, json))
}

/// "1 frame", "N frames".
fn frames(n: u64) -> String {
    match n {
        1 => "1 frame".to_string(),
        n => format!("{n} frames"),
    }
}

/// `frames_in=N forwarded=N out=PORT:N,... dropped=N punted=N malformed=N misses=N mpps=X`.
fn summary_line(run: &PcapRun) -> String {
    let c = &run.counters;
    format!(
        "frames_in={} forwarded={} out={} dropped={} punted={} malformed={} misses={} mpps={:.3}",
        c.frames_in,
        c.forwarded,
        c.out_list(),
        c.dropped,
        c.punted,
        c.malformed.total(),
        c.misses,
        run.mpps()
    )
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// `frames_in=N forwarded=N out=PORT:N,... dropped=N no_route=N ttl_expired=N malformed=N mpps=X`.
fn summary_line_ip(run: &PcapRun) -> String {
    let c = &run.counters;
    format!(
        "frames_in={} forwarded={} out={} dropped={} no_route={} ttl_expired={} malformed={} mpps={:.3}",
        c.frames_in,
        c.forwarded,
        c.out_list(),
        c.dropped,
        c.misses,
        c.ttl_expired,
        c.malformed.total(),
        run.mpps()
    )
}

fn ports_json(
    it: impl Iterator<Item = (u16, nexthop_dataplane::PortCounter)>,
) -> serde_json::Value {
    it.map(|(p, pc)| serde_json::json!({"port": p, "frames": pc.frames, "bytes": pc.bytes}))
        .collect::<Vec<_>>()
        .into()
}

fn malformed_json(run: &PcapRun) -> serde_json::Value {
    run.counters
        .malformed
        .iter()
        .map(|(k, n)| (k.name().to_string(), serde_json::Value::from(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn files_json(run: &PcapRun) -> serde_json::Value {
    run.outputs
        .iter()
        .map(|f| serde_json::json!({"port": f.port, "path": path_str(&f.path), "frames": f.frames}))
        .collect::<Vec<_>>()
        .into()
}

fn summary_json_ip(a: &ForwardArgs, lpm: &Path, nb: &Path, run: &PcapRun) -> serde_json::Value {
    let c = &run.counters;
    serde_json::json!({
        "pipeline": "ip",
        "lpm": path_str(lpm),
        "neighbors": path_str(nb),
        "input": path_str(&a.in_pcap),
        "out_dir": path_str(&a.out_dir),
        "frames_in": c.frames_in,
        "bytes_in": c.bytes_in,
        "forwarded": c.forwarded,
        "dropped": c.dropped,
        "no_route": c.misses,
        "ttl_expired": c.ttl_expired,
        "malformed": c.malformed.total(),
        "malformed_by_reason": malformed_json(run),
        "in": ports_json(c.rx_ports()),
        "out": ports_json(c.tx_ports()),
        "files": files_json(run),
        "stopped_by": run.stopped_by.as_ref().map(|e| e.to_string()),
        "pipeline_seconds": run.pipeline_time.as_secs_f64(),
        "mpps": run.mpps(),
    })
}

fn summary_json(a: &ForwardArgs, fib: &Path, key_type: &str, run: &PcapRun) -> serde_json::Value {
    let c = &run.counters;
    let ports = |it: &mut dyn Iterator<Item = (u16, nexthop_dataplane::PortCounter)>| {
        it.map(|(p, pc)| serde_json::json!({"port": p, "frames": pc.frames, "bytes": pc.bytes}))
            .collect::<Vec<_>>()
    };
    let malformed: serde_json::Map<String, serde_json::Value> = c
        .malformed
        .iter()
        .map(|(k, n)| (k.name().to_string(), n.into()))
        .collect();
    let files: Vec<serde_json::Value> = run
        .outputs
        .iter()
        .map(|f| serde_json::json!({"port": f.port, "path": path_str(&f.path), "frames": f.frames}))
        .collect();
    serde_json::json!({
        "fib": path_str(fib),
        "key_type": key_type,
        "input": path_str(&a.in_pcap),
        "out_dir": path_str(&a.out_dir),
        "name": a.name.to_string(),
        "miss": a.miss.to_string(),
        "frames_in": c.frames_in,
        "bytes_in": c.bytes_in,
        "forwarded": c.forwarded,
        "dropped": c.dropped,
        "punted": c.punted,
        "malformed": c.malformed.total(),
        "misses": c.misses,
        "hits": {
            "port": c.hits.port,
            "port_set": c.hits.port_set,
            "drop": c.hits.drop,
            "controller": c.hits.controller,
        },
        "malformed_by_reason": malformed,
        "in": ports(&mut c.rx_ports()),
        "out": ports(&mut c.tx_ports()),
        "files": files,
        "stopped_by": run.stopped_by.as_ref().map(|e| e.to_string()),
        "pipeline_seconds": run.pipeline_time.as_secs_f64(),
        "mpps": run.mpps(),
    })
}
