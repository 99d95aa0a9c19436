//! `nexthop lab --switches N [--topology line|leaf-spine]`: a network of
//! N forwarders, every one following its own column of one network-wide
//! FIB through Redis.
//!
//! ```text
//! line:        src --p1 sw0 p2-- p1 sw1 p2-- ... --p1 sw(N-1)
//!                       p3        p3                 p3
//!                       k0        k1   sinks         k(N-1)
//!
//! leaf-spine:        spine L  ..  spine N-1      (port 1 + l: leaf l)
//!                     /    \       /    \
//!              src -p0 leaf 0 .. leaf L-1         (port 1 + j: spine j,
//!                        |          |              port S + 1: its sink)
//!                        k0         k(L-1)
//! ```
//!
//! (The shapes, ports and routes are [`Net`]'s.) A private `redis-server`
//! listens on a Unix socket under the out directory (reachable from every
//! namespace); the lab's controller ([`RedisController`] over a
//! [`NetworkFib`] of N columns) publishes the FIB; each switch is `nexthop
//! run --redis unix://... --fib lab/S` in its namespace. A name's
//! destination is one sink `d`. In the line, switch `s` sends it right
//! (port 2) when `s < d`, to its sink (port 3) when `s == d`, left (port 1)
//! otherwise; in the leaf-spine, a leaf sends it up to a spine (chosen by
//! the name) unless the sink is its own, a spine down to the leaf of `d`.
//! Live changes move names to other sinks while traffic flows: the
//! controller takes each change once and publishes a delta only to the
//! switches whose next hop changed.
//!
//! Every frame carries its name's index and the FIB version it was sent
//! under (the version whose changes were all published). A sink accepts a
//! traffic frame at the destination of that version, or "in transition"
//! at the one just before it, at any later one (switches apply a change
//! one after another while frames are on the way), and at an older one
//! replaced less than [`SWITCH_LAG`] before the frame arrived (a switch
//! that has not yet read the newer changes from Redis: on a loaded
//! machine it can be more than one change of a name behind); anything
//! else is misforwarded. After the traffic, a final wave sends one frame per name
//! and each must reach exactly its final destination. Per-hop counts come
//! from every switch's metrics and are checked link by link: what switch
//! `s` received is what its neighbours sent it on their links to it (plus
//! the source at the entry switch), what it sent to its sink is what that
//! sink received, and nothing went to a tail (a port of the shared action
//! table that the switch does not use).

use crate::textio::say;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nexthop_control::{RedisController, RedisControllerConfig};
use nexthop_dataplane::afpacket::TxPort;
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::metrics::MetricsSnapshot;
use nexthop_dataplane::netns;
use nexthop_othello::fib::Action;
use nexthop_othello::fib_net::{NetworkChange, NetworkFib};
use nexthop_othello::Config;
use rand::{Rng, SeedableRng};

use super::frame::{parse_frame, write_frame, FRAME_LEN, PHASE_FINAL, PHASE_TRAFFIC};
use super::live::{settled_metrics, ChildGuard};
use super::plan::write_key;
use super::sink::{read_sink, wait_ready};
use super::topo::{At, LabNet};
use super::{step, LabOpts};

/// Fewest and most switches.
pub(crate) const SWITCHES: std::ops::RangeInclusive<usize> = 4..=16;
/// Most names of a network lab (each sink checks frames by index).
const MAX_NAMES: usize = 1 << 20;
/// The FIB's name in Redis.
const FIB: &str = "lab";
/// Switch ports: left, right, the local sink.
const LEFT: u16 = 1;
const RIGHT: u16 = 2;
const LOCAL: u16 = 3;
const METRICS: &str = "127.0.0.1:9464";

fn name(i: usize) -> [u8; 6] {
    let b = (i as u32).to_be_bytes();
    [0x02, 0x6e, b[0], b[1], b[2], b[3]]
}

/// The shape of the network (`--topology`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Topology {
    /// Switches in a line, a sink on each, the source at switch 0.
    #[default]
    Line,
    /// Spines over leaves (every leaf linked to every spine), a sink on
    /// each leaf, the source at leaf 0.
    LeafSpine,
}

impl Topology {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Topology::Line => "line",
            Topology::LeafSpine => "leaf-spine",
        }
    }
}

