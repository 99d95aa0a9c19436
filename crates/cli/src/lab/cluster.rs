//! `nexthop lab --cluster N`: a flat-name FIB split over N live nodes
//! (`nexthop cluster run`), every frame checked.
//!
//! ```text
//!            src namespace: e0 e1 .. e(N-1)   (one link into each node)
//!                            |  |       |
//!   node k:  port 1 = in (outside input)
//!            ports 2, 3    = o2, o3 -> sink namespace k{k}p2, k{k}p3
//!            port 10 + j   = c{j}: the internal link to node j (a full
//!                            mesh of veth pairs)
//! ```
//!
//! The lab builds a cluster directory (`nexthop cluster build`'s layout)
//! of `--names` MAC names, each sent to port 2 or 3 of its owner, and
//! starts one `nexthop cluster run` per node in its namespace. The source
//! sends one frame for every name into every node (frame tag: the entry
//! node; the frames go out interleaved at `--rate`). A frame entering at
//! a node that does not own its name crosses exactly one internal link,
//! to the owner, which sends it out of the name's port. Every sink checks
//! each frame: it must be at the owner of its name, on the name's port;
//! and every (name, entry node) frame must arrive exactly once. The
//! nodes' own summaries must count as many hand-overs (frames sent on
//! internal links, and received from them) as frames entered away from
//! their owner, and so must each node's metrics endpoint (`--metrics`,
//! `cluster_handed_over_frames_total`, read with `nexthop stats` in the
//! node's namespace before the nodes stop).
//!
//! Latency: each frame carries its send time (the lab's monotonic clock,
//! shared by every namespace); the sinks' receive times give the one-way
//! latency, split by frames that entered at their owner (no internal hop)
//! and the others (one hop). Both go through AF_PACKET rings (1 ms block
//! timeout at the nodes, 1 ms at the sinks), so the figures are those of
//! this lab's I/O, not of a NIC path; their difference is the hop's cost
//! here.

use crate::textio::say;
use std::fs;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nexthop_dataplane::afpacket::TxPort;
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::metrics::MetricsSnapshot;
use nexthop_dataplane::netns;
use nexthop_othello::cluster::{self, node_of};
use nexthop_othello::fib::{Action, KeyType};
use nexthop_othello::Config;
use rand::{Rng, SeedableRng};

use super::frame::{parse_frame, write_frame, FRAME_LEN, PHASE_TRAFFIC};
use super::live::field;
use super::sink::{read_sink, wait_ready};
use super::topo::{At, LabNet};
use super::{step, LabOpts};

/// Fewest and most nodes.
pub(crate) const NODES: std::ops::RangeInclusive<usize> = 4..=16;
/// Most names of a cluster lab (every name is sent into every node).
const MAX_NAMES: usize = 1 << 18;
/// Names of a cluster lab when `--names` is not given.
pub const DEFAULT_NAMES: usize = 4096;
/// A node's outside input and its output ports.
const IN: u16 = 1;
const OUT: [u16; 2] = [2, 3];
/// Node k's internal link to node j is port `PEER_BASE + j`.
const PEER_BASE: u16 = 10;
/// Where a frame's send time (ns since the lab's start) is written.
const SENT_AT: std::ops::Range<usize> = 27..35;

fn name(i: usize) -> [u8; 6] {
    let b = (i as u32).to_be_bytes();
    [0x02, 0x63, b[0], b[1], b[2], b[3]]
}

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    misforwarded: AtomicU64,
    foreign: AtomicU64,
    ring_drops: AtomicU64,
}

struct Shared {
    nodes: usize,
    /// Per name: its owner and its port.
    owner: Vec<u8>,
    port: Vec<u16>,
    /// Per (name, entry node): copies received at the right place.
    seen: Vec<AtomicU8>,
    /// Per (node, output port index).
    sinks: Vec<Counts>,
    /// One-way latencies in ns: frames that entered at their owner, and
    /// frames that crossed an internal link.
    direct: Mutex<Vec<u64>>,
    hopped: Mutex<Vec<u64>>,
    t0: Instant,
    sent: AtomicU64,
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

/// Raises the sinks' stop flag when dropped.
struct StopOnDrop<'a>(&'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop_sinks.store(true, Ordering::Release);
    }
}

