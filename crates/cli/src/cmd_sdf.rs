//! `nexthop sdf run`: software-defined forwarding. A built-in app (by
//! name) decides the packets its decision cache misses; the cache answers
//! the rest. Offline: frames from pcap files (`--in-pcap [PORT=]FILE`,
//! merged by timestamp), one pcap per output port in `--out-dir`, as
//! `nexthop forward` does. Live: frames from interfaces (`--port N=IFACE`,
//! AF_PACKET by default, `--io auto|afxdp` as for `nexthop run`) through
//! the forwarder engine (`engine::Engine::run`, one SDF stage per worker)
//! until a signal or `--duration`, the counters (the engine's and the
//! SDF's) on the Prometheus endpoint with `--metrics`.
//!
//! `--slice NAME:APP:ports=P,..|vlan=V[:share=N]` (repeatable, instead of
//! `--app`) runs several apps on one switch, each owning the frames of its
//! ports or VLAN id, with its own share of the cache, app thread and
//! counters; a frame no slice owns is dropped (`no_slice`). A slice whose
//! APP is a Python file (`APP.py`) makes the whole run the Python
//! package's (`python -m nexthop.sdf run --slice ...`), its other slices
//! the built-in l2switch run in that process.
//!
//! Glue only: the app API and the cache are `nexthop-sdf`'s, the pipeline
//! and its pcap driver `nexthop-dataplane::sdf`'s. The contract is in
//! `docs/dataplane.md` ("The SDF pipeline").

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use nexthop_dataplane::afpacket::{FanoutMode, RingConfig};
use nexthop_dataplane::engine::{EngineConfig, IoMode, PortsConfig, PortsError, Report, XdpAttach};
use nexthop_dataplane::live::{PortStats, StopAfter, StopFlag};
use nexthop_dataplane::metrics::SharedSnapshot;
use nexthop_dataplane::pcap::{PcapIn, PcapInError, PcapPorts};
use nexthop_dataplane::sdf::{
    forward_pcap_sdf, live_ports, pcap_summary_line, ready_line, run_live as run_sdf_live,
    sdf_progress_line, sdf_snapshot, App, PcapInput, SdfConfig, SdfLiveError, SdfLivePorts,
    SdfPcapRun, SdfRuntime, SdfStats, SliceReport,
};
use nexthop_dataplane::Counters;
use nexthop_sdf::app::{DropReason, L2Config, L2Switch, SliceSpec};

use crate::cmd_run::{PortMap, MAX_WORKERS};

#[path = "sdflab/mod.rs"]
mod sdflab;

/// The built-in apps, by name.
const APPS: &[&str] = &["l2switch", "router"];