/// The switches, their links and where each name goes.
///
/// Line: switch `s` has port 1 (left: switch `s - 1`, the source for
/// switch 0), port 2 (right: switch `s + 1`; a tail link at the end) and
/// port 3 (its sink); destination `d` is switch `d`'s sink.
///
/// Leaf-spine: `S` spines (2, or N / 4 from N = 12 on) and `L = N - S`
/// leaves; switches `0..L` are the leaves, `L..N` the spines. Leaf `l`
/// reaches spine `j` on port `1 + j` and its sink on port `S + 1`; spine
/// `j` reaches leaf `l` on port `1 + l`; the source enters leaf 0 on port
/// 0. Destination `d` is leaf `d`'s sink. A leaf sends a name for another
/// leaf up to spine `i mod S` (the name's index: the names spread over the
/// spines), a spine down to the destination leaf.
///
/// One action table serves every switch, and a forwarder maps every port
/// of it, so a port a switch does not use goes to a tail link (a veth
/// into the sink namespace that nothing is routed to; the per-hop check
/// says no frame went there).
struct Net {
    topo: Topology,
    n: usize,
    spines: usize,
}

/// A link between two switches: `(a, port of a, b, port of b)`.
type Link = (usize, u16, usize, u16);

impl Net {
    fn new(topo: Topology, n: usize) -> Net {
        let spines = match topo {
            Topology::Line => 0,
            Topology::LeafSpine => (n / 4).max(2),
        };
        Net { topo, n, spines }
    }

    /// Destinations (sinks).
    fn dests(&self) -> usize {
        self.n - self.spines
    }

    /// The switch that holds sink `d`, and its port to it.
    fn sink_of(&self, d: usize) -> (usize, u16) {
        match self.topo {
            Topology::Line => (d, LOCAL),
            Topology::LeafSpine => (d, self.spines as u16 + 1),
        }
    }

    /// The switch the source enters, and on which port.
    fn entry(&self) -> (usize, u16) {
        match self.topo {
            Topology::Line => (0, LEFT),
            Topology::LeafSpine => (0, 0),
        }
    }

    fn links(&self) -> Vec<Link> {
        match self.topo {
            Topology::Line => (0..self.n - 1).map(|s| (s, RIGHT, s + 1, LEFT)).collect(),
            Topology::LeafSpine => {
                let l = self.dests();
                let mut v = Vec::new();
                for leaf in 0..l {
                    for j in 0..self.spines {
                        v.push((leaf, 1 + j as u16, l + j, 1 + leaf as u16));
                    }
                }
                v
            }
        }
    }

    /// Every port of the shared action table (each switch maps all).
    fn table_ports(&self) -> Vec<u16> {
        match self.topo {
            Topology::Line => vec![LEFT, RIGHT, LOCAL],
            Topology::LeafSpine => (1..=(self.spines + 1).max(self.dests()) as u16).collect(),
        }
    }

    /// Switch `s`'s action for name `i` whose destination is sink `d`.
    fn hop(&self, s: usize, d: usize, i: usize) -> Action {
        Action::Port(match self.topo {
            Topology::Line => match s.cmp(&d) {
                std::cmp::Ordering::Less => RIGHT,
                std::cmp::Ordering::Equal => LOCAL,
                std::cmp::Ordering::Greater => LEFT,
            },
            Topology::LeafSpine => {
                let l = self.dests();
                if s >= l {
                    1 + d as u16
                } else if s == d {
                    self.spines as u16 + 1
                } else {
                    1 + (i % self.spines) as u16
                }
            }
        })
    }

    /// Every switch's action for name `i` to sink `d`.
    fn actions(&self, d: usize, i: usize) -> Vec<Action> {
        (0..self.n).map(|s| self.hop(s, d, i)).collect()
    }

    /// Switch `s`'s ports: `(port, what)`, `what` a link, the source, the
    /// sink or a tail.
    fn ports(&self, s: usize) -> Vec<(u16, Port)> {
        let mut v: Vec<(u16, Port)> = Vec::new();
        for (a, pa, b, pb) in self.links() {
            if a == s {
                v.push((pa, Port::Link(b, pb)));
            }
            if b == s {
                v.push((pb, Port::Link(a, pa)));
            }
        }
        if self.entry().0 == s {
            v.push((self.entry().1, Port::Source));
        }
        for d in 0..self.dests() {
            if self.sink_of(d).0 == s {
                v.push((self.sink_of(d).1, Port::Sink(d)));
            }
        }
        for p in self.table_ports() {
            if !v.iter().any(|&(q, _)| q == p) {
                v.push((p, Port::Tail));
            }
        }
        v.sort_by_key(|&(p, _)| p);
        v
    }
}

