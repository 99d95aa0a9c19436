//! The live lab: namespaces joined by veth pairs, the controller, the
//! forwarder (`nexthop run`) as a child process, a source and four sinks.

use crate::textio::say;
use std::fs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nexthop_control::{Controller, ControllerConfig};
use nexthop_dataplane::affinity;
use nexthop_dataplane::afpacket::TxPort;
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::metrics::{fetch_snapshot, MetricsSnapshot};
use nexthop_dataplane::netns::{self, Namespaces};
use nexthop_othello::fib::NameKey;

use super::cpu::{cpu_plan, update_path_cores, CpuSplit};
use super::frame::{
    parse_frame, ports_of, write_frame, FRAME_LEN, PHASE_FINAL, PHASE_TRAFFIC, PORTS, PUNT,
};
use super::phases::{self, has_changes, on_time, Phase};
use super::plan::{prepare, save_final_fib, Plan, Prepared, Walk};
use super::sink::{read_sink, wait_ready};
use super::summary::{
    FibPart, FinalWavePart, ForwarderPart, PropagationPart, SourcePart, Summary, UpdatesPart,
};
use super::{step, LabOpts};
use crate::threadcpu;

/// The namespaces and links of the lab: `src` -- `fwd` -- four sinks.
pub(crate) struct Topology {
    /// Removes the namespaces (and so the links) on drop.
    _ns: Namespaces,
    src: String,
    fwd: String,
    sinks: Vec<String>,
}

impl Topology {
    pub(crate) fn create() -> Result<Topology> {
        let tag = format!("nhlab{}", std::process::id());
        let mut ns = Namespaces::new();
        let src = format!("{tag}-src");
        let fwd = format!("{tag}-fwd");
        let sinks: Vec<String> = PORTS.iter().map(|p| format!("{tag}-s{p}")).collect();
        remove_stale_labs();
        ns.create(&src)?;
        ns.create(&fwd)?;
        for s in &sinks {
            ns.create(s)?;
        }
        ns.veth(&src, "src0", &fwd, "in0", None)?;
        for (p, s) in PORTS.iter().zip(&sinks) {
            ns.veth(&fwd, &format!("out{p}"), s, &format!("sink{p}"), None)?;
        }
        Ok(Topology {
            _ns: ns,
            src,
            fwd,
            sinks,
        })
    }
}

/// Remove the namespaces of lab runs whose process is gone (a run killed
/// with SIGKILL cannot clean up after itself).
fn remove_stale_labs() {
    let Ok(dir) = fs::read_dir("/var/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix("nhlab") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.parse::<u32>().is_ok() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = netns::ip(&["netns", "del", &name]);
        }
    }
}

