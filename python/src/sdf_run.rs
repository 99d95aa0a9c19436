//! `nexthop.sdf.run_pcap` and `run_live`: an app, or one app per slice,
//! through the data plane's SDF pipeline (the runtime of `nexthop sdf
//! run`), offline over pcap files or live over interfaces. A slice runs a
//! Python app object or the built-in Rust l2switch; the summaries are the
//! data plane's (`nexthop_dataplane::sdf::pcap_summary_line`,
//! `SdfLiveRun::summary_line`, `SliceReport::json`), so this package and
//! `nexthop sdf run` print the same lines.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nexthop_dataplane::afpacket::{FanoutMode, RingConfig};
use nexthop_dataplane::engine::{EngineConfig, IoMode, PortsConfig, XdpAttach};
use nexthop_dataplane::live::{StopAfter, StopFlag};
use nexthop_dataplane::metrics::{MetricsConfig, MetricsServer, SharedSnapshot};
use nexthop_dataplane::pcap::{PcapIn, PcapPorts};
use nexthop_dataplane::sdf::{
    forward_pcap_sdf, live_ports, pcap_summary_line, ready_line, run_live as run_sdf_live,
    sdf_progress_line, sdf_snapshot, PcapInput, SdfConfig, SdfCounters, SdfLivePorts, SdfRuntime,
    SdfStats, Sink, SliceReport, Stamp,
};
use nexthop_dataplane::Counters;
use nexthop_sdf::app::{App, L2Config, L2Switch, SliceSpec, Stats};
use nexthop_sdf::PortId;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::{api_err, config, stats_dict, PyApp};

/// A slice as Python gives it: its spec (`NAME:APP:ports=P,..|vlan=V[:share=N]`)
/// and the app object to run in it, or None for the built-in app the spec
/// names.
type PySlice<'py> = (String, Option<Bound<'py, PyAny>>);

/// The built-in apps a slice may name without an app object.
const BUILTIN: &str = "l2switch";

/// The built-in l2switch's settings in slices.
struct L2Settings {
    timeout: f64,
    max_macs: usize,
}

impl L2Settings {
    fn config(&self) -> PyResult<L2Config> {
        if self.max_macs == 0 {
            return Err(PyValueError::new_err("max_macs must be at least 1"));
        }
        Ok(L2Config {
            timeout: Duration::try_from_secs_f64(self.timeout)
                .map_err(|e| PyValueError::new_err(format!("mac_timeout {}: {e}", self.timeout)))?,
            max_macs: self.max_macs,
        })
    }
}

/// The runtime of `app`, or of `slices` (exactly one of the two).
fn start_runtime(
    app: Option<Bound<'_, PyAny>>,
    slices: Option<Vec<PySlice<'_>>>,
    l2: &L2Settings,
    cfg: SdfConfig,
) -> PyResult<SdfRuntime> {
    match (app, slices) {
        (Some(app), None) => {
            let app: Box<dyn App> = Box::new(PyApp::new(app)?);
            SdfRuntime::start(app, cfg).map_err(api_err)
        }
        (None, Some(slices)) => {
            if slices.is_empty() {
                return Err(PyValueError::new_err("slices: give at least one slice"));
            }
            let mut built = Vec::with_capacity(slices.len());
            for (text, obj) in slices {
                let spec: SliceSpec = text.parse().map_err(api_err)?;
                let app: Box<dyn App> = match obj {
                    Some(obj) => {
                        let py = obj.py();
                        // The app's own exception stays what it is; the
                        // binding's refusals name the slice.
                        Box::new(PyApp::new(obj).map_err(|e| {
                            if e.is_instance_of::<PyValueError>(py) {
                                PyValueError::new_err(format!(
                                    "slice {}: {}",
                                    spec.name,
                                    e.value(py)
                                ))
                            } else {
                                e
                            }
                        })?)
                    }
                    None if spec.app == BUILTIN => Box::new(L2Switch::new(l2.config()?)),
                    None => {
                        return Err(PyValueError::new_err(format!(
                            "slice {}: {:?}: no such built-in app (built in: {BUILTIN}; or give \
                             the slice an app object)",
                            spec.name, spec.app
                        )))
                    }
                };
                built.push((spec, app));
            }
            SdfRuntime::start_sliced(built, cfg).map_err(api_err)
        }
        (Some(_), Some(_)) => Err(PyValueError::new_err(
            "give an app or slices, not both (a slice names its own app)",
        )),
        (None, None) => Err(PyValueError::new_err("give an app or slices")),
    }
}

