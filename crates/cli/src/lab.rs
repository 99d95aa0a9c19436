//! `nexthop lab`: the main job. A controller with a generated FIB, a
//! forwarder (`nexthop run`) following it, a traffic source and four sinks,
//! each in its own network namespace joined by veth pairs; traffic at the
//! highest rate the machine gives, live route changes while it flows,
//! every received frame checked against the FIB's history, and a summary.
//! Without root (or with `--pcap`) the same plan runs offline through pcap
//! files (see [`crate::lab_pcap`]).
//!
//! Glue only: namespaces are `nexthop_dataplane::netns`, ports
//! `nexthop_dataplane::afpacket`, the controller `nexthop_control`, the
//! forwarder is this binary's `run` subcommand.
//!
//! Every frame carries the index of its name and a phase in its payload, so
//! a sink checks it without a table lookup: a frame may leave on port `p`
//! only if some action the name held during the run sends to `p` (names
//! whose action is changed live may be seen on the old or the new ports
//! while the change propagates; every other name on exactly its ports).
//! After the traffic and the changes stop, a final wave sends one frame
//! per sampled name and checks that it arrives on exactly the ports of
//! the name's final action.

use crate::threadcpu;
use nexthop_dataplane::affinity;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nexthop_control::{AuthKey, Controller, ControllerConfig};
use nexthop_dataplane::afpacket::{RingConfig, RxRing, TxPort};
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::metrics::{fetch_snapshot, MetricsSnapshot};
use nexthop_dataplane::netns::{self, Namespaces};
use nexthop_dataplane::FrameBuf;
use nexthop_othello::fib::{Action, ConciseFib, KeyType, NameKey, RouteChange};
use nexthop_othello::Sizing;

use crate::cmd_fib::{self, BuildOpts};
use crate::demo::{actions, pick_action, Mix};
use crate::lab_phases::{self, has_changes, on_time, Phase};
use nexthop_othello::fibdir;

/// Options of `nexthop lab`.
#[derive(Clone, Debug)]
pub struct LabOpts {
    /// Names in the FIB that traffic is sent to.
    pub names: usize,
    /// Seconds of traffic.
    pub duration: f64,
    /// Route changes per second during the traffic.
    pub update_rate: f64,
    /// Frames per second offered by the source (0: as fast as it can).
    pub rate: f64,
    /// Names checked one by one in the final wave (0: none).
    pub final_names: usize,
    /// Output directory (FIB, key, forwarder logs, pcaps).
    pub out: PathBuf,
    /// Seed of the names, actions and changes.
    pub seed: u64,
    /// Run the offline pcap variant even where namespaces could be made.
    pub pcap: bool,
    /// Frames of the pcap variant.
    pub pcap_frames: usize,
    /// Forwarder worker threads (`nexthop run --workers`).
    pub workers: usize,
    /// Put the forwarder's frames to port 1 whatever the name (a trivial
    /// pipeline, the baseline of the forwarding-rate benchmark).
    pub trivial: bool,
    /// Route changes merged into one delta by the controller.
    pub changes_per_delta: usize,
    /// The forwarder's port I/O (`nexthop run --io`): afpacket, auto or
    /// afxdp.
    pub io: LabIo,
    /// Pin the workers to CPUs of their own and the rest elsewhere, when
    /// there are more CPUs than workers (see [`cpu_plan`]).
    pub pin: bool,
    /// Phases of this many seconds alternately without and with live
    /// changes (0: changes all the time); see [`crate::lab_phases`].
    pub alternate: f64,
}

/// Where the live lab puts its threads: `Ok((worker CPUs, other CPUs))`
/// (the workers on the last `workers` allowed CPUs, one each; everything
/// else on the rest), or `Err(why not)`.
pub(crate) fn cpu_plan(
    allowed: &[usize],
    workers: usize,
    pin: bool,
) -> Result<(Vec<usize>, Vec<usize>), String> {
    if !pin {
        return Err("--no-pin".into());
    }
    if allowed.len() <= workers {
        return Err(format!(
            "{workers} worker{} and the rest need {} CPUs, {} allowed",
            if workers == 1 { "" } else { "s" },
            workers + 1,
            allowed.len()
        ));
    }
    let split = allowed.len() - workers;
    Ok((allowed[split..].to_vec(), allowed[..split].to_vec()))
}