/// A child process killed (SIGKILL) and reaped on drop unless it exited.
pub(crate) struct ChildGuard(pub(crate) Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl ChildGuard {
    /// Wait until the stderr (the file `err`) of `nexthop run` or
    /// `nexthop cluster run` says it is forwarding; an error with that stderr if the process exits first,
    /// 60 s pass or `stop` is raised. `what` names it in the error.
    pub(crate) fn wait_forwarding(
        &mut self,
        err: &Path,
        what: &str,
        stop: &StopFlag,
    ) -> Result<()> {
        let ready = Instant::now();
        loop {
            let text = fs::read_to_string(err).unwrap_or_default();
            if text.contains("run: forwarding") {
                return Ok(());
            }
            if let Some(c) = self.0.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    bail!("{what} exited ({st}) before forwarding:\n{text}");
                }
            }
            if ready.elapsed() > Duration::from_secs(60) || stop.is_raised() {
                bail!("{what} did not start within 60 s:\n{text}");
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What one sink saw. Each sink's stats have a cache line of their own
/// (the sinks run on different cores, and the summary thread reads them),
/// and a sink adds to them once per ring block, not per frame.
#[derive(Default)]
#[repr(align(64))]
struct SinkStats {
    /// Lab frames received in the traffic phase.
    traffic: AtomicU64,
    /// Lab frames received in the final wave.
    final_frames: AtomicU64,
    /// Frames on a port none of the name's actions sends to, or whose
    /// destination is not the name of their index.
    misforwarded: AtomicU64,
    /// Other frames on the link (ignored).
    foreign: AtomicU64,
    /// Frames the sink's ring dropped.
    ring_drops: AtomicU64,
}

// Five counters fit one 64-byte line; neighbours in the `Vec` never share it.
const _: () = assert!(std::mem::size_of::<SinkStats>() == 64);

/// One ring block's worth of [`SinkStats`], counted in the sink's locals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SinkCounts {
    traffic: u64,
    final_frames: u64,
    misforwarded: u64,
    foreign: u64,
}

impl SinkStats {
    /// Add a block's counts (one relaxed add per nonzero counter).
    fn add(&self, c: &SinkCounts) {
        for (total, n) in [
            (&self.traffic, c.traffic),
            (&self.final_frames, c.final_frames),
            (&self.misforwarded, c.misforwarded),
            (&self.foreign, c.foreign),
        ] {
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

struct Shared {
    plan: Plan,
    sinks: Vec<SinkStats>,
    /// Per traffic name: the ports its final-wave frame arrived on.
    final_seen: Vec<AtomicU8>,
    examples: Mutex<Vec<String>>,
    stop_sinks: AtomicBool,
    /// Sinks whose rings are open.
    sinks_ready: AtomicUsize,
    stop_source: AtomicBool,
    /// The trivial pipeline sends everything to port 1: count, not check.
    trivial: bool,
    sent: AtomicU64,
    send_failed: AtomicU64,
}

impl Shared {
    fn example(&self, msg: String) {
        let mut v = self.examples.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < 5 {
            v.push(msg);
        }
    }
}

fn sink_loop(sh: &Shared, ns: &str, port: u16) -> Result<()> {
    let st = &sh.sinks[usize::from(port) - 1];
    let bit = 1u8 << port;
    let drops = read_sink(
        ns,
        &format!("sink{port}"),
        32,
        &sh.stop_sinks,
        &sh.sinks_ready,
        |frames| {
            let mut c = SinkCounts::default();
            for f in frames {
                let Some(lf) = parse_frame(f) else {
                    c.foreign += 1;
                    continue;
                };
                let i = lf.idx as usize;
                let name_ok = sh.plan.names.get(i) == Some(&lf.dst);
                match lf.phase {
                    PHASE_TRAFFIC => {
                        c.traffic += 1;
                        if !sh.trivial && (!name_ok || sh.plan.allowed[i] & bit == 0) {
                            c.misforwarded += 1;
                            sh.example(format!(
                                "{} (name #{i}) on port {port}; its actions send to {}",
                                lf.dst.fmt_name(),
                                ports_of(sh.plan.allowed.get(i).copied().unwrap_or(0))
                            ));
                        }
                    }
                    PHASE_FINAL if name_ok => {
                        c.final_frames += 1;
                        sh.final_seen[i].fetch_or(bit, Ordering::Relaxed);
                    }
                    _ => {
                        c.misforwarded += 1;
                    }
                }
            }
            st.add(&c);
        },
    )?;
    st.ring_drops.store(drops, Ordering::Relaxed);
    Ok(())
}

/// The progress line of a finished phase `k`.
fn phase_line(k: usize, p: &Phase) -> String {
    format!(
        "phase {k:<3} {} changes ({} applied): forwarded {:.3} Mpps ({} per worker CPU-second); cores: workers {:.2}, source {:.2}, update path {:.2}",
        if p.changes { "with   " } else { "without" },
        p.applied,
        p.mpps().unwrap_or(0.0),
        p.per_worker_cpu()
            .map_or("?".to_string(), |m| format!("{m:.3} Mpps")),
        p.worker_cores,
        p.source_cores,
        p.update_cores
    )
}

/// Send frames to the plan's names until told to stop (`count` None) or
/// `count` frames were sent; at most `rate` frames/s when `rate > 0`.
fn source_loop(
    sh: &Shared,
    ns: &str,
    phase: u8,
    count: Option<u64>,
    rate: f64,
    seed: u64,
) -> Result<()> {
    netns::enter(ns)?;
    let mut tx = TxPort::open("src0")?;
    const BURST: usize = 256;
    let mut bufs = vec![[0u8; FRAME_LEN]; BURST];
    let mut walk = Walk::new(sh.plan.names.len(), seed);
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut seq = 0u32;
    loop {
        if sh.stop_source.load(Ordering::Relaxed) {
            break;
        }
        let want = match count {
            Some(c) if sent >= c => break,
            Some(c) => (c - sent).min(BURST as u64) as usize,
            None => BURST,
        };
        if rate > 0.0 {
            let due = t0.elapsed().as_secs_f64() * rate;
            if (sent as f64) >= due {
                thread::sleep(Duration::from_micros(200));
                continue;
            }
        }
        for b in bufs.iter_mut().take(want) {
            let i = walk.next_index();
            write_frame(b, &sh.plan.names[i as usize], phase, i, seq);
            seq = seq.wrapping_add(1);
        }
        let out = tx.send_batch(&bufs[..want]);
        sent += out.sent as u64;
        sh.sent.fetch_add(out.sent as u64, Ordering::Relaxed);
        if out.failed > 0 {
            sh.send_failed
                .fetch_add(out.failed as u64, Ordering::Relaxed);
            // A full driver queue: let the other side drain it.
            thread::yield_now();
        }
    }
    Ok(())
}

/// Seconds of the forwarder's uptime between the first snapshot read after
/// its input went quiet and a snapshot trusted to count every frame: it
/// publishes once a second what its workers last reported, and they report
/// once a second, so a count can lag by up to two seconds.
const SETTLE_SECS: f64 = 2.0;

/// Decides when the forwarder's published counters have caught up with
/// frames that arrived before the first snapshot fed in.
#[derive(Debug, Default)]
struct Settle {
    first_uptime: Option<f64>,
    prev: Option<MetricsSnapshot>,
}

impl Settle {
    /// Feed the next fetched snapshot; returns it once it is a publication
    /// at least [`SETTLE_SECS`] after the first one fed and its frame and
    /// ring-drop counts equal the previous publication's.
    fn feed(&mut self, m: MetricsSnapshot) -> Option<MetricsSnapshot> {
        let first = *self.first_uptime.get_or_insert(m.uptime_seconds);
        let Some(prev) = self.prev.as_ref() else {
            self.prev = Some(m);
            return None;
        };
        if m.uptime_seconds <= prev.uptime_seconds {
            return None; // the same publication again
        }
        let drops = |s: &MetricsSnapshot| s.ring_drops.iter().map(|p| p.count).sum::<u64>();
        let quiet = m.frames_in == prev.frames_in && drops(&m) == drops(prev);
        if quiet && m.uptime_seconds >= first + SETTLE_SECS {
            return Some(m);
        }
        self.prev = Some(m);
        None
    }
}

/// The forwarder's metrics once they count every frame that arrived
/// before this call (see [`Settle`]); `None` when the endpoint does not
/// answer or the counts keep moving for 10 s.
pub(crate) fn settled_metrics(ns: &str, addr: &str) -> Option<MetricsSnapshot> {
    let mut settle = Settle::default();
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if let Some(m) = settle.feed(fwd_metrics(ns, addr).ok()?) {
            return Some(m);
        }
        thread::sleep(Duration::from_millis(200));
    }
    None
}

/// Fetch the forwarder's metrics from inside its namespace.
pub(crate) fn fwd_metrics(ns: &str, addr: &str) -> Result<MetricsSnapshot> {
    let (ns, addr) = (ns.to_string(), addr.to_string());
    thread::spawn(move || -> Result<MetricsSnapshot> {
        netns::enter(&ns)?;
        Ok(fetch_snapshot(&addr, Duration::from_secs(2))?)
    })
    .join()
    .map_err(|_| anyhow!("metrics thread panicked"))?
}

/// The `key=value` fields of a summary line.
pub(crate) fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// Where a `--alternate` phase began: the time, the frames delivered,
/// the threads' CPU and the changes applied by then.
struct PhaseStart {
    at: Instant,
    delivered: u64,
    cpu: threadcpu::Sample,
    applied: usize,
}

pub(crate) fn run(o: &LabOpts, topo: Topology, stop: &StopFlag) -> Result<()> {
    let t = Instant::now();
    let n_changes = (o.update_rate * on_time(o.duration, o.alternate)).ceil() as usize;
    say!(
        "nexthop lab: {} MAC names over ports 1-4, {:.0} s of traffic at {}, {} live changes ({:.0}/s{}), seed {}",
        o.names,
        o.duration,
        if o.rate > 0.0 { format!("{:.0} frames/s", o.rate) } else { "the highest rate".into() },
        n_changes,
        o.update_rate,
        if o.alternate > 0.0 {
            format!(" in every second phase of {:.1} s, starting without", o.alternate)
        } else {
            String::new()
        },
        o.seed
    );
    say!(
        "nexthop lab: topology {} --src0/in0-- {} (nexthop run) --out1..4/sink1..4-- {} .. {}",
        topo.src,
        topo.fwd,
        topo.sinks[0],
        topo.sinks[3]
    );

    let Prepared {
        plan,
        fib,
        fib_bytes,
        bits,
        key,
        key_path,
        generation: initial_generation,
    } = prepare(o, n_changes, t)?;

    // Threads to CPUs: this thread first, so the controller, source and
    // sink threads it starts inherit the set.
    let allowed = affinity::allowed_cpus().context("reading this process's CPUs")?;
    let pinned = match cpu_plan(&allowed, o.workers, o.pin) {
        Ok((workers, rest)) => {
            affinity::pin_current_thread(&rest).context("pinning the lab's threads")?;
            step(
                "cpus",
                t,
                format_args!(
                    "forwarder worker{} on CPU {}, everything else (source, sinks, controller, the forwarder's follower) on {}",
                    if o.workers == 1 { "" } else { "s" },
                    affinity::format_cpu_list(&workers),
                    affinity::format_cpu_list(&rest)
                ),
            );
            Some((workers, rest))
        }
        Err(why) => {
            step("cpus", t, format_args!("threads not pinned ({why})"));
            None
        }
    };

    // The controller, in the forwarder's namespace (its loopback).
    let fwd_ns = topo.fwd.clone();
    let changes_per_delta = o.changes_per_delta;
    let controller = thread::spawn(move || -> Result<Controller<[u8; 6]>> {
        netns::enter(&fwd_ns)?;
        let cfg = ControllerConfig {
            log: false,
            changes_per_delta,
            ..ControllerConfig::default()
        };
        Ok(Controller::start(fib, key, cfg)?)
    })
    .join()
    .map_err(|_| anyhow!("controller thread panicked"))??;
    let ctl_addr: SocketAddr = controller.local_addr();
    step(
        "controller",
        t,
        format_args!("listening on {ctl_addr} in {}", topo.fwd),
    );

    // The forwarder.
    let exe = std::env::current_exe().context("locating the nexthop binary")?;
    let metrics_addr = "127.0.0.1:9464";
    let (fwd_out, fwd_err) = (o.out.join("forwarder.out"), o.out.join("forwarder.err"));
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &topo.fwd]).arg(&exe).arg("run");
    if o.trivial {
        cmd.args(["--trivial-port", "1"]);
    } else {
        cmd.args(["--controller", &ctl_addr.to_string(), "--key-file"])
            .arg(&key_path);
    }
    if let Some((workers, rest)) = &pinned {
        cmd.args(["--worker-cpus", &affinity::format_cpu_list(workers)])
            .args(["--control-cpus", &affinity::format_cpu_list(rest)]);
    }
    cmd.args(["--port", "0=in0", "--metrics", metrics_addr, "--quiet"])
        .args(["--workers", &o.workers.to_string(), "--fanout", "lb"])
        .args(["--io", o.io.arg()]);
    for p in PORTS {
        cmd.args(["--port", &format!("{p}=out{p}")]);
    }
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&fwd_out)?)
        .stderr(fs::File::create(&fwd_err)?);
    // A child inherits this thread's CPUs: start the forwarder with all of
    // them (it pins its own threads), then go back to the others.
    if pinned.is_some() {
        affinity::pin_current_thread(&allowed).context("unpinning to start the forwarder")?;
    }
    let spawned = cmd.spawn().context("starting the forwarder");
    if let Some((_, rest)) = &pinned {
        affinity::pin_current_thread(rest).context("pinning the lab's threads")?;
    }
    let mut fwd = ChildGuard(Some(spawned?));
    fwd.wait_forwarding(&fwd_err, "the forwarder", stop)?;
    // The port I/O the forwarder reports ("io=in0:afpacket,..."), which
    // with `--io auto` says where AF_XDP bound.
    let io_used = fs::read_to_string(&fwd_err)
        .unwrap_or_default()
        .split_whitespace()
        .find(|w| w.starts_with("io="))
        .unwrap_or("io=?")
        .to_string();
    step(
        "forwarder",
        t,
        format_args!(
            "nexthop run in {} has the controller's snapshot ({} B of arrays, {bits:.2} bits/name), {io_used}; log {}",
            topo.fwd,
            fib_bytes,
            fwd_err.display()
        ),
    );

    let sh = Arc::new(Shared {
        final_seen: (0..plan.names.len()).map(|_| AtomicU8::new(0)).collect(),
        plan,
        sinks: PORTS.iter().map(|_| SinkStats::default()).collect(),
        examples: Mutex::new(Vec::new()),
        stop_sinks: AtomicBool::new(false),
        sinks_ready: AtomicUsize::new(0),
        stop_source: AtomicBool::new(false),
        trivial: o.trivial,
        sent: AtomicU64::new(0),
        send_failed: AtomicU64::new(0),
    });
    // Named threads, so per-thread CPU (scripts/lab-threads.sh) reads.
    let sinks: Vec<JoinHandle<Result<()>>> = PORTS
        .iter()
        .zip(&topo.sinks)
        .map(|(&p, ns)| {
            let (sh, ns) = (sh.clone(), ns.clone());
            thread::Builder::new()
                .name(format!("lab-sink-{p}"))
                .spawn(move || sink_loop(&sh, &ns, p))
        })
        .collect::<std::io::Result<_>>()
        .context("starting the sink threads")?;
    // Let the sinks open their rings before traffic starts.
    wait_ready(&sh.sinks_ready, PORTS.len());
    let m0 = fwd_metrics(&topo.fwd, metrics_addr).ok();

    // Traffic with live changes.
    let source = {
        let (sh, ns, rate, seed) = (sh.clone(), topo.src.clone(), o.rate, o.seed);
        thread::Builder::new()
            .name("lab-source".into())
            .spawn(move || source_loop(&sh, &ns, PHASE_TRAFFIC, None, rate, seed))
            .context("starting the source thread")?
    };
    let traffic_start = Instant::now();
    // Per-thread CPU of the lab and the forwarder over the traffic phase.
    let pids = [
        std::process::id() as i32,
        fwd.0.as_ref().map_or(-1, |c| c.id() as i32),
    ];
    let cpu0 = threadcpu::sample(&pids);
    let run_for = Duration::from_secs_f64(o.duration);
    // With --alternate: where the running phase began, and the phases done.
    let mut phase_start = PhaseStart {
        at: traffic_start,
        delivered: 0,
        cpu: cpu0.clone(),
        applied: 0,
    };
    let mut phases: Vec<Phase> = Vec::new();
    let mut applied = 0usize;
    let mut apply_secs = 0.0f64;
    let mut next_report = traffic_start + Duration::from_secs(1);
    let mut last = (traffic_start, 0u64, 0u64, 0usize);
    let sink_total = |sh: &Shared| -> u64 {
        sh.sinks
            .iter()
            .map(|s| s.traffic.load(Ordering::Relaxed))
            .sum()
    };
    let misforwarded = |sh: &Shared| -> u64 {
        sh.sinks
            .iter()
            .map(|s| s.misforwarded.load(Ordering::Relaxed))
            .sum()
    };
    let close_phase = |start: &PhaseStart, k: usize, applied: usize| -> Phase {
        let cpu = threadcpu::between(&start.cpu, &threadcpu::sample(&pids));
        Phase {
            changes: has_changes(k),
            secs: start.at.elapsed().as_secs_f64(),
            delivered: sink_total(&sh) - start.delivered,
            applied: applied - start.applied,
            worker_cores: threadcpu::sum_prefix(&cpu, pids[1], "worker-"),
            source_cores: threadcpu::sum_prefix(&cpu, pids[0], "lab-source"),
            update_cores: update_path_cores(&cpu, pids),
        }
    };
    while traffic_start.elapsed() < run_for && !stop.is_raised() {
        let elapsed = traffic_start.elapsed().as_secs_f64();
        // With phases, only what falls due within the running phase: the
        // changes of a phase are applied and counted in that phase.
        let until = if o.alternate > 0.0 {
            elapsed.min((phases.len() + 1) as f64 * o.alternate)
        } else {
            elapsed
        };
        let due =
            ((on_time(until, o.alternate) * o.update_rate) as usize).min(sh.plan.changes.len());
        if due > applied {
            let ta = Instant::now();
            controller
                .apply_changes(&sh.plan.changes[applied..due])
                .map_err(|e| anyhow!("applying changes {}..{due}: {e}", applied + 1))?;
            apply_secs += ta.elapsed().as_secs_f64();
            applied = due;
        }
        let now = Instant::now();
        if now >= next_report {
            let (sent, recv) = (sh.sent.load(Ordering::Relaxed), sink_total(&sh));
            let dt = (now - last.0).as_secs_f64();
            say!(
                "[{:6.1}s] traffic    sent {:.3} Mpps, sinks {:.3} Mpps, misforwarded {}, changes applied {} ({:.0}/s)",
                t.elapsed().as_secs_f64(),
                (sent - last.1) as f64 / dt / 1e6,
                (recv - last.2) as f64 / dt / 1e6,
                misforwarded(&sh),
                applied,
                (applied - last.3) as f64 / dt
            );
            last = (now, sent, recv, applied);
            next_report += Duration::from_secs(1);
        }
        if o.alternate > 0.0 {
            let k = phases.len();
            if elapsed >= (k + 1) as f64 * o.alternate {
                let p = close_phase(&phase_start, k, applied);
                say!("[{:6.1}s] {}", t.elapsed().as_secs_f64(), phase_line(k, &p));
                phases.push(p);
                phase_start = PhaseStart {
                    at: Instant::now(),
                    delivered: sink_total(&sh),
                    cpu: threadcpu::sample(&pids),
                    applied,
                };
            }
        }
        thread::sleep(Duration::from_millis(2));
    }
    let traffic_secs = traffic_start.elapsed().as_secs_f64();
    if o.alternate > 0.0 {
        // The last phase, cut by the end of the traffic: printed like the
        // others (the summary leaves it out when it is short).
        let k = phases.len();
        let p = close_phase(&phase_start, k, applied);
        say!("[{:6.1}s] {}", t.elapsed().as_secs_f64(), phase_line(k, &p));
        phases.push(p);
    }
    let cpu = threadcpu::between(&cpu0, &threadcpu::sample(&pids));
    sh.stop_source.store(true, Ordering::Release);
    // The changes the clock had not reached yet, so the FIB ends in the
    // plan's final state.
    if applied < sh.plan.changes.len() && !stop.is_raised() {
        controller
            .apply_changes(&sh.plan.changes[applied..])
            .map_err(|e| anyhow!("applying changes {}..: {e}", applied + 1))?;
        applied = sh.plan.changes.len();
    }
    source
        .join()
        .map_err(|_| anyhow!("source thread panicked"))??;
    sh.stop_source.store(false, Ordering::Release);
    let sent_traffic = sh.sent.load(Ordering::Relaxed);
    let failed_traffic = sh.send_failed.load(Ordering::Relaxed);
    // Counters that include every traffic frame (the wave starts from them).
    let m1 = settled_metrics(&topo.fwd, metrics_addr);
    if stop.is_raised() {
        bail!("interrupted; namespaces and processes removed");
    }

    // Convergence: every delta the controller sent is acknowledged.
    let conv = Instant::now();
    let converged = loop {
        let s = controller.stats();
        // Every change sent (writers send from their own queues) and
        // every frame acknowledged (an Ack covers all frames before it).
        if o.trivial
            || (s.changes_sent >= controller.version()
                && s.acked >= s.snapshots_sent + s.deltas_sent)
        {
            break true;
        }
        if conv.elapsed() > Duration::from_secs(10) {
            break false;
        }
        thread::sleep(Duration::from_millis(5));
    };
    let cs = controller.stats();
    let prop = controller.propagation();
    step(
        "converged",
        t,
        format_args!(
            "{} changes in {} deltas, all acknowledged by the forwarder: {}",
            applied,
            cs.deltas_sent,
            if converged { "yes" } else { "NO (10 s)" }
        ),
    );

    // Final wave: one frame per sampled name, checked exactly.
    let wave = if o.trivial {
        0
    } else {
        o.final_names.min(sh.plan.names.len())
    };
    let wave_rate = if o.rate > 0.0 {
        o.rate.min(200e3)
    } else {
        200e3
    };
    // The forwarder's counters before and after the wave, each settled
    // (see `Settle`), so the difference is exactly the wave's frames.
    let mut wave_fwd: Option<(u64, u64)> = None;
    if wave > 0 {
        let w0 = m1.clone();
        let (sh2, ns, seed) = (sh.clone(), topo.src.clone(), o.seed ^ 0xF1);
        thread::spawn(move || {
            source_loop(&sh2, &ns, PHASE_FINAL, Some(wave as u64), wave_rate, seed)
        })
        .join()
        .map_err(|_| anyhow!("source thread panicked"))??;
        let w1 = settled_metrics(&topo.fwd, metrics_addr);
        if let (Some(a), Some(b)) = (w0, w1) {
            let drops = |m: &MetricsSnapshot| m.ring_drops.iter().map(|p| p.count).sum::<u64>();
            wave_fwd = Some((
                b.frames_in.saturating_sub(a.frames_in),
                drops(&b).saturating_sub(drops(&a)),
            ));
        }
    }
    sh.stop_sinks.store(true, Ordering::Release);
    for s in sinks {
        s.join().map_err(|_| anyhow!("sink thread panicked"))??;
    }
    // Which names the wave sent: the same walk, replayed.
    let mut walk = Walk::new(sh.plan.names.len(), o.seed ^ 0xF1);
    let (mut exact, mut wrong, mut missing) = (0usize, 0usize, 0usize);
    let mut seen_wave = vec![false; sh.plan.names.len()];
    for _ in 0..wave {
        seen_wave[walk.next_index() as usize] = true;
    }
    for (i, sent) in seen_wave.iter().enumerate() {
        if !sent {
            continue;
        }
        let got = sh.final_seen[i].load(Ordering::Relaxed);
        // Punts reach no sink (the forwarder counts them).
        let want = sh.plan.final_mask[i] & !PUNT;
        if got == want {
            exact += 1;
        } else if got & !want != 0 {
            wrong += 1;
            sh.example(format!(
                "final wave: {} (name #{i}) arrived on {}, its final action sends to {}",
                sh.plan.names[i].fmt_name(),
                ports_of(got),
                ports_of(want)
            ));
        } else {
            missing += 1;
            if missing <= 2 {
                sh.example(format!(
                    "final wave: {} (name #{i}) arrived on {}, its final action sends to {} (lost)",
                    sh.plan.names[i].fmt_name(),
                    ports_of(got),
                    ports_of(want)
                ));
            }
        }
    }

    // Stop the forwarder (SIGTERM) and read its summary line.
    let mut summary = String::new();
    if let Some(mut c) = fwd.0.take() {
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        summary = fs::read_to_string(&fwd_out).unwrap_or_default();
    }
    controller.shutdown();
    // The FIB directory ends holding the controller's final FIB.
    let final_generation = save_final_fib(&o.out, &sh.plan, applied)?;

    // Summary: the text below and summary.json carry the same figures.
    let mis = misforwarded(&sh);
    let recv_traffic = sink_total(&sh);
    let ports: std::collections::BTreeMap<u16, u64> = PORTS
        .iter()
        .zip(&sh.sinks)
        .map(|(p, s)| (*p, s.traffic.load(Ordering::Relaxed)))
        .collect();
    let per_port: Vec<String> = ports.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    let sink_drops: u64 = sh
        .sinks
        .iter()
        .map(|s| s.ring_drops.load(Ordering::Relaxed))
        .sum();
    let fwd_rate = match (&m0, &m1) {
        (Some(a), Some(b)) if b.uptime_seconds > a.uptime_seconds => {
            let frames = b.frames_in.saturating_sub(a.frames_in);
            Some((frames, frames as f64 / traffic_secs / 1e6))
        }
        _ => None,
    };
    let line = summary.lines().last().unwrap_or("").to_string();
    let num = |key: &str| field(&line, key).and_then(|v| v.parse::<u64>().ok());
    let split = CpuSplit::new(&cpu, pids);
    // The workers' own rate: frames per second of worker CPU time (the
    // `cpu` line's workers), which stays the worker cores' rate when the
    // source, not the workers, limits the run.
    let per_worker_cpu = fwd_rate
        .filter(|_| split.workers > 0.05)
        .map(|(_, mpps)| mpps / split.workers);
    let change_secs = on_time(traffic_secs, o.alternate);
    let ok = mis == 0 && wrong == 0 && converged;
    let report = Summary {
        variant: "live",
        ok,
        seconds: t.elapsed().as_secs_f64(),
        seed: o.seed,
        fib: FibPart {
            names: sh.plan.names.len(),
            added: sh.plan.counts[0],
            deleted: sh.plan.counts[1],
            data_plane_bytes: fib_bytes,
            bits_per_name: bits,
            dir: o.out.join("fib").display().to_string(),
            initial_generation,
            final_generation: Some(final_generation),
        },
        source: Some(SourcePart {
            frames: sent_traffic,
            frame_bytes: FRAME_LEN,
            seconds: traffic_secs,
            offered_mpps: sent_traffic as f64 / traffic_secs / 1e6,
            refused: failed_traffic,
        }),
        forwarder: ForwarderPart {
            workers: o.workers,
            traffic_frames_in: fwd_rate.map(|(f, _)| f),
            traffic_mpps: fwd_rate.map(|(_, m)| m),
            traffic_mpps_per_worker_cpu: per_worker_cpu,
            frames_in: num("frames_in"),
            run_seconds: field(&line, "seconds").and_then(|v| v.parse().ok()),
            run_mpps: field(&line, "mpps").and_then(|v| v.parse().ok()),
            forwarded: num("forwarded"),
            dropped: num("dropped"),
            punted: num("punted"),
            ring_drops: num("ring_drops"),
            fib_deltas: num("fib_deltas"),
            fib_rejects: num("fib_rejects"),
            pipeline_mpps: None,
        },
        ports,
        delivered: recv_traffic,
        sink_ring_drops: Some(sink_drops),
        misforwarded: (!o.trivial).then_some(mis),
        updates: UpdatesPart {
            changes: applied,
            seconds: change_secs,
            per_second: applied as f64 / change_secs.max(1e-9),
            apply_us_each: Some(apply_secs * 1e6 / applied.max(1) as f64),
            deltas: Some(cs.deltas_sent),
        },
        propagation: (prop.samples > 0).then_some(PropagationPart {
            median_us: prop.median.as_secs_f64() * 1e6,
            p99_us: prop.p99.as_secs_f64() * 1e6,
            max_us: prop.max.as_secs_f64() * 1e6,
            samples: prop.samples,
        }),
        converged: Some(converged),
        cpu: Some(split.clone()),
        phases: (o.alternate > 0.0).then(|| phases::summary_numbers(&phases, o.alternate)),
        final_wave: (wave > 0).then(|| FinalWavePart {
            names: wave,
            rate: wave_rate,
            exact,
            wrong,
            lost: missing,
            forwarder_received: wave_fwd.map(|(f, _)| f),
            forwarder_ring_drops: wave_fwd.map(|(_, d)| d),
        }),
    };
    report.write(&o.out, o.json)?;
    say!();
    say!(
        "summary ({:.1} s in all; files in {}, figures also in summary.json)",
        t.elapsed().as_secs_f64(),
        o.out.display()
    );
    say!(
        "  fib           {} names (+{} added, -{} deleted live), {} B of data-plane arrays, {bits:.2} bits/name; \
         {} holds the final FIB (generation {final_generation}; generation {initial_generation} before the live changes)",
        sh.plan.names.len(),
        sh.plan.counts[0],
        sh.plan.counts[1],
        fib_bytes,
        o.out.join("fib").display()
    );
    say!(
        "  source        {sent_traffic} frames of {FRAME_LEN} B in {traffic_secs:.2} s: {:.3} Mpps offered ({failed_traffic} refused by the kernel)",
        sent_traffic as f64 / traffic_secs / 1e6
    );
    match fwd_rate {
        Some((frames, mpps)) => say!(
            "  forwarder     {frames} frames in during the traffic: {mpps:.3} Mpps ({} worker{}; {} per worker CPU-second); ring drops {}",
            o.workers,
            if o.workers == 1 { "" } else { "s" },
            per_worker_cpu.map_or("? Mpps".to_string(), |m| format!("{m:.3} Mpps")),
            field(&line, "ring_drops").unwrap_or("?")
        ),
        None => say!("  forwarder     (metrics endpoint not reachable)"),
    }
    say!(
        "  forwarder     in={} out={} drops={} punted={}; over its whole run of {} s (idle time included) {} Mpps, the mpps of {}",
        field(&line, "in").unwrap_or("?"),
        field(&line, "out").unwrap_or("?"),
        field(&line, "drops").unwrap_or("?"),
        field(&line, "punted").unwrap_or("?"),
        field(&line, "seconds").unwrap_or("?"),
        field(&line, "mpps").unwrap_or("?"),
        fwd_out.display()
    );
    say!(
        "  sinks         {recv_traffic} frames ({}); sink ring drops {sink_drops}",
        per_port.join(" ")
    );
    if o.trivial {
        say!("  misforwarded  not checked: --trivial sends every frame to port 1 without a lookup");
    } else {
        say!("  misforwarded  {mis}");
    }
    say!(
        "  updates       {applied} change{} in {change_secs:.2} s{}: {:.0} updates/s applied by the controller ({:.0} us each), {} delta{} pushed; forwarder fib_deltas={} fib_rejects={}",
        if applied == 1 { "" } else { "s" },
        if o.alternate > 0.0 { " of phases with changes" } else { "" },
        applied as f64 / change_secs.max(1e-9),
        apply_secs * 1e6 / applied.max(1) as f64,
        cs.deltas_sent,
        if cs.deltas_sent == 1 { "" } else { "s" },
        field(&line, "fib_deltas").unwrap_or("?"),
        field(&line, "fib_rejects").unwrap_or("?")
    );
    if prop.samples > 0 {
        say!(
            "  propagation   controller change -> forwarder Ack (applied): median {:.0} us, p99 {:.0} us, max {:.0} us over {} changes",
            prop.median.as_secs_f64() * 1e6,
            prop.p99.as_secs_f64() * 1e6,
            prop.max.as_secs_f64() * 1e6,
            prop.samples
        );
    }
    say!("  cpu           {}", split.line());
    if o.alternate > 0.0 {
        for l in phases::summary(&phases, o.alternate) {
            say!("  phases        {l}");
        }
    }
    if wave > 0 {
        say!(
            "  final wave    {wave} names, one frame each at {:.0} k frames/s: {exact} exactly on their final ports, {wrong} on a wrong port, {missing} lost",
            wave_rate / 1e3
        );
        match wave_fwd {
            Some((frames, drops)) => say!(
                "  final wave    the forwarder received {frames} frames during the wave (settled counters); its ring dropped {drops}"
            ),
            None => say!(
                "  final wave    the forwarder's counters did not settle (metrics endpoint not reachable or still moving)"
            ),
        }
    }
    let ex = sh
        .examples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for e in &ex {
        say!("  example       {e}");
    }
    say!();
    say!("try:");
    say!(
        "  nexthop fib lookup --fib {} {}",
        o.out.join("fib").display(),
        sh.plan.names[0].fmt_name()
    );
    say!("  less {}", fwd_err.display());
    drop(topo);
    if mis > 0 || wrong > 0 {
        bail!("{mis} misforwarded frames, {wrong} wrong final-wave names");
    }
    if !ok {
        bail!("the forwarder did not acknowledge every delta within 10 s");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_counts_add_into_their_own_totals() {
        let st = SinkStats::default();
        let c = SinkCounts {
            traffic: 5,
            final_frames: 2,
            misforwarded: 1,
            foreign: 7,
        };
        st.add(&c);
        st.add(&SinkCounts {
            traffic: 1,
            ..SinkCounts::default()
        });
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(
            [
                load(&st.traffic),
                load(&st.final_frames),
                load(&st.misforwarded),
                load(&st.foreign),
                load(&st.ring_drops)
            ],
            [6, 2, 1, 7, 0]
        );
        let sinks: Vec<SinkStats> = (0..4).map(|_| SinkStats::default()).collect();
        let line = |i: usize| &sinks[i] as *const SinkStats as usize / 64;
        assert!((1..4).all(|i| line(i) != line(i - 1)));
    }

    fn snap(uptime: f64, frames_in: u64) -> MetricsSnapshot {
        MetricsSnapshot {
            uptime_seconds: uptime,
            frames_in,
            ..MetricsSnapshot::default()
        }
    }

    /// The final wave's count is exact: a snapshot still catching up with
    /// the traffic (its count moving, or published too soon) is not taken.
    #[test]
    fn settle_waits_for_a_later_publication_with_unchanged_counts() {
        let mut s = Settle::default();
        // Read right after the wave: the workers' last reports still lag.
        assert!(s.feed(snap(10.0, 100)).is_none());
        assert!(s.feed(snap(10.0, 100)).is_none(), "the same publication");
        assert!(s.feed(snap(11.0, 300)).is_none(), "still counting");
        assert!(s.feed(snap(12.0, 400)).is_none(), "still counting");
        let m = s.feed(snap(13.0, 400)).expect("settled");
        assert_eq!(m.frames_in, 400);
        // Unchanged but too soon after the first read: not trusted yet.
        let mut s = Settle::default();
        assert!(s.feed(snap(5.0, 7)).is_none());
        assert!(s.feed(snap(6.0, 7)).is_none());
        assert_eq!(s.feed(snap(7.0, 7)).map(|m| m.frames_in), Some(7));
        // A ring drop moving is not settled either.
        let mut s = Settle::default();
        assert!(s.feed(snap(1.0, 9)).is_none());
        let mut d = snap(3.0, 9);
        d.ring_drops = vec![nexthop_dataplane::metrics::PortCount { port: 0, count: 2 }];
        assert!(s.feed(d).is_none());
        assert!(
            s.feed(snap(4.0, 9)).is_none(),
            "drops went back: still moving"
        );
    }
}