/// The pipeline's queue bounds and pending-miss table (as `nexthop sdf
/// run`'s `--queue`, `--control-queue`, `--control-weight` and
/// `--no-pending-table`); the runtime refuses a bound of 0.
fn queues(
    queue: usize,
    control_queue: usize,
    control_weight: u32,
    pending_table: bool,
) -> SdfConfig {
    SdfConfig {
        queue,
        control_queue,
        control_weight,
        pending_table,
        ..SdfConfig::default()
    }
}

/// Each slice's report as a list of dicts (the JSON summary's `slices`).
fn slices_list<'py>(py: Python<'py>, slices: &[SliceReport]) -> PyResult<Bound<'py, PyList>> {
    let loads = py.import("json")?.getattr("loads")?;
    let list = PyList::empty(py);
    for s in slices {
        list.append(loads.call1((s.json().to_string(),))?)?;
    }
    Ok(list)
}

/// Run `app` (an object with `on_packet`), or one app per slice, over pcap
/// files through the data plane's SDF pipeline (the same as `nexthop sdf
/// run --in-pcap ... --out-dir ...`): each app runs on its own thread
/// behind the pending-miss table, the outputs are `port-N.pcap` and
/// `controller.pcap` in `out_dir`. `slices` (instead of `app`) is a list
/// of `(spec, app)`: `spec` is `NAME:APP:ports=P,..|vlan=V[:share=N]` as
/// for `nexthop sdf run --slice`, `app` the object that runs the slice, or
/// None for the built-in app `APP` names (`l2switch`, with `mac_timeout`
/// seconds and `max_macs` bindings). `queue`, `control_queue` and
/// `control_weight` bound the app's queues and weigh control misses, and
/// `pending_table = False` turns the pending-miss table off, as `nexthop
/// sdf run`'s flags of those names do. Returns the counters, `summary` (the
/// line `nexthop sdf run` prints) and `slices` (each slice's counters).
#[pyfunction]
#[pyo3(signature = (
    app, in_pcaps, out_dir, ports = None, capacity = None, max_masks = None, slices = None,
    mac_timeout = 300.0, max_macs = 65536, queue = 1024, control_queue = 256,
    control_weight = 4, pending_table = true
))]
#[allow(clippy::too_many_arguments)]
pub fn run_pcap<'py>(
    py: Python<'py>,
    app: Option<Bound<'py, PyAny>>,
    in_pcaps: Vec<(PortId, PathBuf)>,
    out_dir: PathBuf,
    ports: Option<Vec<PortId>>,
    capacity: Option<usize>,
    max_masks: Option<usize>,
    slices: Option<Vec<PySlice<'py>>>,
    mac_timeout: f64,
    max_macs: usize,
    queue: usize,
    control_queue: usize,
    control_weight: u32,
    pending_table: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if in_pcaps.is_empty() {
        return Err(PyValueError::new_err(
            "run_pcap needs at least one input pcap",
        ));
    }
    let mut all_ports = ports.unwrap_or_else(|| vec![0, 1, 2, 3]);
    all_ports.extend(in_pcaps.iter().map(|(p, _)| *p));
    all_ports.sort_unstable();
    all_ports.dedup();
    let mut inputs = Vec::with_capacity(in_pcaps.len());
    for (port, path) in &in_pcaps {
        let input = PcapIn::open(path)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
        inputs.push(PcapInput { port: *port, input });
    }
    let header = inputs[0].input.header();
    let cfg = SdfConfig {
        cache: config(capacity, max_masks),
        ports: all_ports,
        ..queues(queue, control_queue, control_weight, pending_table)
    };
    let l2 = L2Settings {
        timeout: mac_timeout,
        max_macs,
    };
    let rt = start_runtime(app, slices, &l2, cfg)?;
    let out = PcapPorts::create(&out_dir, header)
        .map_err(|e| PyOSError::new_err(format!("{}: {e}", out_dir.display())))?;
    // The app threads take the GIL for each decision: release it while
    // the pipeline runs and while the runtime stops.
    let (run, reports, stats) = py.allow_threads(move || {
        let mut stage = rt.stage();
        let run = forward_pcap_sdf(&mut stage, &mut inputs, out, Duration::from_secs(10));
        drop(stage);
        let reports = run
            .as_ref()
            .map(|r| rt.slice_reports(&r.slices))
            .unwrap_or_default();
        (run, reports, rt.shutdown())
    });
    let run = run.map_err(|e| PyOSError::new_err(e.to_string()))?;
    let d = pipeline_dict(py, &stats, &run.counters, &run.sdf)?;
    d.set_item("summary", pcap_summary_line(&run, &stats, &reports))?;
    d.set_item("slices", slices_list(py, &reports)?)?;
    d.set_item("unanswered", run.unanswered)?;
    d.set_item("elapsed_s", run.elapsed.as_secs_f64())?;
    let outputs = PyDict::new(py);
    for o in &run.outputs {
        outputs.set_item(
            o.path.file_name().map(|n| n.to_string_lossy().into_owned()),
            o.frames,
        )?;
    }
    d.set_item("outputs", outputs)?;
    let stopped: Vec<String> = run
        .stopped_by
        .iter()
        .map(|(p, e)| format!("port {p}: {e}"))
        .collect();
    d.set_item("stopped_by", stopped)?;
    Ok(d)
}