/// What a switch port leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Port {
    /// Switch `.0`'s port `.1`.
    Link(usize, u16),
    Source,
    Sink(usize),
    Tail,
}

/// How long after a change is published a switch may still forward by
/// the destination it replaced (it has not yet read the change from
/// Redis). The lab waits longer than this before its final wave, whose
/// frames must all reach their final destination.
const SWITCH_LAG: Duration = Duration::from_millis(500);

/// Destinations of every name over the FIB's versions.
struct History {
    /// Per name: `(version, destination, published)` from version 0,
    /// versions rising; `published` is taken before the change is sent.
    dest: Vec<Mutex<Vec<(u64, u8, Instant)>>>,
}

impl History {
    /// The destinations a frame sent under `v` and arriving at `at` may
    /// reach: the one at `v` (exact), and in transition the one before it
    /// (switches not yet updated), every later one (switches updated while
    /// the frame was on its way) and every older one replaced less than
    /// [`SWITCH_LAG`] before `at` (a switch behind by more than one change
    /// of this name).
    fn allowed(&self, i: usize, v: u64, at: Instant) -> Option<(u8, Vec<u8>)> {
        let h = self.dest.get(i)?.lock().unwrap_or_else(|e| e.into_inner());
        allowed_in(&h, v, at)
    }

    fn last(&self, i: usize) -> u8 {
        let h = self.dest[i].lock().unwrap_or_else(|e| e.into_inner());
        h.last().map_or(0, |&(_, d, _)| d)
    }
}

/// [`History::allowed`] over one name's history.
fn allowed_in(h: &[(u64, u8, Instant)], v: u64, at: Instant) -> Option<(u8, Vec<u8>)> {
    let k = h.iter().rposition(|&(ver, _, _)| ver <= v)?;
    let mut near = Vec::new();
    // Older destinations, newest first: entry j was replaced when entry
    // j + 1 was published, and those instants fall with j.
    for j in (0..k).rev() {
        if j + 1 == k || at.saturating_duration_since(h[j + 1].2) < SWITCH_LAG {
            near.push(h[j].1);
        } else {
            break;
        }
    }
    near.extend(h[k + 1..].iter().map(|&(_, d, _)| d));
    Some((h[k].1, near))
}

#[derive(Default)]
struct SinkCounts {
    exact: AtomicU64,
    transition: AtomicU64,
    misforwarded: AtomicU64,
    final_frames: AtomicU64,
    ring_drops: AtomicU64,
    /// Other frames (a switch forwards what it receives, lab frame or not).
    foreign: AtomicU64,
}

struct Shared {
    history: History,
    sinks: Vec<SinkCounts>,
    /// Per name: the sinks its final-wave frame reached (bit per sink,
    /// up to 16 sinks) and how many copies.
    final_seen: Vec<AtomicU32>,
    final_copies: Vec<AtomicU8>,
    /// The version every frame sent now is under.
    version: AtomicU64,
    sent: AtomicU64,
    stop_source: AtomicBool,
    stop_sinks: AtomicBool,
    /// Sinks whose rings are open.
    sinks_ready: AtomicUsize,
    examples: Mutex<Vec<String>>,
}

impl Shared {
    fn example(&self, msg: String) {
        let mut v = self.examples.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < 5 {
            v.push(msg);
        }
    }
}

/// Raises both stop flags of [`Shared`] when dropped.
struct StopOnDrop<'a>(&'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop_source.store(true, Ordering::Release);
        self.0.stop_sinks.store(true, Ordering::Release);
    }
}

