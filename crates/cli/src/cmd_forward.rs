//! `nexthop forward`: forward the frames of a pcap file through a FIB
//! directory, writing one pcap file per output port.
//!
//! Glue only: the pipeline and the pcap ports are `nexthop-dataplane`'s;
//! this module opens the FIB (see [`crate::cmd_fib::open_lookup`]), wires
//! them together and prints the summary. The contract is in
//! `docs/dataplane.md`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::Args;
use nexthop_dataplane::pcap::{forward_pcap, PcapIn, PcapInError, PcapPorts, PcapRun};
use nexthop_dataplane::{MissPolicy, NameSource, Pipeline, PipelineConfig};

use crate::cmd_fib::open_lookup;

/// The input port number of the pcap file in counters.
const IN_PORT: u16 = 0;

/// `nexthop forward` arguments.
#[derive(Debug, Args)]
pub struct ForwardArgs {
    /// FIB directory (made by `nexthop fib build`).
    #[arg(long, value_name = "DIR")]
    fib: PathBuf,
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
    #[arg(long, value_name = "SOURCE", default_value = "dst-mac")]
    name: NameSource,
    /// Unknown names (with `fib build --check-bits R`): drop, controller
    /// (punt to controller.pcap) or flood (to every port of the FIB).
    #[arg(long, value_name = "POLICY", default_value = "drop")]
    miss: MissPolicy,
    /// Print the summary as JSON instead of one line.
    #[arg(long)]
    json: bool,
}

/// `nexthop forward`.
pub fn run(a: ForwardArgs) -> Result<()> {
    let fib = open_lookup(&a.fib)?;
    let cfg = PipelineConfig {
        name: a.name,
        miss: a.miss,
        ..PipelineConfig::default()
    };
    let key_type = fib.current.key_type;
    let mut pipeline = Pipeline::new(fib.mapped.view(), &fib.actions, key_type, cfg)
        .map_err(|e| anyhow!("{}: {e}", a.fib.display()))?;
    let mut input =
        PcapIn::open(&a.in_pcap).map_err(|e| anyhow!("{}: {e}", a.in_pcap.display()))?;
    let out = PcapPorts::create(&a.out_dir, input.header())?;
    let run = forward_pcap(&mut pipeline, IN_PORT, &mut input, out)?;

    let mut stdout = io::stdout().lock();
    if a.json {
        let v = summary_json(&a, key_type.name(), &run);
        serde_json::to_writer_pretty(&mut stdout, &v).map_err(io::Error::from)?;
        writeln!(stdout)?;
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
    let out: Vec<String> = c
        .tx_ports()
        .map(|(p, pc)| format!("{p}:{}", pc.frames))
        .collect();
    format!(
        "frames_in={} forwarded={} out={} dropped={} punted={} malformed={} misses={} mpps={:.3}",
        c.frames_in,
        c.forwarded,
        if out.is_empty() {
            "-".to_string()
        } else {
            out.join(",")
        },
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

fn summary_json(a: &ForwardArgs, key_type: &str, run: &PcapRun) -> serde_json::Value {
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
        "fib": path_str(&a.fib),
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