/// `nexthop sdf` subcommands.
#[derive(Debug, Subcommand)]
// Parsed once per process: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum SdfCmd {
    /// Run an app (or one app per slice) over pcap files (`--in-pcap`,
    /// `--out-dir`) or live interfaces (`--port N=IFACE`): misses go to
    /// the app, its decisions are cached (marks + state ids) and revoked
    /// when its state changes.
    Run(RunArgs),
    /// The l2switch through the SDF pipeline over generated traffic (no
    /// root): progress lines (hit rate, app calls per second,
    /// revocations), a summary, and PASS when every frame went where the
    /// app without a cache sends it.
    Lab(sdflab::LabArgs),
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
    /// switch; router: an IPv4 router, --router-* flags), or a Python app file `APP.py` (offline or live; run by
    /// `${NEXTHOP_PYTHON:-python3} -m nexthop.sdf run`, which needs the
    /// nexthop Python package and drives this data plane through it).
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "slices",
        conflicts_with = "slices"
    )]
    app: Option<String>,
    /// A slice instead of one app (repeatable): APP (a built-in app, or a
    /// Python app file APP.py) runs the frames received on the listed
    /// ports, or tagged with VLAN id V on any port (the VLAN wins), with
    /// its own share of --cache-capacity (N entries; slices without
    /// share= split what is left equally), its own app thread, queues and
    /// counters. A frame no slice owns is dropped (`no_slice`). With a
    /// Python slice the run is the Python package's, as for --app APP.py,
    /// and the other slices may run APP.py files or l2switch. Excludes
    /// --app.
    #[arg(long = "slice", value_name = "NAME:APP:ports=P,..|vlan=V[:share=N]")]
    slices: Vec<SliceSpec>,
    /// Offline input: a classic pcap file of Ethernet frames, received on
    /// PORT (default 0). Repeat for several ports: the files are merged in
    /// timestamp order. Needs --out-dir; excludes --port.
    #[arg(long, value_name = "[PORT=]FILE")]
    in_pcap: Vec<InPcap>,
    /// Offline output directory: port-N.pcap per output port that sent
    /// frames, controller.pcap for frames sent to the control port
    /// (earlier outputs are replaced).
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Offline: the switch's ports (comma list); the input ports are
    /// added.
    #[arg(long, value_name = "LIST", default_value = "0,1,2,3")]
    ports: PortList,
    /// Live: switch port N is interface IFACE (repeat for each port; they
    /// are the app's ports).
    #[arg(long = "port", value_name = "N=IFACE")]
    live_ports: Vec<PortMap>,
    /// Live: port(s) to receive on (repeatable; default: every --port, as
    /// a switch receives on all its ports).
    #[arg(long = "in", value_name = "N")]
    inputs: Vec<u16>,
    /// Live: worker threads (default 1), each with its own stage and
    /// pending-miss table, sharing the cache and the app.
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// Live: how the kernel splits frames among workers (hash, lb, cpu,
    /// queue).
    #[arg(long, value_name = "MODE", default_value = "hash")]
    fanout: FanoutMode,
    /// Live: port I/O: afpacket (the default), auto or afxdp, as for
    /// `nexthop run`.
    #[arg(long, value_name = "IO", default_value = "afpacket")]
    io: IoMode,
    /// Live, AF_XDP: auto (native, else generic), skb or native.
    #[arg(long, value_name = "MODE", default_value = "auto")]
    xdp_mode: XdpAttach,
    /// Live, AF_XDP: the first interface queue to bind.
    #[arg(long, value_name = "Q", default_value_t = 0)]
    xdp_queue: u32,
    /// Live: stop after this many seconds (default: at SIGINT/SIGTERM).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Live: no progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Live: serve the counters (the engine's and the SDF's) at
    /// http://ADDR/metrics and /stats.json (`nexthop stats --addr ADDR`).
    /// Loopback only unless --metrics-allow-remote.
    #[arg(long, value_name = "HOST:PORT")]
    metrics: Option<SocketAddr>,
    /// Allow --metrics on an address that is not loopback.
    #[arg(long)]
    metrics_allow_remote: bool,
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
    /// Data misses queued to the app at most (per slice).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    queue: usize,
    /// Control misses (ARP) queued to the app at most (per slice): a
    /// queue of their own, so a storm of data misses cannot crowd them
    /// out.
    #[arg(long, value_name = "N", default_value_t = 256)]
    control_queue: usize,
    /// Control requests the app serves for each data request while both
    /// wait.
    #[arg(long, value_name = "W", default_value_t = 4)]
    control_weight: u32,
    /// Turn the pending-miss table off: every miss is an app call, even
    /// of a flow whose decision is in flight (a baseline to compare with).
    #[arg(long)]
    no_pending_table: bool,
    /// Print the summary as JSON instead of one line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    ovs: crate::cmd_sdf_ovs::OvsArgs,
    #[command(flatten)]
    router: crate::cmd_sdf_router::RouterArgs,
}

/// `nexthop sdf`.
pub fn run(cmd: SdfCmd) -> Result<()> {
    match cmd {
        SdfCmd::Lab(a) => sdflab::run(&a),
        SdfCmd::Run(a) if a.ovs.is_ovs() => {
            let Some(name) = a.app.as_deref() else {
                bail!("--backend ovs runs one --app; slices are not supported on Open vSwitch");
            };
            if name.ends_with(".py") {
                return crate::cmd_sdf_ovs::run_python(&a.ovs, name, a.duration, a.json);
            }
            crate::cmd_sdf_ovs::run(&a.ovs, builtin(&a, name)?, a.duration, a.json)
        }
        SdfCmd::Run(a) if runs_python(&a) => run_python(&a),
        SdfCmd::Run(a) => {
            let live = !a.live_ports.is_empty();
            match (live, a.in_pcap.is_empty(), &a.out_dir) {
                (true, true, None) => run_live(&a),
                (true, _, _) => bail!("--port (live) excludes --in-pcap and --out-dir (offline)"),
                (false, false, Some(dir)) => run_pcap(&a, dir),
                (false, true, _) => {
                    bail!("no input: give --port N=IFACE (live) or --in-pcap FILE --out-dir DIR")
                }
                (false, false, None) => bail!("--in-pcap needs --out-dir"),
            }
        }
    }
}