fn sink_loop(sh: &Shared, ns: &str, s: usize) -> Result<()> {
    let st = &sh.sinks[s];
    let drops = read_sink(
        ns,
        &format!("k{s}"),
        8,
        &sh.stop_sinks,
        &sh.sinks_ready,
        |frames| {
            for f in frames {
                let Some(lf) = parse_frame(f) else {
                    st.foreign.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let i = lf.idx as usize;
                let named = i < sh.final_seen.len() && lf.dst == name(i);
                match (lf.phase, named) {
                    (PHASE_TRAFFIC, true) => {
                        match sh.history.allowed(i, u64::from(lf.tag), Instant::now()) {
                            Some((d, _)) if usize::from(d) == s => {
                                st.exact.fetch_add(1, Ordering::Relaxed);
                            }
                            Some((_, near)) if near.iter().any(|&d| usize::from(d) == s) => {
                                st.transition.fetch_add(1, Ordering::Relaxed);
                            }
                            other => {
                                st.misforwarded.fetch_add(1, Ordering::Relaxed);
                                sh.example(format!(
                            "name #{i} sent under version {} reached sink {s}; allowed {other:?}",
                            lf.tag
                        ));
                            }
                        }
                    }
                    (PHASE_FINAL, true) => {
                        st.final_frames.fetch_add(1, Ordering::Relaxed);
                        sh.final_seen[i].fetch_or(1 << s, Ordering::Relaxed);
                        sh.final_copies[i].fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        st.misforwarded.fetch_add(1, Ordering::Relaxed);
                        sh.example(format!(
                            "a frame of name #{i} phase {} at sink {s}",
                            lf.phase
                        ));
                    }
                }
            }
        },
    )?;
    st.ring_drops.store(drops, Ordering::Relaxed);
    Ok(())
}

/// Send frames to random names at `rate` per second (`count`: that many,
/// in index order, as the final wave) until told to stop.
fn source_loop(
    sh: &Shared,
    ns: &str,
    phase: u8,
    count: Option<usize>,
    rate: f64,
    seed: u64,
) -> Result<()> {
    netns::enter(ns)?;
    let mut tx = TxPort::open("src0")?;
    const BURST: usize = 64;
    let mut bufs = vec![[0u8; FRAME_LEN]; BURST];
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let names = sh.final_seen.len();
    let t0 = Instant::now();
    let mut sent = 0usize;
    while !sh.stop_source.load(Ordering::Relaxed) {
        let want = match count {
            Some(c) if sent >= c => break,
            Some(c) => (c - sent).min(BURST),
            None => BURST,
        };
        if (sent as f64) >= t0.elapsed().as_secs_f64() * rate {
            thread::sleep(Duration::from_micros(500));
            continue;
        }
        let v = sh.version.load(Ordering::Acquire) as u32;
        for (k, b) in bufs.iter_mut().take(want).enumerate() {
            let i = if count.is_some() {
                sent + k
            } else {
                rng.gen_range(0..names)
            };
            write_frame(b, &name(i), phase, i as u32, v);
        }
        let out = tx.send_batch(&bufs[..want]);
        sent += want;
        sh.sent.fetch_add(out.sent as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// A private `redis-server` on a Unix socket under `dir` (no persistence).
fn start_redis(dir: &Path) -> Result<(ChildGuard, String)> {
    let sock = dir.join("redis.sock");
    let _ = fs::remove_file(&sock);
    let child = Command::new("redis-server")
        .args(["--port", "0", "--save", "", "--appendonly", "no"])
        .arg("--unixsocket")
        .arg(&sock)
        .args(["--unixsocketperm", "700"])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(fs::File::create(dir.join("redis.log"))?)
        .stderr(Stdio::null())
        .spawn()
        .context("starting redis-server (Debian package redis-server)")?;
    let guard = ChildGuard(Some(child));
    let url = format!("unix://{}", sock.display());
    let end = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        if Instant::now() > end {
            bail!(
                "redis-server did not listen on {} within 10 s",
                sock.display()
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok((guard, url))
}

/// `nexthop lab --switches N`.
pub(crate) fn run(o: &LabOpts, stop: &StopFlag) -> Result<()> {
    let n = o.switches;
    let net = Net::new(o.topology, n);
    let nd = net.dests();
    if !SWITCHES.contains(&n) {
        bail!(
            "--switches {n}: expected {} to {}",
            SWITCHES.start(),
            SWITCHES.end()
        );
    }
    if o.names > MAX_NAMES {
        bail!(
            "--names {}: a network lab takes at most {MAX_NAMES}",
            o.names
        );
    }
    if !netns::is_root() {
        bail!("--switches needs network namespaces, which need root");
    }
    let t = Instant::now();
    let rate = if o.rate > 0.0 { o.rate } else { 20_000.0 };
    let out = fs::canonicalize(&o.out)?;
    say!(
        "nexthop lab: {n} switches ({}), {} names, {:.1} s of traffic at {rate:.0} frames/s, \
         {:.0} changes/s, seed {}",
        o.topology.name(),
        o.names,
        o.duration,
        o.update_rate,
        o.seed
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(o.seed);
    let dests: Vec<usize> = (0..o.names).map(|_| rng.gen_range(0..nd)).collect();
    let routes: Vec<_> = dests
        .iter()
        .enumerate()
        .map(|(i, &d)| (i + 1, name(i), net.actions(d, i)))
        .collect();
    let fib = NetworkFib::build(
        Config {
            columns: n,
            ..Config::default()
        },
        &routes,
    )?;
    let (_redis, url) = start_redis(&out)?;
    let key_path = out.join("controller.key");
    let key = write_key(&key_path)?;
    let mut ccfg = RedisControllerConfig::new(url.as_str(), FIB);
    ccfg.log = false;
    // The lease is renewed while the switches start (a thread, below)
    // and every 500 ms while the traffic runs; this leaves room for a
    // step between the two on a loaded machine.
    ccfg.lease = Duration::from_secs(30);
    ccfg.changes_per_delta = o.changes_per_delta;
    let mut ctl = RedisController::<[u8; 6], NetworkFib<[u8; 6]>>::acquire(
        &key,
        ccfg,
        fib,
        0,
        &AtomicBool::new(false),
    )
    .map_err(|e| anyhow!("controller: {e}"))?;
    step(
        "redis",
        t,
        format_args!("{url}: FIB {FIB}, {n} columns, snapshot published"),
    );

    // Namespaces and links. Interface `p{P}` is a switch's port P; the
    // sinks are `k{D}` and the tails `t{S}p{P}` in the sink namespace.
    let lnet = LabNet::create("nhnet", "sw", n)?;
    let (entry, entry_port) = net.entry();
    lnet.link(At::Src, "src0", At::Node(entry), &format!("p{entry_port}"))?;
    for (a, pa, b, pb) in net.links() {
        lnet.link(
            At::Node(a),
            &format!("p{pa}"),
            At::Node(b),
            &format!("p{pb}"),
        )?;
    }
    for s in 0..n {
        for (p, what) in net.ports(s) {
            let sink = match what {
                Port::Sink(d) => format!("k{d}"),
                Port::Tail => format!("t{s}p{p}"),
                Port::Link(..) | Port::Source => continue,
            };
            lnet.link(At::Node(s), &format!("p{p}"), At::Snk, &sink)?;
        }
    }

    // The switches.
    let exe = std::env::current_exe().context("locating the nexthop binary")?;
    let fwds = renewing(&mut ctl, Duration::from_secs(1), || {
        lnet.start(&exe, &out, "sw", "switch", stop, |s, cmd| {
            cmd.args([
                "run",
                "--redis",
                &url,
                "--fib",
                &format!("{FIB}/{s}"),
                "--key-file",
            ])
            .arg(&key_path)
            .args(["--metrics", METRICS, "--quiet", "--workers", "1"]);
            for (p, what) in net.ports(s) {
                cmd.args(["--port", &format!("{p}=p{p}")]);
                if matches!(what, Port::Link(..) | Port::Source) {
                    cmd.args(["--in", &p.to_string()]);
                }
            }
        })
    })??;
    step(
        "switches",
        t,
        format_args!(
            "{n} x nexthop run --redis {url} --fib {FIB}/S, each with its column's snapshot"
        ),
    );

    let sh = Shared {
        history: History {
            dest: dests
                .iter()
                .map(|&d| Mutex::new(vec![(0, d as u8, Instant::now())]))
                .collect(),
        },
        sinks: (0..nd).map(|_| SinkCounts::default()).collect(),
        final_seen: (0..o.names).map(|_| AtomicU32::new(0)).collect(),
        final_copies: (0..o.names).map(|_| AtomicU8::new(0)).collect(),
        version: AtomicU64::new(ctl.version()),
        sent: AtomicU64::new(0),
        stop_source: AtomicBool::new(false),
        stop_sinks: AtomicBool::new(false),
        sinks_ready: AtomicUsize::new(0),
        examples: Mutex::new(Vec::new()),
    };
    let n_changes = (o.update_rate * o.duration).ceil() as usize;
    let mut applied = 0usize;
    let mut column_deltas = vec![0u64; n];
    thread::scope(|sc| -> Result<()> {
        // Whatever ends this scope (an error included) stops the source
        // and the sinks, so that the scope can join them.
        let _stop = StopOnDrop(&sh);
        let sinks: Vec<_> = (0..nd)
            .map(|s| {
                let (sh, snk) = (&sh, lnet.snk.as_str());
                sc.spawn(move || sink_loop(sh, snk, s))
            })
            .collect();
        wait_ready(&sh.sinks_ready, nd);
        let source = {
            let (sh, src) = (&sh, lnet.src.as_str());
            sc.spawn(move || source_loop(sh, src, PHASE_TRAFFIC, None, rate, o.seed ^ 0x5eed))
        };
        // Live changes: move a random name to another sink, one change at
        // a time at --update-rate.
        let t0 = Instant::now();
        let mut renewed = Instant::now();
        while t0.elapsed().as_secs_f64() < o.duration && !stop.is_raised() {
            if renewed.elapsed() > Duration::from_millis(500) {
                ctl.renew().map_err(|e| anyhow!("controller: {e}"))?;
                renewed = Instant::now();
            }
            if applied < n_changes && (applied as f64) < t0.elapsed().as_secs_f64() * o.update_rate
            {
                let i = rng.gen_range(0..o.names);
                let old = usize::from(sh.history.last(i));
                let d = (old + rng.gen_range(1..nd)) % nd;
                let before: Vec<Action> = net.actions(old, i);
                let after = net.actions(d, i);
                let ch = NetworkChange::Set(name(i), after.clone());
                // In the history before any switch can have it.
                sh.history.dest[i]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((ctl.version() + 1, d as u8, Instant::now()));
                ctl.apply_lined(&[(1, &ch)])
                    .map_err(|e| anyhow!("controller: {e}"))?;
                for (c, (a, b)) in before.iter().zip(&after).enumerate() {
                    column_deltas[c] += u64::from(a != b);
                }
                sh.version.store(ctl.version(), Ordering::Release);
                applied += 1;
            } else {
                thread::sleep(Duration::from_micros(200));
            }
        }
        sh.stop_source.store(true, Ordering::Release);
        source.join().map_err(|_| anyhow!("source panicked"))??;
        step(
            "traffic",
            t,
            format_args!(
                "{} frames sent, {applied} changes published (version {})",
                sh.sent.load(Ordering::Relaxed),
                ctl.version()
            ),
        );
        // Every switch has the last change well within this.
        thread::sleep(Duration::from_millis(1500));
        sh.stop_source.store(false, Ordering::Release);
        let (shr, srcr) = (&sh, lnet.src.as_str());
        sc.spawn(move || source_loop(shr, srcr, PHASE_FINAL, Some(o.names), rate.max(10_000.0), 0))
            .join()
            .map_err(|_| anyhow!("source panicked"))??;
        thread::sleep(Duration::from_millis(1000));
        sh.stop_sinks.store(true, Ordering::Release);
        for s in sinks {
            s.join().map_err(|_| anyhow!("sink panicked"))??;
        }
        Ok(())
    })?;

    // Per-hop counts from the switches' metrics, checked against the sinks.
    let metrics: Vec<MetricsSnapshot> = thread::scope(|sc| {
        let hs: Vec<_> = lnet
            .nodes
            .iter()
            .map(|x| sc.spawn(move || settled_metrics(x, METRICS)))
            .collect();
        hs.into_iter()
            .zip(&lnet.nodes)
            .map(|(h, x)| {
                h.join()
                    .ok()
                    .flatten()
                    .ok_or_else(|| anyhow!("{x}: the switch's metrics did not settle"))
            })
            .collect::<Result<_>>()
    })?;
    let port_tx =
        |m: &MetricsSnapshot, p: u16| m.tx.iter().find(|x| x.port == p).map_or(0, |x| x.frames);
    let mut hop_mismatch = Vec::new();
    let mut hops = Vec::new();
    let at_sink = |d: usize| {
        let sc = &sh.sinks[d];
        sc.exact.load(Ordering::Relaxed)
            + sc.transition.load(Ordering::Relaxed)
            + sc.misforwarded.load(Ordering::Relaxed)
            + sc.final_frames.load(Ordering::Relaxed)
            + sc.ring_drops.load(Ordering::Relaxed)
            + sc.foreign.load(Ordering::Relaxed)
    };
    for (s, m) in metrics.iter().enumerate() {
        // What reached switch s: what each neighbour sent it (frames may
        // come back in a transient loop while a change propagates) and,
        // at the entry, what the source sent.
        let mut from = Vec::new();
        let mut tx = serde_json::Map::new();
        let mut sink = None;
        for (p, what) in net.ports(s) {
            let sent_here = port_tx(m, p);
            if sent_here > 0 || !matches!(what, Port::Tail) {
                tx.insert(p.to_string(), sent_here.into());
            }
            match what {
                Port::Link(b, pb) => from.push(port_tx(&metrics[b], pb)),
                Port::Source => from.push(sh.sent.load(Ordering::Relaxed)),
                Port::Sink(d) => {
                    let seen = at_sink(d);
                    if sent_here != seen {
                        hop_mismatch.push(format!(
                            "switch {s} sent {sent_here} frames to sink {d}, which saw {seen}"
                        ));
                    }
                    sink = Some((sent_here, seen));
                }
                Port::Tail if sent_here > 0 => hop_mismatch.push(format!(
                    "switch {s} sent {sent_here} frames to port {p}, which leads nowhere"
                )),
                Port::Tail => {}
            }
        }
        let total: u64 = from.iter().sum();
        if m.frames_in != total {
            hop_mismatch.push(format!(
                "switch {s} received {} frames, its neighbours sent it {from:?}",
                m.frames_in
            ));
        }
        let (to_sink, sink_received) = sink.unwrap_or((0, 0));
        let mut h = serde_json::json!({
            "switch": s, "frames_in": m.frames_in, "tx": tx, "to_sink": to_sink,
            "dropped": m.dropped, "sink_received": sink_received,
        });
        if net.topo == Topology::Line {
            h["to_left"] = port_tx(m, LEFT).into();
            h["to_right"] = port_tx(m, RIGHT).into();
        } else {
            h["role"] = if s < nd { "leaf" } else { "spine" }.into();
        }
        hops.push(h);
    }
    let sum = |f: fn(&SinkCounts) -> &AtomicU64| {
        sh.sinks
            .iter()
            .map(|c| f(c).load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let (exact, transition, misforwarded, final_frames) = (
        sum(|c| &c.exact),
        sum(|c| &c.transition),
        sum(|c| &c.misforwarded),
        sum(|c| &c.final_frames),
    );
    let final_wrong = (0..o.names)
        .filter(|&i| {
            sh.final_seen[i].load(Ordering::Relaxed) != 1 << sh.history.last(i)
                || sh.final_copies[i].load(Ordering::Relaxed) != 1
        })
        .count();
    let pass = misforwarded == 0 && final_wrong == 0 && hop_mismatch.is_empty() && exact > 0;
    let summary = serde_json::json!({
        "switches": n, "names": o.names, "topology": o.topology.name(),
        "redis": url, "fib": FIB,
        "changes": applied, "version": ctl.version(),
        "column_deltas": column_deltas,
        "sent": sh.sent.load(Ordering::Relaxed),
        "received_exact": exact, "received_in_transition": transition,
        "misforwarded": misforwarded,
        "final_wave": { "names": o.names, "received": final_frames, "wrong_or_missing": final_wrong },
        "per_hop": hops, "per_hop_mismatches": hop_mismatch,
        "examples": *sh.examples.lock().unwrap_or_else(|e| e.into_inner()),
        "result": if pass { "PASS" } else { "FAIL" },
    });
    fs::write(out.join("summary.json"), format!("{summary:#}\n"))?;
    ctl.release();
    drop(fwds);
    drop(lnet);
    say!(
        "nexthop lab summary ({n} switches, {}, FIB through Redis)",
        o.topology.name()
    );
    say!(
        "  changes      {applied} published (version {}), deltas per switch {column_deltas:?}",
        summary["version"]
    );
    say!("  traffic      {} sent: {exact} at the sink of their version, {transition} in transition, {misforwarded} misforwarded", summary["sent"]);
    say!(
        "  final wave   {final_frames} of {} names received, {final_wrong} wrong or missing",
        o.names
    );
    for h in &hops {
        say!("  hop          {h}");
    }
    super::finish_summary(&hop_mismatch, &summary, pass, o.json, &out, "network")
}

/// Run `f` while a thread renews `ctl`'s lease every `every` (the switches
/// of the network lab take seconds to start, each up to 60 s); an error
/// when a renewal failed (another controller holds the lease).
fn renewing<T: Send>(
    ctl: &mut RedisController<[u8; 6], NetworkFib<[u8; 6]>>,
    every: Duration,
    f: impl FnOnce() -> T,
) -> Result<T> {
    let done = AtomicBool::new(false);
    thread::scope(|sc| {
        let renewer = sc.spawn(|| -> Result<()> {
            let mut last = Instant::now();
            while !done.load(Ordering::Acquire) {
                thread::sleep(Duration::from_millis(20));
                if last.elapsed() >= every {
                    ctl.renew().map_err(|e| anyhow!("controller: {e}"))?;
                    last = Instant::now();
                }
            }
            Ok(())
        });
        let r = f();
        done.store(true, Ordering::Release);
        renewer
            .join()
            .map_err(|_| anyhow!("controller: the lease renewal thread panicked"))??;
        Ok(r)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_is_renewed_while_a_long_step_runs_and_lost_without_it() {
        let dir = std::env::temp_dir().join(format!("nh-lab-lease-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (_redis, url) = start_redis(&dir).unwrap();
        let key = write_key(&dir.join("controller.key")).unwrap();
        let fib = || {
            let routes = vec![(1, name(0), vec![Action::Port(1), Action::Port(2)])];
            NetworkFib::build(
                Config {
                    columns: 2,
                    ..Config::default()
                },
                &routes,
            )
            .unwrap()
        };
        let acquire = |prefix: &str| {
            let mut c = RedisControllerConfig::new(url.as_str(), prefix);
            c.log = false;
            c.lease = Duration::from_millis(600);
            RedisController::<[u8; 6], NetworkFib<[u8; 6]>>::acquire(
                &key,
                c,
                fib(),
                0,
                &AtomicBool::new(false),
            )
            .unwrap()
        };
        // A step three leases long: renewed meanwhile, the lease is still
        // ours after it.
        let mut ctl = acquire("renewed");
        let r = renewing(&mut ctl, Duration::from_millis(150), || {
            thread::sleep(Duration::from_millis(1800));
            7
        });
        assert_eq!(r.unwrap(), 7);
        ctl.renew().unwrap();
        // The same step without renewal: the lease ran out.
        let mut lapsed = acquire("lapsed");
        thread::sleep(Duration::from_millis(1800));
        assert!(lapsed.renew().is_err());
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_frame_may_reach_older_destinations_only_within_the_switch_lag() {
        let t = Instant::now();
        let ms = |m| t + Duration::from_millis(m);
        // Name moved 0 -> 1 (v3, at 100 ms) -> 2 (v5, at 200 ms) -> 3 (v9, at 1 s).
        let h = [
            (0, 0, t),
            (3, 1, ms(100)),
            (5, 2, ms(200)),
            (9, 3, ms(1000)),
        ];
        // Sent under v5, arriving at 250 ms: exact 2; 1 just before; 0
        // replaced 150 ms ago; 3 later.
        assert_eq!(allowed_in(&h, 5, ms(250)), Some((2, vec![1, 0, 3])));
        // Arriving at 700 ms: 0 was replaced 600 ms ago, past the lag; the
        // one just before v5 stays allowed whatever the time.
        assert_eq!(allowed_in(&h, 5, ms(700)), Some((2, vec![1, 3])));
        assert_eq!(allowed_in(&h, 6, ms(5000)), Some((2, vec![1, 3])));
        assert_eq!(allowed_in(&h, 9, ms(1100)), Some((3, vec![2])));
        assert_eq!(allowed_in(&h, 0, ms(0)), Some((0, vec![1, 2, 3])));
        assert_eq!(allowed_in(&[], 0, t), None);
    }
}