/// The counters `run_pcap` and `run_live` both return: the cache's and
/// the app side's (`stats_dict`), the frames', the pipeline's and its
/// drops by reason (`sdf_drops`).
fn pipeline_dict<'py>(
    py: Python<'py>,
    stats: &SdfStats,
    c: &Counters,
    sdf: &SdfCounters,
) -> PyResult<Bound<'py, PyDict>> {
    let d = stats_dict(
        py,
        &Stats {
            cache: stats.cache,
            entries: stats.entries,
            masks: stats.masks,
            state_ids: stats.state_ids,
            app: stats.app,
        },
    )?;
    d.set_item("frames_in", c.frames_in)?;
    d.set_item("forwarded", c.forwarded)?;
    d.set_item("dropped", c.dropped)?;
    d.set_item("punted", c.punted)?;
    d.set_item("hits", sdf.hits)?;
    d.set_item("misses", sdf.misses)?;
    d.set_item("app_requests", sdf.app_requests)?;
    d.set_item("pending_waits", sdf.pending_waits)?;
    d.set_item("control_requests", sdf.control_requests)?;
    d.set_item("control_calls", stats.control_calls)?;
    d.set_item("data_calls", stats.data_calls)?;
    d.set_item("installs", stats.cache.installs)?;
    d.set_item("revocations", stats.cache.revocations)?;
    let sdf_drops = PyDict::new(py);
    for (r, n) in sdf.drops.named() {
        sdf_drops.set_item(r, n)?;
    }
    d.set_item("sdf_drops", sdf_drops)?;
    Ok(d)
}

/// A per-process hash seed: the cache keys of live traffic are chosen by
/// whoever sends it.
fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

fn parse<T: std::str::FromStr>(what: &str, s: &str) -> PyResult<T>
where
    T::Err: std::fmt::Display,
{
    s.parse()
        .map_err(|e| PyValueError::new_err(format!("{what} {s}: {e}")))
}

/// Counts what the pipeline sends; keeps nothing.
struct CountSink {
    frames: u64,
}

impl Sink for CountSink {
    fn emit(&mut self, _ports: &[u16], _controller: bool, _frame: &[u8], _stamp: Stamp) {
        self.frames += 1;
    }
}

/// Flows a worker may have in flight at most in [`run_frames`].
const MAX_IN_FLIGHT: usize = 4096;