/// Port I/O of the lab's forwarder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LabIo {
    /// AF_PACKET (the forwarder's default).
    #[default]
    Afpacket,
    /// AF_XDP where a socket binds, else AF_PACKET.
    Auto,
    /// AF_XDP on every port, or the forwarder refuses to start.
    Afxdp,
}

impl LabIo {
    fn arg(self) -> &'static str {
        match self {
            LabIo::Afpacket => "afpacket",
            LabIo::Auto => "auto",
            LabIo::Afxdp => "afxdp",
        }
    }
}

/// Output ports of the lab (the sinks); port 0 is the forwarder's input.
pub(crate) const PORTS: [u16; 4] = [1, 2, 3, 4];
/// Bytes of a lab frame (the minimum Ethernet frame less its FCS).
pub(crate) const FRAME_LEN: usize = 60;
/// Source MAC of every lab frame.
pub(crate) const LAB_SRC: [u8; 6] = [0x02, 0x6e, 0x68, 0x00, 0x1a, 0xb0];
/// IEEE local experimental ethertype.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const MAGIC: &[u8; 4] = b"NHLB";
/// Phase byte of traffic frames.
pub(crate) const PHASE_TRAFFIC: u8 = 1;
/// Phase byte of final-wave frames.
pub(crate) const PHASE_FINAL: u8 = 2;

/// Write a lab frame: `dst`, the lab source, the lab ethertype, magic,
/// phase, the name's index and a tag (a sequence or chunk number).
pub(crate) fn write_frame(buf: &mut [u8; FRAME_LEN], dst: &[u8; 6], phase: u8, idx: u32, tag: u32) {
    buf[0..6].copy_from_slice(dst);
    buf[6..12].copy_from_slice(&LAB_SRC);
    buf[12..14].copy_from_slice(&ETHERTYPE);
    buf[14..18].copy_from_slice(MAGIC);
    buf[18] = phase;
    buf[19..23].copy_from_slice(&idx.to_le_bytes());
    buf[23..27].copy_from_slice(&tag.to_le_bytes());
}

/// A parsed lab frame: destination, phase, name index, tag.
pub(crate) struct LabFrame {
    pub dst: [u8; 6],
    pub phase: u8,
    pub idx: u32,
    pub tag: u32,
}

/// Parse a lab frame; `None` for anything else (other traffic on a link).
pub(crate) fn parse_frame(f: &[u8]) -> Option<LabFrame> {
    if f.len() < 27 || f[6..12] != LAB_SRC || f[12..14] != ETHERTYPE || &f[14..18] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
    let mut dst = [0u8; 6];
    dst.copy_from_slice(&f[0..6]);
    Some(LabFrame {
        dst,
        phase: f[18],
        idx: u32_at(19),
        tag: u32_at(23),
    })
}

/// Bit of [`mask_of`] for punts to the controller.
pub(crate) const PUNT: u8 = 0x80;

/// Where an action sends a frame, as a bit mask: bit `p` for port `p`
/// (ports 0..=6 are representable, which the lab's actions respect) and
/// [`PUNT`] for the controller; 0 for drop.
pub(crate) fn mask_of(a: &Action) -> u8 {
    let bit = |p: u16| if p < 7 { 1u8 << p } else { 0 };
    match a {
        Action::Port(p) => bit(*p),
        Action::PortSet(ps) => ps.iter().fold(0, |m, p| m | bit(*p)),
        Action::Drop => 0,
        Action::Controller => PUNT,
    }
}

/// The names, their actions, and the live changes, with what a checker
/// needs to know about them.
pub(crate) struct Plan {
    /// Names traffic is sent to (in the FIB for the whole run).
    pub names: Vec<[u8; 6]>,
    /// Their actions at the start.
    pub initial: Vec<Action>,
    /// The live changes, in order: action changes of traffic names, adds
    /// and deletes of other names (no traffic goes to those, so a removed
    /// name cannot be mistaken for a misforward).
    pub changes: Vec<RouteChange<[u8; 6]>>,
    /// For each change, the traffic name it changes (`u32::MAX`: none)
    /// and that name's port mask after it.
    pub touches: Vec<(u32, u8)>,
    /// Per traffic name: the ports any of its actions sent to.
    pub allowed: Vec<u8>,
    /// Per traffic name: the ports of its final action.
    pub final_mask: Vec<u8>,
    /// Adds, deletes and action changes among `changes`.
    pub counts: [usize; 3],
}