/// A Python app file (`APP.py`) rather than a built-in app's name.
fn is_python(app: &str) -> bool {
    app.ends_with(".py")
}

/// Whether the Python package runs the switch: `--app APP.py`, or a
/// `--slice` whose app is an `APP.py` (the built-in slices beside it run
/// in the same process).
fn runs_python(a: &RunArgs) -> bool {
    a.app.as_deref().is_some_and(is_python) || a.slices.iter().any(|s| is_python(&s.app))
}

/// Beside a Python slice, every slice runs a Python app file that exists
/// or the built-in l2switch (the package builds it; the router's
/// `--router-*` flags stay with this binary).
fn check_python_slices(a: &RunArgs) -> Result<()> {
    for s in &a.slices {
        if is_python(&s.app) {
            if !std::path::Path::new(&s.app).is_file() {
                bail!("--slice {}: {}: no such file", s.name, s.app);
            }
        } else if s.app == "router" {
            bail!(
                "--slice {}: beside a Python slice the built-in router cannot run (its \
                 --router-* flags are this binary's); run python/nexthop/apps/router.py in it",
                s.name
            );
        } else if s.app != "l2switch" {
            bail!(
                "--slice {}: {:?}: no such built-in app (built in: {})",
                s.name,
                s.app,
                APPS.join(", ")
            );
        }
    }
    Ok(())
}