/// Run `app` over in-memory `frames` (`(port, bytes)` in arrival order)
/// through the data plane's SDF pipeline as a live worker runs it: groups
/// of up to 32 consecutive frames of one ingress port, without waiting
/// for the app between groups (unlike `run_pcap`, which waits for every
/// decision of a group before the next, so its output is reproducible),
/// at most `in_flight` flows pending (the worker polls for answers while
/// at the bound), then every answer awaited (10 s at most). What is sent
/// is counted, not kept. The miss-path benchmark's driver
/// (`python/examples/sdf_miss_bench.py --pipeline`): returns the counters
/// (as `run_pcap`'s) with `elapsed_s` (wall time from the first group to
/// the last answer), `frames_out` and `unanswered`.
#[pyfunction]
#[pyo3(signature = (
    app, frames, ports = None, capacity = None, max_masks = None, pending_table = true,
    in_flight = 256
))]
#[allow(clippy::too_many_arguments)]
pub fn run_frames<'py>(
    py: Python<'py>,
    app: Bound<'py, PyAny>,
    frames: Vec<(PortId, Bound<'py, PyBytes>)>,
    ports: Option<Vec<PortId>>,
    capacity: Option<usize>,
    max_masks: Option<usize>,
    pending_table: bool,
    in_flight: usize,
) -> PyResult<Bound<'py, PyDict>> {
    if !(1..=MAX_IN_FLIGHT).contains(&in_flight) {
        return Err(PyValueError::new_err(format!(
            "in_flight {in_flight}: expected 1 to {MAX_IN_FLIGHT}"
        )));
    }
    let mut all_ports = ports.unwrap_or_else(|| vec![0, 1, 2, 3]);
    all_ports.extend(frames.iter().map(|(p, _)| *p));
    all_ports.sort_unstable();
    all_ports.dedup();
    let owned: Vec<(PortId, Vec<u8>)> = frames
        .iter()
        .map(|(p, b)| (*p, b.as_bytes().to_vec()))
        .collect();
    let cfg = SdfConfig {
        cache: config(capacity, max_masks),
        ports: all_ports,
        pending_table,
        ..SdfConfig::default()
    };
    let l2 = L2Settings {
        timeout: 300.0,
        max_macs: 65536,
    };
    let rt = start_runtime(Some(app), None, &l2, cfg)?;
    let (counters, sdf, stats, elapsed, sent, unanswered) = py.allow_threads(move || {
        let mut stage = rt.stage();
        let mut sink = CountSink { frames: 0 };
        let mut refs: Vec<&[u8]> = Vec::with_capacity(nexthop_sdf::BATCH);
        let t = Instant::now();
        let mut i = 0;
        while i < owned.len() {
            let port = owned[i].0;
            refs.clear();
            while i < owned.len() && owned[i].0 == port && refs.len() < nexthop_sdf::BATCH {
                refs.push(&owned[i].1);
                i += 1;
            }
            stage.process(port, &refs, &[], &mut sink);
            while stage.pending_flows() >= in_flight {
                stage.poll(&mut sink);
                std::thread::yield_now();
            }
        }
        let unanswered = if stage.flush(&mut sink, Duration::from_secs(10)) {
            0
        } else {
            stage.pending_flows()
        };
        let elapsed = t.elapsed();
        let counters = stage.take_counters();
        let sdf = *stage.sdf_counters();
        drop(stage);
        (
            counters,
            sdf,
            rt.shutdown(),
            elapsed,
            sink.frames,
            unanswered,
        )
    });
    let d = pipeline_dict(py, &stats, &counters, &sdf)?;
    d.set_item("elapsed_s", elapsed.as_secs_f64())?;
    d.set_item("frames_out", sent)?;
    d.set_item("unanswered", unanswered)?;
    Ok(d)
}