impl Plan {
    /// A seeded plan of `n` names and `n_changes` changes.
    pub fn new(n: usize, n_changes: usize, seed: u64) -> Plan {
        let table = actions();
        let names = nexthop_testutil::macs(seed, n);
        let mut r = Mix(seed);
        let initial: Vec<Action> = names.iter().map(|_| pick_action(&mut r, &table)).collect();
        let known: HashSet<[u8; 6]> = names.iter().copied().collect();
        let mut fresh: Vec<[u8; 6]> =
            nexthop_testutil::macs(seed ^ 0xDA4C_0FFE, n_changes / 2 + 16)
                .into_iter()
                .filter(|m| !known.contains(m))
                .collect();
        fresh.reverse();
        let mut current: Vec<Action> = initial.clone();
        let mut allowed: Vec<u8> = initial.iter().map(mask_of).collect();
        let mut present_dark: Vec<[u8; 6]> = Vec::new();
        let mut changes = Vec::with_capacity(n_changes);
        let mut touches = Vec::with_capacity(n_changes);
        let mut counts = [0usize; 3];
        let mut r = Mix(seed ^ 0x11FE_C4A6);
        for _ in 0..n_changes {
            let k = r.below(10);
            if (6..8).contains(&k) || (k >= 8 && present_dark.is_empty()) {
                if let Some(m) = fresh.pop() {
                    changes.push(RouteChange::Add(m, pick_action(&mut r, &table)));
                    touches.push((u32::MAX, 0));
                    present_dark.push(m);
                    counts[0] += 1;
                    continue;
                }
            } else if k >= 8 {
                let m = present_dark.swap_remove(r.below(present_dark.len()));
                changes.push(RouteChange::Delete(m));
                touches.push((u32::MAX, 0));
                counts[1] += 1;
                continue;
            }
            if names.is_empty() {
                break;
            }
            let i = r.below(names.len());
            let mut a = pick_action(&mut r, &table);
            if a == current[i] {
                let j = table.iter().position(|x| *x == a).unwrap_or(0);
                a = table[(j + 1 + r.below(table.len() - 1)) % table.len()].clone();
            }
            let m = mask_of(&a);
            allowed[i] |= m;
            touches.push((i as u32, m));
            changes.push(RouteChange::Set(names[i], a.clone()));
            current[i] = a;
            counts[2] += 1;
        }
        let final_mask = current.iter().map(mask_of).collect();
        Plan {
            names,
            initial,
            changes,
            touches,
            allowed,
            final_mask,
            counts,
        }
    }

    /// Apply changes `range` to `state` (per traffic name, its port mask):
    /// the state of the plan after those changes, given the state before.
    pub fn apply_touches(&self, state: &mut [u8], range: std::ops::Range<usize>) {
        for &(i, m) in &self.touches[range] {
            if i != u32::MAX {
                state[i as usize] = m;
            }
        }
    }

    /// The port mask of every traffic name at the start.
    pub fn initial_masks(&self) -> Vec<u8> {
        self.initial.iter().map(mask_of).collect()
    }

    /// The routes file text of the initial FIB.
    pub fn routes_text(&self) -> String {
        let mut s = String::with_capacity(self.names.len() * 24);
        s.push_str("# nexthop lab routes: MAC ACTION\n");
        for (m, a) in self.names.iter().zip(&self.initial) {
            let _ = writeln!(s, "{} {a}", m.fmt_name());
        }
        s
    }
}

/// Index walk over `0..n` that visits every index once per `n` steps in a
/// scattered order (a stride coprime to `n`).
pub(crate) struct Walk {
    n: u64,
    stride: u64,
    at: u64,
}

impl Walk {
    pub fn new(n: usize, seed: u64) -> Walk {
        let n = n.max(1) as u64;
        let mut stride = (n / 2 + 1 + seed % n.max(2)) % n;
        while gcd(stride.max(1), n) != 1 {
            stride = (stride + 1) % n;
        }
        Walk {
            n,
            stride: stride.max(1),
            at: seed % n,
        }
    }