/// What `--app` or the slices name (`NAME=APP,...`).
fn app_label(a: &RunArgs) -> String {
    match &a.app {
        Some(app) => app.clone(),
        None => a
            .slices
            .iter()
            .map(|s| format!("{}={}", s.name, s.app))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// A Python app: the same run (offline or live) by the Python package,
/// `${NEXTHOP_PYTHON:-python3} -m nexthop.sdf run`, which drives this
/// data plane through its bindings (the app runs on the pipeline's app
/// thread in that process).
fn run_python(a: &RunArgs) -> Result<()> {
    check_python_slices(a)?;
    let app = app_label(a);
    // The flag that named the Python app(s), for the messages.
    let what = if a.slices.is_empty() {
        format!("--app {app}")
    } else {
        format!("--slice {app}")
    };
    let live = !a.live_ports.is_empty();
    if live && (!a.in_pcap.is_empty() || a.out_dir.is_some()) {
        bail!("--port (live) excludes --in-pcap and --out-dir (offline)");
    }
    if !live && (a.out_dir.is_none() || a.in_pcap.is_empty()) {
        bail!("{what}: a Python app needs --port N=IFACE (live) or --in-pcap FILE --out-dir DIR");
    }
    if live && a.json {
        bail!("--json is for the offline summary");
    }
    if a.metrics.is_some() && !live {
        bail!("--metrics serves a live run's counters (--port N=IFACE); offline, the summary has them");
    }
    let py = std::env::var_os("NEXTHOP_PYTHON").unwrap_or_else(|| "python3".into());
    let importable = std::process::Command::new(&py)
        .args(["-c", "import nexthop.sdf"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !importable {
        bail!(
            "{what}: Python apps need the nexthop Python package, but `{} -c 'import nexthop.sdf'` failed (install the wheel built from python/, or point NEXTHOP_PYTHON at an interpreter that has it)",
            py.to_string_lossy()
        );
    }
    let mut cmd = std::process::Command::new(&py);
    cmd.args(["-m", "nexthop.sdf", "run"]);
    if a.slices.is_empty() {
        cmd.args(["--app", &app]);
    } else {
        for s in &a.slices {
            cmd.arg("--slice").arg(s.to_string());
        }
        cmd.args(["--mac-timeout", &a.mac_timeout.to_string()]);
        cmd.args(["--max-macs", &a.max_macs.to_string()]);
    }
    if let Some(out_dir) = &a.out_dir {
        for i in &a.in_pcap {
            cmd.arg("--in-pcap")
                .arg(format!("{}={}", i.port, i.path.display()));
        }
        let ports: Vec<String> = a.ports.0.iter().map(u16::to_string).collect();
        cmd.arg("--out-dir").arg(out_dir);
        cmd.args(["--ports", &ports.join(",")]);
    }
    for m in &a.live_ports {
        cmd.arg("--port").arg(format!("{}={}", m.port, m.iface));
    }
    if live {
        for p in &a.inputs {
            cmd.args(["--in", &p.to_string()]);
        }
        cmd.args(["--workers", &a.workers.to_string()]);
        let io = match a.io {
            IoMode::Auto => "auto",
            IoMode::Afxdp => "afxdp",
            IoMode::Afpacket => "afpacket",
        };
        let xdp_mode = match a.xdp_mode {
            XdpAttach::Auto => "auto",
            XdpAttach::Skb => "skb",
            XdpAttach::Native => "native",
        };
        cmd.args(["--io", io]);
        cmd.args(["--fanout", a.fanout.name()]);
        cmd.args(["--xdp-mode", xdp_mode]);
        cmd.args(["--xdp-queue", &a.xdp_queue.to_string()]);
        if let Some(d) = a.duration {
            cmd.args(["--duration", &d.to_string()]);
        }
        if a.quiet {
            cmd.arg("--quiet");
        }
        if let Some(m) = a.metrics {
            cmd.args(["--metrics", &m.to_string()]);
        }
        if a.metrics_allow_remote {
            cmd.arg("--metrics-allow-remote");
        }
    }
    cmd.args(["--cache-capacity", &a.cache_capacity.to_string()]);
    cmd.args(["--max-masks", &a.max_masks.to_string()]);
    cmd.args(["--queue", &a.queue.to_string()]);
    cmd.args(["--control-queue", &a.control_queue.to_string()]);
    cmd.args(["--control-weight", &a.control_weight.to_string()]);
    if a.no_pending_table {
        cmd.arg("--no-pending-table");
    }
    if a.json {
        cmd.arg("--json");
    }
    if live {
        // Live, the Python process is the switch: it takes this process's
        // place, so that SIGINT/SIGTERM (and `ip netns exec`'s pid) reach
        // the run and its summary line.
        use std::os::unix::process::CommandExt;
        let e = cmd.exec();
        bail!("{}: {e}", py.to_string_lossy());
    }
    let status = cmd
        .status()
        .map_err(|e| anyhow!("{}: {e}", py.to_string_lossy()))?;
    if !status.success() {
        bail!("{what}: the Python app run failed ({status})");
    }
    Ok(())
}

fn builtin(a: &RunArgs, name: &str) -> Result<Box<dyn App>> {
    match name {
        "l2switch" => {
            if a.max_macs == 0 {
                bail!("--max-macs must be at least 1");
            }
            Ok(Box::new(L2Switch::new(L2Config {
                timeout: Duration::from_secs(a.mac_timeout),
                max_macs: a.max_macs,
            })))
        }
        "router" => crate::cmd_sdf_router::app(&a.router),
        other => bail!(
            "--app {other:?}: no such built-in app (built in: {})",
            APPS.join(", ")
        ),
    }
}

/// The runtime: `--app`'s app, or one per `--slice`.
fn start_runtime(a: &RunArgs, cfg: SdfConfig) -> Result<SdfRuntime> {
    let rt = match &a.app {
        Some(name) => SdfRuntime::start(builtin(a, name)?, cfg),
        None => {
            let mut slices = Vec::with_capacity(a.slices.len());
            for spec in &a.slices {
                let app = builtin(a, &spec.app)?;
                slices.push((spec.clone(), app));
            }
            SdfRuntime::start_sliced(slices, cfg)
        }
    };
    rt.map_err(|e| anyhow!("{e}"))
}

fn run_pcap(a: &RunArgs, out_dir: &std::path::Path) -> Result<()> {
    let mut ports = a.ports.0.clone();
    ports.extend(a.in_pcap.iter().map(|i| i.port));
    ports.sort_unstable();
    ports.dedup();
    let cfg = sdf_config(a, ports);
    let mut inputs = Vec::with_capacity(a.in_pcap.len());
    for i in &a.in_pcap {
        let input = PcapIn::open(&i.path).map_err(|e| anyhow!("{}: {e}", i.path.display()))?;
        inputs.push(PcapInput {
            port: i.port,
            input,
        });
    }
    let header = inputs[0].input.header();
    let rt = start_runtime(a, cfg)?;
    let mut stage = rt.stage();
    let out = PcapPorts::create(out_dir, header)?;
    let run = forward_pcap_sdf(&mut stage, &mut inputs, out, Duration::from_secs(10))?;
    drop(stage);
    let slices = rt.slice_reports(&run.slices);
    let stats = rt.shutdown();
    let mut stdout = io::stdout().lock();
    if a.json {
        let json = summary_json(a, out_dir, &run, &stats, &slices);
        serde_json::to_writer_pretty(&mut stdout, &json).map_err(io::Error::from)?;
        writeln!(stdout)?;
    } else {
        writeln!(stdout, "{}", pcap_summary_line(&run, &stats, &slices))?;
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

fn sdf_config(a: &RunArgs, ports: Vec<u16>) -> SdfConfig {
    SdfConfig {
        cache: nexthop_sdf::Config {
            capacity: a.cache_capacity,
            max_masks: a.max_masks,
            seed: rand_seed(),
            ..nexthop_sdf::Config::default()
        },
        ports,
        queue: a.queue,
        control_queue: a.control_queue,
        control_weight: a.control_weight,
        pending_table: !a.no_pending_table,
        ..SdfConfig::default()
    }
}

/// Live: the app over interfaces, one SDF stage per worker of the engine.
fn run_live(a: &RunArgs) -> Result<()> {
    if a.json {
        bail!("--json is for the offline summary (live counters: --metrics and `nexthop stats --json`)");
    }
    if !(1..=MAX_WORKERS).contains(&a.workers) {
        bail!("--workers {}: expected 1 to {MAX_WORKERS}", a.workers);
    }
    let duration = match a.duration {
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--duration {s}: expected a positive number of seconds"),
        None => None,
    };
    let maps: Vec<(u16, &str)> = a
        .live_ports
        .iter()
        .map(|m| (m.port, m.iface.as_str()))
        .collect();
    let (by_port, inputs) = live_ports(&maps, &a.inputs).map_err(|e| anyhow!(e))?;
    let stop = StopFlag::install().map_err(|e| anyhow!("installing signal handlers: {e}"))?;
    let ports_cfg = PortsConfig {
        workers: a.workers,
        io: a.io,
        xdp_attach: a.xdp_mode,
        xdp_queue: a.xdp_queue,
        ring: RingConfig::default(),
        fanout: a.fanout,
        fanout_group_base: (std::process::id() & 0x7fff) as u16,
    };
    let rt = start_runtime(a, sdf_config(a, by_port.keys().copied().collect()))?;
    let shared = SharedSnapshot::new();
    let _metrics_server =
        crate::cmd_run::start_metrics(a.metrics, a.metrics_allow_remote, &shared)?;
    let snapshot =
        |c: &Counters, ps: &PortStats, elapsed: Duration| sdf_snapshot(&rt, c, ps, elapsed);
    let on_report = |r: &Report<'_>| {
        let p = &r.merged;
        if a.metrics.is_some() {
            shared.publish(snapshot(p.counters, p.ports, p.elapsed));
        }
        if !a.quiet {
            eprintln!("{}", sdf_progress_line(&rt, p));
        }
    };
    let engine = EngineConfig {
        after: StopAfter {
            duration,
            frames: None,
        },
        report_every: (!a.quiet || a.metrics.is_some()).then_some(Duration::from_secs(1)),
    };
    let live = SdfLivePorts {
        ifaces: &by_port,
        inputs: &inputs,
        config: &ports_cfg,
    };
    // The readiness line (output, not a log event: scripts wait for it).
    let on_ready = |io: &str| eprintln!("{}", ready_line(&app_label(a), live, io));
    let done =
        run_sdf_live(&rt, live, engine, &stop, on_ready, on_report).map_err(|e| match e {
            SdfLiveError::Ports(e @ PortsError::Xdp { .. }) => {
                anyhow!("{e} (--io auto falls back to AF_PACKET)")
            }
            e => e.into(),
        })?;
    let run = &done.run;
    if a.metrics.is_some() {
        shared.publish(snapshot(&run.counters, &run.ports, run.elapsed));
    }
    let line = done.summary_line();
    let _ = rt.shutdown();
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()?;
    Ok(())
}

/// A per-process hash seed: cache keys are attacker-controlled.
fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

fn summary_json(
    a: &RunArgs,
    out_dir: &std::path::Path,
    run: &SdfPcapRun,
    stats: &SdfStats,
    slices: &[SliceReport],
) -> serde_json::Value {
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
    let slices: Vec<serde_json::Value> = slices.iter().map(SliceReport::json).collect();
    let k = &stats.cache;
    serde_json::json!({
        "app": app_label(a),
        "slices": slices,
        "inputs": inputs,
        "out_dir": out_dir.display().to_string(),
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
            "control_calls": stats.control_calls,
            "data_calls": stats.data_calls,
            "drops": app_drops,
        },
        "unanswered": run.unanswered,
        "stopped_by": run.stopped_by.iter().map(|(p, e)| serde_json::json!({"port": p, "error": e.to_string()})).collect::<Vec<_>>(),
        "seconds": run.elapsed.as_secs_f64(),
    })
}