/// Run `app`, or one app per slice (`slices`, `mac_timeout`, `max_macs`
/// as for [`run_pcap`]), over live interfaces through the data plane's
/// SDF pipeline (the forwarder engine of `nexthop sdf run --port`, one
/// stage per worker): `ports` maps switch ports to interfaces, `inputs`
/// are the ports received on (default: all). Each app runs on its app
/// thread, which takes the GIL for each decision; the calling thread
/// releases the GIL until the run ends, at `duration` seconds or at
/// SIGINT/SIGTERM (this call installs handlers for both that end the run;
/// restore Python's afterwards, as `python -m nexthop.sdf` does). Prints
/// the readiness line (`nexthop sdf run: forwarding ...`) and, unless
/// `quiet`, a progress line a second on stderr. Returns the counters, the
/// summary line (`summary`) as `nexthop sdf run --port` prints it and
/// each slice's counters (`slices`). With `metrics` (`ADDR:PORT`;
/// loopback unless `metrics_allow_remote`) the run serves its counters,
/// the SDF ones (each slice's too) included, on `http://ADDR/metrics` and
/// `/stats.json` (`nexthop stats --addr ADDR`), refreshed every second,
/// as `nexthop sdf run --metrics` does. `queue`, `control_queue`,
/// `control_weight` and `pending_table` as for [`run_pcap`].
#[pyfunction]
#[pyo3(signature = (
    app, ports, inputs = None, workers = 1, io = "afpacket", fanout = "hash",
    xdp_mode = "auto", xdp_queue = 0, duration = None, quiet = false, capacity = None,
    max_masks = None, label = None, metrics = None, metrics_allow_remote = false,
    slices = None, mac_timeout = 300.0, max_macs = 65536, queue = 1024, control_queue = 256,
    control_weight = 4, pending_table = true
))]
#[allow(clippy::too_many_arguments)]
pub fn run_live<'py>(
    py: Python<'py>,
    app: Option<Bound<'py, PyAny>>,
    ports: Vec<(PortId, String)>,
    inputs: Option<Vec<PortId>>,
    workers: usize,
    io: &str,
    fanout: &str,
    xdp_mode: &str,
    xdp_queue: u32,
    duration: Option<f64>,
    quiet: bool,
    capacity: Option<usize>,
    max_masks: Option<usize>,
    label: Option<String>,
    metrics: Option<&str>,
    metrics_allow_remote: bool,
    slices: Option<Vec<PySlice<'py>>>,
    mac_timeout: f64,
    max_macs: usize,
    queue: usize,
    control_queue: usize,
    control_weight: u32,
    pending_table: bool,
) -> PyResult<Bound<'py, PyDict>> {
    const MAX_WORKERS: usize = 64;
    let metrics: Option<SocketAddr> = metrics.map(|m| parse("--metrics", m)).transpose()?;
    if !(1..=MAX_WORKERS).contains(&workers) {
        return Err(PyValueError::new_err(format!(
            "--workers {workers}: expected 1 to {MAX_WORKERS}"
        )));
    }
    let duration = match duration {
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(PyValueError::new_err(format!(
                "--duration {s}: expected a positive number of seconds"
            )))
        }
        None => None,
    };
    let maps: Vec<(u16, &str)> = ports.iter().map(|(p, i)| (*p, i.as_str())).collect();
    if maps.is_empty() {
        return Err(PyValueError::new_err("run_live needs at least one port"));
    }
    let (by_port, in_ports) =
        live_ports(&maps, inputs.as_deref().unwrap_or_default()).map_err(PyValueError::new_err)?;
    let ports_cfg = PortsConfig {
        workers,
        io: parse::<IoMode>("--io", io)?,
        xdp_attach: parse::<XdpAttach>("--xdp-mode", xdp_mode)?,
        xdp_queue,
        ring: RingConfig::default(),
        fanout: parse::<FanoutMode>("--fanout", fanout)?,
        fanout_group_base: (std::process::id() & 0x7fff) as u16,
    };
    let type_name = app
        .as_ref()
        .and_then(|a| a.get_type().name().ok().map(|n| n.to_string()));
    let mut cache = config(capacity, max_masks);
    cache.seed = rand_seed();
    let cfg = SdfConfig {
        cache,
        ports: by_port.keys().copied().collect(),
        ..queues(queue, control_queue, control_weight, pending_table)
    };
    let l2 = L2Settings {
        timeout: mac_timeout,
        max_macs,
    };
    let stop = StopFlag::install()
        .map_err(|e| PyOSError::new_err(format!("installing signal handlers: {e}")))?;
    let rt = start_runtime(app, slices, &l2, cfg)?;
    // Without a label: the app object's type, or the slices' NAME=APP list.
    let label = label
        .or(type_name)
        .unwrap_or_else(|| rt.app_name().to_string());
    let shared = SharedSnapshot::new();
    let _metrics_server = match metrics {
        Some(addr) => {
            let config = MetricsConfig {
                addr,
                allow_non_loopback: metrics_allow_remote,
                ..MetricsConfig::default()
            };
            Some(
                MetricsServer::start_with(&config, shared.provider()).map_err(|e| {
                    PyOSError::new_err(format!("starting the metrics endpoint on {addr}: {e}"))
                })?,
            )
        }
        None => None,
    };
    let engine = EngineConfig {
        after: StopAfter {
            duration,
            frames: None,
        },
        report_every: (!quiet || metrics.is_some()).then_some(Duration::from_secs(1)),
    };
    // The app threads take the GIL for each decision: release it while
    // the engine runs and while the runtime stops.
    let (done, stats) = py.allow_threads(|| {
        let live = SdfLivePorts {
            ifaces: &by_port,
            inputs: &in_ports,
            config: &ports_cfg,
        };
        let done = run_sdf_live(
            &rt,
            live,
            engine,
            &stop,
            // The readiness line (scripts wait for it).
            |io| eprintln!("{}", ready_line(&label, live, io)),
            |r| {
                let p = &r.merged;
                if metrics.is_some() {
                    shared.publish(sdf_snapshot(&rt, p.counters, p.ports, p.elapsed));
                }
                if !quiet {
                    eprintln!("{}", sdf_progress_line(&rt, p));
                }
            },
        );
        if let (Ok(d), Some(_)) = (&done, metrics) {
            let run = &d.run;
            shared.publish(sdf_snapshot(&rt, &run.counters, &run.ports, run.elapsed));
        }
        (done, rt.shutdown())
    });
    let done = done.map_err(|e| PyOSError::new_err(e.to_string()))?;
    let c = &done.run.counters;
    let d = pipeline_dict(py, &stats, c, &done.sdf)?;
    d.set_item("summary", done.summary_line())?;
    d.set_item("slices", slices_list(py, &done.slices)?)?;
    let out = PyDict::new(py);
    for (p, pc) in c.tx_ports() {
        out.set_item(p, pc.frames)?;
    }
    d.set_item("out", out)?;
    d.set_item("io", &done.io)?;
    d.set_item("elapsed_s", done.run.elapsed.as_secs_f64())?;
    Ok(d)
}