/// Sink of node `k`'s output port `OUT[o]`.
fn sink_loop(sh: &Shared, ns: &str, k: usize, o: usize) -> Result<()> {
    let st = &sh.sinks[k * OUT.len() + o];
    let p = OUT[o];
    let (mut direct, mut hopped) = (Vec::new(), Vec::new());
    let drops = read_sink(
        ns,
        &format!("k{k}p{p}"),
        8,
        &sh.stop_sinks,
        &sh.sinks_ready,
        |frames| {
            let now = sh.t0.elapsed().as_nanos() as u64;
            for f in frames {
                let Some(lf) = parse_frame(f) else {
                    st.foreign.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let (i, e) = (lf.idx as usize, lf.tag as usize);
                let right = lf.phase == PHASE_TRAFFIC
                    && i < sh.owner.len()
                    && e < sh.nodes
                    && lf.dst == name(i)
                    && usize::from(sh.owner[i]) == k
                    && sh.port[i] == p;
                if !right {
                    st.misforwarded.fetch_add(1, Ordering::Relaxed);
                    sh.example(format!(
                    "name #{i} (entered at node {e}) left node {k} port {p}; owner {:?} port {:?}",
                    sh.owner.get(i),
                    sh.port.get(i)
                ));
                    continue;
                }
                st.ok.fetch_add(1, Ordering::Relaxed);
                sh.seen[i * sh.nodes + e].fetch_add(1, Ordering::Relaxed);
                if let Some(b) = f.get(SENT_AT) {
                    let mut t = [0u8; 8];
                    t.copy_from_slice(b);
                    let lat = now.saturating_sub(u64::from_le_bytes(t));
                    if e == k {
                        direct.push(lat);
                    } else {
                        hopped.push(lat);
                    }
                }
            }
        },
    )?;
    st.ring_drops.store(drops, Ordering::Relaxed);
    sh.direct
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(direct);
    sh.hopped
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(hopped);
    Ok(())
}

/// Send one frame per (name, entry node), at `rate` frames per second.
fn source_loop(sh: &Shared, ns: &str, rate: f64) -> Result<()> {
    netns::enter(ns)?;
    let mut tx: Vec<TxPort> = (0..sh.nodes)
        .map(|e| TxPort::open(&format!("e{e}")))
        .collect::<Result<_, _>>()?;
    const BURST: usize = 16;
    let mut bufs = vec![[0u8; FRAME_LEN]; BURST];
    let names = sh.owner.len();
    let start = Instant::now();
    let mut sent = 0usize;
    let mut i = 0usize;
    while i < names {
        if (sent as f64) >= start.elapsed().as_secs_f64() * rate {
            thread::sleep(Duration::from_micros(200));
            continue;
        }
        let burst = BURST.min(names - i);
        for (e, port) in tx.iter_mut().enumerate() {
            for (k, b) in bufs.iter_mut().take(burst).enumerate() {
                write_frame(b, &name(i + k), PHASE_TRAFFIC, (i + k) as u32, e as u32);
                let at = sh.t0.elapsed().as_nanos() as u64;
                b[SENT_AT].copy_from_slice(&at.to_le_bytes());
            }
            let out = port.send_batch(&bufs[..burst]);
            sh.sent.fetch_add(out.sent as u64, Ordering::Relaxed);
            sent += burst;
        }
        i += burst;
    }
    Ok(())
}

/// Median and 99th percentile of `v` in microseconds (`v` sorted here).
fn quantiles(v: &mut [u64]) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::Value::Null;
    }
    v.sort_unstable();
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize] as f64 / 1000.0;
    serde_json::json!({"frames": v.len(), "median_us": q(0.5), "p99_us": q(0.99)})
}

/// `nexthop lab --cluster N`.
/// Every node serves `--metrics` here, on its own namespace's loopback.
const METRICS_ADDR: &str = "127.0.0.1:19465";

/// Read node namespace `ns`'s metrics (`nexthop stats --json` in the
/// namespace) until `cluster_handed_over_frames_total` is `expected` (the
/// endpoint publishes once a second), for at most 3 s.
fn scrape_handed_over(exe: &std::path::Path, ns: &str, expected: u64) -> Result<()> {
    let end = Instant::now() + Duration::from_secs(3);
    loop {
        let out = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args(["stats", "--json", "--addr", METRICS_ADDR])
            .output()
            .context("running nexthop stats")?;
        let got = if out.status.success() {
            let text = String::from_utf8_lossy(&out.stdout);
            let snap =
                MetricsSnapshot::from_json(text.trim()).map_err(|e| anyhow!("stats JSON: {e}"))?;
            snap.extra
                .iter()
                .find(|m| m.name == "cluster_handed_over_frames_total")
                .map(|m| m.value as u64)
        } else {
            None
        };
        if got == Some(expected) {
            return Ok(());
        }
        if Instant::now() >= end {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            bail!("cluster_handed_over_frames_total {got:?}, expected {expected} {err}");
        }
        thread::sleep(Duration::from_millis(200));
    }
}