    pub fn next_index(&mut self) -> u32 {
        let i = self.at;
        self.at = (self.at + self.stride) % self.n;
        i as u32
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Build the lab FIB directory `dir` from `plan` exactly as
/// `nexthop fib build` would; returns the build report line.
fn build_fib(plan: &Plan, dir: &Path) -> Result<String> {
    let routes = dir.join("routes.txt");
    fs::write(&routes, plan.routes_text())
        .with_context(|| format!("{}: cannot write", routes.display()))?;
    let fib_dir = dir.join("fib");
    let opts = BuildOpts {
        key_type: KeyType::Mac,
        value_bits: 8,
        check_bits: 0,
        sizing: Sizing::PowerOfTwo,
        // Room for the adds, so no change needs a rebuild.
        capacity: Some(plan.names.len() + plan.counts[0] + 1024),
        seed: None,
        stash_capacity: 16,
    };
    let b = cmd_fib::build_dir(&opts, &routes, &fib_dir)?;
    Ok(format!(
        "{} names -> {} (generation {}; parse {:.2} s, Othello build {:.2} s, write {:.2} s)",
        plan.names.len(),
        fib_dir.display(),
        b.generation,
        b.parse_secs,
        b.build_secs,
        b.write_secs
    ))
}

/// Load the lab FIB's control state (for the controller).
fn load_fib(dir: &Path) -> Result<ConciseFib<[u8; 6]>> {
    let cur = fibdir::open(&dir.join("fib"))?;
    crate::cmd_controller::load::<[u8; 6]>(&cur)
}

/// Bytes of the FIB's data-plane arrays and bits per name.
fn fib_bytes(fib: &ConciseFib<[u8; 6]>) -> (u64, f64) {
    let q = fib.othello().export(0);
    let bytes = q.memory_bytes() as u64;
    (bytes, bytes as f64 * 8.0 / fib.len().max(1) as f64)
}

/// A fresh random key file (64 hex digits, mode 0600).
fn write_key(path: &Path) -> Result<AuthKey> {
    use rand::RngCore;
    let mut secret = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut secret);
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let mut f =
        fs::File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    writeln!(f, "{hex}")?;
    AuthKey::new(hex.as_bytes()).map_err(|e| anyhow!("{e}"))
}

pub(crate) fn step(what: &str, t: Instant, detail: impl std::fmt::Display) {
    println!("[{:6.1}s] {what:<10} {detail}", t.elapsed().as_secs_f64());
}

/// What both lab variants start from: the plan, the FIB built from it
/// (as `nexthop fib build` would, under `o.out/fib`), its size, and a
/// fresh controller key (`o.out/controller.key`).
pub(crate) struct Prepared {
    pub plan: Plan,
    pub fib: ConciseFib<[u8; 6]>,
    pub fib_bytes: u64,
    pub bits: f64,
    pub key: AuthKey,
    pub key_path: PathBuf,
}

/// Make the plan, build and load the FIB, write the key; prints a step
/// line for the plan and the build.
pub(crate) fn prepare(o: &LabOpts, n_changes: usize, t: Instant) -> Result<Prepared> {
    let plan = Plan::new(o.names, n_changes, o.seed);
    step(
        "plan",
        t,
        format_args!(
            "{} names, {} changes ({} adds, {} deletes, {} action changes)",
            plan.names.len(),
            plan.changes.len(),
            plan.counts[0],
            plan.counts[1],
            plan.counts[2]
        ),
    );
    let built = build_fib(&plan, &o.out)?;
    step("build", t, built);
    let fib = load_fib(&o.out)?;
    let (fib_bytes, bits) = fib_bytes(&fib);
    let key_path = o.out.join("controller.key");
    let key = write_key(&key_path)?;
    Ok(Prepared {
        plan,
        fib,
        fib_bytes,
        bits,
        key,
        key_path,
    })
}

/// `nexthop lab`.
pub fn run(o: &LabOpts) -> Result<()> {
    if o.names == 0 || o.names > u32::MAX as usize / 2 {
        bail!("--names must be between 1 and {}", u32::MAX / 2);
    }
    for (what, v, min) in [
        ("--duration", o.duration, 0.1),
        ("--update-rate", o.update_rate, 0.0),
        ("--rate", o.rate, 0.0),
    ] {
        if !v.is_finite() || v < min || v > 1e9 {
            bail!("{what} {v}: expected a number of at least {min}");
        }
    }
    if !o.alternate.is_finite()
        || o.alternate < 0.0
        || (o.alternate > 0.0 && (o.alternate < 0.2 || 2.0 * o.alternate > o.duration))
    {
        bail!(
            "--alternate {}: expected 0 (no phases) or phases of at least 0.2 s, two of which fit in --duration {}",
            o.alternate,
            o.duration
        );
    }
    let stop = StopFlag::install().map_err(|e| anyhow!("installing signal handlers: {e}"))?;
    fs::create_dir_all(&o.out).with_context(|| format!("{}: create directory", o.out.display()))?;
    let why_offline = if o.pcap {
        Some("--pcap given".to_string())
    } else if !netns::is_root() {
        Some("network namespaces need root, and this runs as another user".to_string())
    } else {
        None
    };
    if let Some(why) = why_offline {
        println!("nexthop lab: {why}: running the offline pcap variant instead");
        return crate::lab_pcap::run(o, &stop);
    }
    match Topology::create() {
        Ok(topo) => run_live(o, topo, &stop),
        Err(e) => {
            println!(
                "nexthop lab: cannot create network namespaces ({e}): running the offline pcap variant instead"
            );
            crate::lab_pcap::run(o, &stop)
        }
    }
}

/// The namespaces and links of the lab: `src` -- `fwd` -- four sinks.
struct Topology {
    /// Removes the namespaces (and so the links) on drop.
    _ns: Namespaces,
    src: String,
    fwd: String,
    sinks: Vec<String>,
}

impl Topology {
    fn create() -> Result<Topology> {
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
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
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
    netns::enter(ns)?;
    let iface = format!("sink{port}");
    let cfg = RingConfig {
        block_size: 1 << 20,
        block_count: 32,
        ..RingConfig::default()
    };
    let mut ring = RxRing::open(&iface, &cfg)?;
    let st = &sh.sinks[usize::from(port) - 1];
    let bit = 1u8 << port;
    let mut frames_buf = FrameBuf::default();
    loop {
        let stopping = sh.stop_sinks.load(Ordering::Acquire);
        ring.wait(20)?;
        let mut any = false;
        while let Some(mut block) = ring.next_block() {
            any = true;
            let mut frames = frames_buf.take();
            block.frames_into(&mut frames);
            let mut c = SinkCounts::default();
            for f in &frames {
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
            frames_buf.put(frames);
            st.add(&c);
        }
        if stopping && !any {
            break;
        }
    }
    st.ring_drops.store(ring.drops()?, Ordering::Relaxed);
    Ok(())
}

/// The summary's `cpu` line: cores each part of the lab used during the
/// traffic (`pids`: the lab, the forwarder). The update path is the lab's
/// main thread (it calls the controller's `apply_changes`), the
/// controller's connection threads and the forwarder's follower.
pub(crate) fn cpu_line(cpu: &[threadcpu::ThreadCores], pids: [i32; 2]) -> String {
    use threadcpu::sum_prefix;
    let [lab, fwd] = pids;
    let workers: Vec<String> = cpu
        .iter()
        .filter(|t| t.pid == fwd && t.name.starts_with("worker-"))
        .map(|t| format!("{} {:.2}", t.name, t.cores))
        .collect();
    let fwd_all: f64 = cpu.iter().filter(|t| t.pid == fwd).map(|t| t.cores).sum();
    let worker = sum_prefix(cpu, fwd, "worker-");
    let follower = sum_prefix(cpu, fwd, "fib-follower");
    let apply = threadcpu::main_thread(cpu, lab);
    let ctl = sum_prefix(cpu, lab, "ctl-");
    format!(
        "cores during the traffic: forwarder {:.2} (workers {worker:.2}: {}; fib-follower {follower:.2}; other {:.2}), \
         lab source {:.2}, sinks {:.2}; update path {:.2} (controller apply on the lab's main thread {apply:.2}, \
         controller connections {ctl:.2}, fib-follower {follower:.2})",
        fwd_all,
        if workers.is_empty() { "none seen".to_string() } else { workers.join(", ") },
        (fwd_all - worker - follower).max(0.0),
        sum_prefix(cpu, lab, "lab-source"),
        sum_prefix(cpu, lab, "lab-sink-"),
        update_path_cores(cpu, pids),
    )
}

/// Cores of the update path: the lab's main thread (the controller's
/// `apply_changes`), the controller's connection threads and the
/// forwarder's follower.
pub(crate) fn update_path_cores(cpu: &[threadcpu::ThreadCores], pids: [i32; 2]) -> f64 {
    let [lab, fwd] = pids;
    threadcpu::main_thread(cpu, lab)
        + threadcpu::sum_prefix(cpu, lab, "ctl-")
        + threadcpu::sum_prefix(cpu, fwd, "fib-follower")
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

pub(crate) fn ports_of(mask: u8) -> String {
    let mut v: Vec<String> = (0..7u16)
        .filter(|p| mask & (1 << p) != 0)
        .map(|p| p.to_string())
        .collect();
    if mask & PUNT != 0 {
        v.push("controller".into());
    }
    if v.is_empty() {
        "no port (drop)".into()
    } else {
        v.join("+")
    }
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

/// Fetch the forwarder's metrics from inside its namespace.
fn fwd_metrics(ns: &str, addr: &str) -> Result<MetricsSnapshot> {
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

fn run_live(o: &LabOpts, topo: Topology, stop: &StopFlag) -> Result<()> {
    let t = Instant::now();
    let n_changes = (o.update_rate * on_time(o.duration, o.alternate)).ceil() as usize;
    println!(
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
    println!(
        "nexthop lab: topology {} --src0/in0-- {} (nexthop run) --out1..4/sink1..4-- {} .. {}",
        topo.src, topo.fwd, topo.sinks[0], topo.sinks[3]
    );

    let Prepared {
        plan,
        fib,
        fib_bytes,
        bits,
        key,
        key_path,
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
    let ready = Instant::now();
    loop {
        let err = fs::read_to_string(&fwd_err).unwrap_or_default();
        if err.contains("nexthop run: forwarding") {
            break;
        }
        if let Some(c) = fwd.0.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                bail!("the forwarder exited ({st}) before forwarding:\n{err}");
            }
        }
        if ready.elapsed() > Duration::from_secs(60) || stop.is_raised() {
            bail!("the forwarder did not start within 60 s:\n{err}");
        }
        thread::sleep(Duration::from_millis(20));
    }
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
    thread::sleep(Duration::from_millis(200));
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
            println!(
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
                println!("[{:6.1}s] {}", t.elapsed().as_secs_f64(), phase_line(k, &p));
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
        println!("[{:6.1}s] {}", t.elapsed().as_secs_f64(), phase_line(k, &p));
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
    thread::sleep(Duration::from_millis(300));
    let m1 = fwd_metrics(&topo.fwd, metrics_addr).ok();
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
    // The forwarder publishes its metrics once a second.
    let mut wave_fwd: Option<(u64, u64)> = None;
    if wave > 0 {
        thread::sleep(Duration::from_millis(1100));
        let w0 = fwd_metrics(&topo.fwd, metrics_addr).ok();
        let (sh2, ns, seed) = (sh.clone(), topo.src.clone(), o.seed ^ 0xF1);
        thread::spawn(move || {
            source_loop(&sh2, &ns, PHASE_FINAL, Some(wave as u64), wave_rate, seed)
        })
        .join()
        .map_err(|_| anyhow!("source thread panicked"))??;
        thread::sleep(Duration::from_millis(1100));
        let w1 = fwd_metrics(&topo.fwd, metrics_addr).ok();
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

    // Summary.
    let mis = misforwarded(&sh);
    let recv_traffic = sink_total(&sh);
    let per_port: Vec<String> = PORTS
        .iter()
        .zip(&sh.sinks)
        .map(|(p, s)| format!("{p}:{}", s.traffic.load(Ordering::Relaxed)))
        .collect();
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
    println!();
    println!(
        "summary ({:.1} s in all; files in {})",
        t.elapsed().as_secs_f64(),
        o.out.display()
    );
    println!(
        "  fib           {} names (+{} added, -{} deleted live), {} B of data-plane arrays, {bits:.2} bits/name",
        sh.plan.names.len(),
        sh.plan.counts[0],
        sh.plan.counts[1],
        fib_bytes
    );
    println!(
        "  source        {sent_traffic} frames of {FRAME_LEN} B in {traffic_secs:.2} s: {:.3} Mpps offered ({failed_traffic} refused by the kernel)",
        sent_traffic as f64 / traffic_secs / 1e6
    );
    // The workers' own rate: frames per second of worker CPU time (the
    // `cpu` line's workers), which stays the worker cores' rate when the
    // source, not the workers, limits the run.
    let worker_cores = threadcpu::sum_prefix(&cpu, pids[1], "worker-");
    match fwd_rate {
        Some((frames, mpps)) => println!(
            "  forwarder     {frames} frames in during the traffic: {mpps:.3} Mpps ({} worker{}; {} per worker CPU-second); ring drops {}",
            o.workers,
            if o.workers == 1 { "" } else { "s" },
            if worker_cores > 0.05 {
                format!("{:.3} Mpps", mpps / worker_cores)
            } else {
                "? Mpps".to_string()
            },
            field(&line, "ring_drops").unwrap_or("?")
        ),
        None => println!("  forwarder     (metrics endpoint not reachable)"),
    }
    println!(
        "  forwarder     in={} out={} drops={} punted={}",
        field(&line, "in").unwrap_or("?"),
        field(&line, "out").unwrap_or("?"),
        field(&line, "drops").unwrap_or("?"),
        field(&line, "punted").unwrap_or("?")
    );
    println!(
        "  sinks         {recv_traffic} frames ({}); sink ring drops {sink_drops}",
        per_port.join(" ")
    );
    if o.trivial {
        println!(
            "  misforwarded  not checked: --trivial sends every frame to port 1 without a lookup"
        );
    } else {
        println!("  misforwarded  {mis}");
    }
    let change_secs = on_time(traffic_secs, o.alternate);
    println!(
        "  updates       {applied} changes in {change_secs:.2} s{}: {:.0} updates/s applied by the controller ({:.0} us each), {} deltas pushed; forwarder fib_deltas={} fib_rejects={}",
        if o.alternate > 0.0 { " of phases with changes" } else { "" },
        applied as f64 / change_secs.max(1e-9),
        apply_secs * 1e6 / applied.max(1) as f64,
        cs.deltas_sent,
        field(&line, "fib_deltas").unwrap_or("?"),
        field(&line, "fib_rejects").unwrap_or("?")
    );
    if prop.samples > 0 {
        println!(
            "  propagation   controller change -> forwarder Ack (applied): median {:.0} us, p99 {:.0} us, max {:.0} us over {} changes",
            prop.median.as_secs_f64() * 1e6,
            prop.p99.as_secs_f64() * 1e6,
            prop.max.as_secs_f64() * 1e6,
            prop.samples
        );
    }
    println!("  cpu           {}", cpu_line(&cpu, pids));
    if o.alternate > 0.0 {
        for l in lab_phases::summary(&phases, o.alternate) {
            println!("  phases        {l}");
        }
    }
    if wave > 0 {
        println!(
            "  final wave    {wave} names, one frame each at {:.0} k frames/s: {exact} exactly on their final ports, {wrong} on a wrong port, {missing} lost",
            wave_rate / 1e3
        );
        if let Some((frames, drops)) = wave_fwd {
            println!("  final wave    the forwarder received {frames} of its frames; its ring dropped {drops}");
        }
    }
    let ex = sh
        .examples
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for e in &ex {
        println!("  example       {e}");
    }
    println!();
    println!("try:");
    println!(
        "  nexthop fib lookup --fib {} {}",
        o.out.join("fib").display(),
        sh.plan.names[0].fmt_name()
    );
    println!("  less {}", fwd_err.display());
    drop(topo);
    if mis > 0 || wrong > 0 {
        bail!("{mis} misforwarded frames, {wrong} wrong final-wave names");
    }
    if !converged {
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

    #[test]
    fn frames_round_trip_and_foreign_frames_are_not_lab_frames() {
        let mut b = [0u8; FRAME_LEN];
        let dst = [2, 0, 0, 0, 0, 7];
        write_frame(&mut b, &dst, PHASE_FINAL, 123_456, 77);
        let f = parse_frame(&b).unwrap();
        assert_eq!(
            (f.dst, f.phase, f.idx, f.tag),
            (dst, PHASE_FINAL, 123_456, 77)
        );
        assert!(parse_frame(&b[..26]).is_none());
        let mut other = b;
        other[6] ^= 1;
        assert!(parse_frame(&other).is_none());
        let mut other = b;
        other[14] = b'X';
        assert!(parse_frame(&other).is_none());
    }

    #[test]
    fn walks_visit_every_index_once_per_round() {
        for n in [1usize, 2, 3, 10, 97, 1000, 4096] {
            for seed in 0..4 {
                let mut w = Walk::new(n, seed);
                let mut seen = vec![false; n];
                for _ in 0..n {
                    let i = w.next_index() as usize;
                    assert!(!seen[i], "n {n} seed {seed}: {i} twice");
                    seen[i] = true;
                }
            }
        }
    }

    #[test]
    fn cpu_plans_give_workers_the_last_cpus_and_the_rest_the_others() {
        assert_eq!(cpu_plan(&[0, 1], 1, true), Ok((vec![1], vec![0])));
        assert_eq!(
            cpu_plan(&[0, 1, 2, 3], 2, true),
            Ok((vec![2, 3], vec![0, 1]))
        );
        assert_eq!(cpu_plan(&[2, 5, 7], 1, true), Ok((vec![7], vec![2, 5])));
        let e = cpu_plan(&[0, 1], 2, true).unwrap_err();
        assert!(e.contains("need 3 CPUs, 2 allowed"), "{e}");
        assert_eq!(cpu_plan(&[0, 1, 2], 1, false), Err("--no-pin".to_string()));
    }

    #[test]
    fn masks_name_ports_and_punts() {
        assert_eq!(mask_of(&Action::Port(3)), 1 << 3);
        assert_eq!(mask_of(&Action::PortSet(vec![1, 4])), 0b1_0010);
        assert_eq!(mask_of(&Action::Drop), 0);
        assert_eq!(mask_of(&Action::Controller), PUNT);
        assert_eq!(ports_of(0b1_0010), "1+4");
        assert_eq!(ports_of(PUNT), "controller");
        assert_eq!(ports_of(0), "no port (drop)");
    }

    /// The plan's bookkeeping agrees with replaying its changes on a map.
    #[test]
    fn plans_agree_with_a_replay_of_their_changes() {
        let p = Plan::new(2_000, 5_000, 9);
        assert_eq!(p.changes.len(), 5_000);
        assert_eq!(p.counts.iter().sum::<usize>(), 5_000);
        let mut fib: std::collections::HashMap<[u8; 6], Action> = p
            .names
            .iter()
            .copied()
            .zip(p.initial.iter().cloned())
            .collect();
        let mut allowed: Vec<u8> = p.initial.iter().map(mask_of).collect();
        let index: std::collections::HashMap<[u8; 6], usize> =
            p.names.iter().enumerate().map(|(i, m)| (*m, i)).collect();
        for (c, &(t, m)) in p.changes.iter().zip(&p.touches) {
            match c {
                RouteChange::Add(k, a) => {
                    assert!(!index.contains_key(k), "an add of a traffic name");
                    assert!(fib.insert(*k, a.clone()).is_none(), "add of a present name");
                    assert_eq!(t, u32::MAX);
                }
                RouteChange::Delete(k) => {
                    assert!(!index.contains_key(k), "a delete of a traffic name");
                    assert!(fib.remove(k).is_some(), "delete of an absent name");
                    assert_eq!(t, u32::MAX);
                }
                RouteChange::Set(k, a) => {
                    let i = index[k];
                    assert_eq!(t as usize, i);
                    assert_eq!(m, mask_of(a));
                    assert_ne!(
                        fib.insert(*k, a.clone()).as_ref(),
                        Some(a),
                        "a no-op change"
                    );
                    allowed[i] |= m;
                }
            }
        }
        let mut state = p.initial_masks();
        p.apply_touches(&mut state, 0..p.changes.len() / 2);
        p.apply_touches(&mut state, p.changes.len() / 2..p.changes.len());
        assert_eq!(state, p.final_mask);
        for (i, n) in p.names.iter().enumerate() {
            assert_eq!(p.final_mask[i], mask_of(&fib[n]));
            assert_eq!(p.allowed[i], allowed[i]);
            assert_eq!(p.allowed[i] & p.final_mask[i], p.final_mask[i]);
        }
    }
}