pub(crate) fn run(o: &LabOpts, stop: &StopFlag) -> Result<()> {
    let n = o.cluster;
    if !NODES.contains(&n) {
        bail!(
            "--cluster {n}: expected {} to {}",
            NODES.start(),
            NODES.end()
        );
    }
    if o.names > MAX_NAMES {
        bail!(
            "--names {}: a cluster lab takes at most {MAX_NAMES}",
            o.names
        );
    }
    if !netns::is_root() {
        bail!("--cluster needs network namespaces, which need root");
    }
    let t = Instant::now();
    let rate = if o.rate > 0.0 { o.rate } else { 20_000.0 };
    let out = fs::canonicalize(&o.out)?;
    say!(
        "nexthop lab: a FIB of {} names split over {n} nodes; every name sent into every node \
         ({} frames at {rate:.0} frames/s), seed {}",
        o.names,
        o.names * n,
        o.seed
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(o.seed);
    let ports: Vec<u16> = (0..o.names)
        .map(|_| OUT[rng.gen_range(0..OUT.len())])
        .collect();
    let routes: Vec<(usize, [u8; 6], Action)> = ports
        .iter()
        .enumerate()
        .map(|(i, &p)| (i + 1, name(i), Action::Port(p)))
        .collect();
    let dir = out.join("cluster");
    let report = cluster::build(&dir, KeyType::Mac, Config::default(), &routes, n)
        .map_err(|e| anyhow!("{}: {e}", dir.display()))?;
    let owner: Vec<u8> = (0..o.names).map(|i| node_of(&name(i), n) as u8).collect();
    step(
        "cluster",
        t,
        format_args!(
            "{}: owner map {} B (l = {}, packed), nodes {:?} names",
            dir.display(),
            report.owner_bytes,
            report.owner_value_bits,
            report.node.iter().map(|x| x.names).collect::<Vec<_>>()
        ),
    );

    // Namespaces and links.
    let net = LabNet::create("nhcl", "n", n)?;
    for k in 0..n {
        net.link(At::Src, &format!("e{k}"), At::Node(k), "in")?;
        for p in OUT {
            net.link(At::Node(k), &format!("o{p}"), At::Snk, &format!("k{k}p{p}"))?;
        }
        for j in k + 1..n {
            net.link(At::Node(k), &format!("c{j}"), At::Node(j), &format!("c{k}"))?;
        }
    }

    // The nodes.
    let exe = std::env::current_exe().context("locating the nexthop binary")?;
    let mut fwds = net.start(&exe, &out, "node", "node", stop, |k, cmd| {
        cmd.args(["cluster", "run", "--cluster"])
            .arg(&dir)
            .args(["--node", &k.to_string(), "--in", &IN.to_string(), "--quiet"])
            .args(["--metrics", METRICS_ADDR])
            .args(["--port", &format!("{IN}=in")]);
        for p in OUT {
            cmd.args(["--port", &format!("{p}=o{p}")]);
        }
        for j in (0..n).filter(|&j| j != k) {
            let pp = PEER_BASE + j as u16;
            cmd.args([
                "--port",
                &format!("{pp}=c{j}"),
                "--peer",
                &format!("{j}={pp}"),
            ]);
        }
    })?;
    step(
        "nodes",
        t,
        format_args!(
            "{n} x nexthop cluster run --cluster {} --node K",
            dir.display()
        ),
    );

    let sh = Shared {
        nodes: n,
        owner,
        port: ports,
        seen: (0..o.names * n).map(|_| AtomicU8::new(0)).collect(),
        sinks: (0..n * OUT.len()).map(|_| Counts::default()).collect(),
        direct: Mutex::new(Vec::new()),
        hopped: Mutex::new(Vec::new()),
        t0: Instant::now(),
        sent: AtomicU64::new(0),
        stop_sinks: AtomicBool::new(false),
        sinks_ready: AtomicUsize::new(0),
        examples: Mutex::new(Vec::new()),
    };
    thread::scope(|sc| -> Result<()> {
        let _stop = StopOnDrop(&sh);
        let sinks: Vec<_> = (0..n * OUT.len())
            .map(|x| {
                let (sh, snk) = (&sh, net.snk.as_str());
                sc.spawn(move || sink_loop(sh, snk, x / OUT.len(), x % OUT.len()))
            })
            .collect();
        wait_ready(&sh.sinks_ready, n * OUT.len());
        let (shr, srcr) = (&sh, net.src.as_str());
        sc.spawn(move || source_loop(shr, srcr, rate))
            .join()
            .map_err(|_| anyhow!("source panicked"))??;
        step(
            "traffic",
            t,
            format_args!("{} frames sent", sh.sent.load(Ordering::Relaxed)),
        );
        thread::sleep(Duration::from_millis(1000));
        sh.stop_sinks.store(true, Ordering::Release);
        for s in sinks {
            s.join().map_err(|_| anyhow!("sink panicked"))??;
        }
        Ok(())
    })?;

    // Every node's metrics endpoint counts the frames it handed over.
    let mut node_mismatch = Vec::new();
    for (k, x) in net.nodes.iter().enumerate() {
        let expected = (0..o.names)
            .filter(|&i| usize::from(sh.owner[i]) != k)
            .count() as u64;
        if let Err(e) = scrape_handed_over(&exe, x, expected) {
            node_mismatch.push(format!("node {k} metrics: {e}"));
        }
    }

    // Stop the nodes (SIGTERM: each prints its summary) and read them.
    let mut per_node = Vec::new();
    let mut handed_total = 0u64;
    let mut from_cluster_total = 0u64;
    for (k, node) in fwds.iter_mut().enumerate() {
        let Some(c) = node.child.0.as_mut() else {
            continue;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while c.try_wait()?.is_none() && Instant::now() < end {
            thread::sleep(Duration::from_millis(20));
        }
        let text = fs::read_to_string(&node.out).unwrap_or_default();
        let num = |key: &str| field(&text, key).and_then(|v| v.parse::<u64>().ok());
        let (Some(frames_in), Some(handed), Some(from_cluster), Some(forwarded)) = (
            num("frames_in"),
            num("handed_over"),
            num("from_cluster"),
            num("forwarded"),
        ) else {
            node_mismatch.push(format!("node {k} printed no summary: {text:?}"));
            continue;
        };
        // Frames entering at node k away from their owner: handed over.
        let expected = (0..o.names)
            .filter(|&i| usize::from(sh.owner[i]) != k)
            .count() as u64;
        if handed != expected {
            node_mismatch.push(format!(
                "node {k} handed over {handed} frames; {expected} entered there away from their owner"
            ));
        }
        handed_total += handed;
        from_cluster_total += from_cluster;
        per_node.push(serde_json::json!({
            "node": k, "names": report.node[k].names, "frames_in": frames_in,
            "handed_over": handed, "from_cluster": from_cluster, "forwarded": forwarded,
        }));
    }
    if handed_total != from_cluster_total {
        node_mismatch.push(format!(
            "{handed_total} frames handed over, {from_cluster_total} received from internal links"
        ));
    }
    let sum = |f: fn(&Counts) -> &AtomicU64| {
        sh.sinks
            .iter()
            .map(|c| f(c).load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let (ok, misforwarded, ring_drops) = (
        sum(|c| &c.ok),
        sum(|c| &c.misforwarded),
        sum(|c| &c.ring_drops),
    );
    let (mut missing, mut duplicated) = (0u64, 0u64);
    for s in &sh.seen {
        match s.load(Ordering::Relaxed) {
            0 => missing += 1,
            1 => {}
            _ => duplicated += 1,
        }
    }
    let sent = sh.sent.load(Ordering::Relaxed);
    let frames = (o.names * n) as u64;
    let pass = misforwarded == 0
        && missing == 0
        && duplicated == 0
        && sent == frames
        && node_mismatch.is_empty();
    let direct = quantiles(&mut sh.direct.lock().unwrap_or_else(|e| e.into_inner()));
    let hopped = quantiles(&mut sh.hopped.lock().unwrap_or_else(|e| e.into_inner()));
    let summary = serde_json::json!({
        "cluster": n, "names": o.names, "cluster_dir": dir.display().to_string(),
        "owner_map_bytes": report.owner_bytes, "owner_value_bits": report.owner_value_bits,
        "frames": frames, "sent": sent, "received_ok": ok, "misforwarded": misforwarded,
        "missing": missing, "duplicated": duplicated, "ring_drops": ring_drops,
        "foreign": sum(|c| &c.foreign),
        "handed_over": handed_total, "from_cluster": from_cluster_total,
        "per_node": per_node, "per_node_mismatches": node_mismatch,
        "latency": { "entered_at_owner": direct, "one_internal_hop": hopped, "rate": rate },
        "examples": *sh.examples.lock().unwrap_or_else(|e| e.into_inner()),
        "result": if pass { "PASS" } else { "FAIL" },
    });
    fs::write(out.join("summary.json"), format!("{summary:#}\n"))?;
    drop(fwds);
    drop(net);
    say!("nexthop lab summary (a FIB split over {n} nodes)");
    say!(
        "  traffic      {sent} of {frames} frames sent: {ok} left the owner on the name's port, \
         {misforwarded} misforwarded, {missing} missing, {duplicated} duplicated"
    );
    say!("  hand-overs   {handed_total} sent on internal links, {from_cluster_total} received");
    for p in &per_node {
        say!("  node         {p}");
    }
    say!("  latency      at the owner {direct}, one internal hop {hopped}");
    super::finish_summary(&node_mismatch, &summary, pass, o.json, &out, "cluster")
}
