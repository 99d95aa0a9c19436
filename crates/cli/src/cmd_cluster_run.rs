//! `nexthop cluster run`: one live node of a FIB split across a cluster
//! (see `nexthop_othello::cluster`).
//!
//! Node K of a cluster directory holds the owner map (every name to its
//! owner node) and its own partition's FIB. Its ports are of two kinds:
//!
//! * **outside ports** (`--port P=IFACE`, inputs named with `--in`): a
//!   frame received there is looked up in the owner map; a frame whose
//!   owner is another node J is sent unchanged out of the internal link to
//!   J (`--peer J=P`), one owned here (or one the owner map cannot place:
//!   unframeable) is decided by K's own FIB and sent out of its ports;
//! * **cluster ports** (the `--peer` ports, always inputs): a frame
//!   received there was handed over by another node, so it is owned here
//!   by construction. It is decided by K's own FIB only and never handed
//!   on, so a frame crosses at most one internal link (no loops even if two
//!   nodes disagreed about ownership). The ingress port is the mark: no
//!   encapsulation, the frame on an internal link is the frame as it
//!   arrived.
//!
//! Counters: the frames K decides with its own FIB are counted by that FIB's
//! pipeline; the frames handed over are counted by a second pipeline over
//! the owner map whose actions are the peer ports (a frame handed to J is
//! "forwarded" on J's port). That costs a second owner-map lookup of each
//! handed-over frame (the first, uncounted, only splits the group), which
//! keeps every frame counted exactly once in the run's summary.
//!
//! `--metrics ADDR` serves these counters as `nexthop run` does
//! (`/metrics`, Prometheus text, and `/stats.json`, once a second): frames
//! in, forwarded, dropped, per port, plus `cluster_handed_over_frames_total`
//! (sent to their owner on an internal link) and
//! `cluster_from_cluster_frames_total` (received from one).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use nexthop_dataplane::afpacket::{FanoutMode, RingConfig};
use nexthop_dataplane::engine::{
    io_list, open_ports, progress_line, summary_line, Engine, EngineConfig, IoMode, NoRefresh,
    Outputs, PortsConfig, Report, Stage, Worker, XdpAttach,
};
use nexthop_dataplane::live::{PortStats, StopAfter, StopFlag};
use nexthop_dataplane::metrics::{MetricsSnapshot, SharedSnapshot};
use nexthop_dataplane::{
    Counters, Decision, Egress, FrameBuf, MissPolicy, NameSource, Pipeline, PipelineConfig,
};
use nexthop_othello::cluster::{self, PackedOwnerMap};
use nexthop_othello::fib::{Action, ActionTable};
use nexthop_othello::{MappedQuery, QueryView};

use crate::cmd_cluster::{open_owner, OwnerTable};
use crate::cmd_fib::{open_lookup, LookupFib};
use crate::cmd_run::PortMap;

/// `J=P`: the internal link to node `J` is port `P`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerMap {
    node: usize,
    port: u16,
}

impl FromStr for PeerMap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (j, p) = s
            .split_once('=')
            .ok_or_else(|| format!("'{s}' is not NODE=PORT (e.g. 1=11)"))?;
        let node = j
            .parse::<usize>()
            .map_err(|_| format!("'{j}' in '{s}' is not a node index"))?;
        let port = p
            .parse::<u16>()
            .map_err(|_| format!("'{p}' in '{s}' is not a port number (0 to 65535)"))?;
        Ok(PeerMap { node, port })
    }
}

/// `nexthop cluster run` arguments.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Cluster directory (made by `nexthop cluster build`).
    #[arg(long, value_name = "DIR")]
    cluster: PathBuf,
    /// This node's index (0 to N-1).
    #[arg(long, value_name = "K")]
    node: usize,
    /// Map port N to interface IFACE (repeatable): every port of this
    /// node's FIB, every --peer port and every --in port.
    #[arg(long = "port", value_name = "N=IFACE")]
    ports: Vec<PortMap>,
    /// The internal link to node J is port P (repeatable; one per other
    /// node). Frames received on it are owned here and never handed on.
    #[arg(long = "peer", value_name = "J=P")]
    peers: Vec<PeerMap>,
    /// Outside input port (repeatable; default port 0). The --peer ports
    /// are inputs too.
    #[arg(long = "in", value_name = "N")]
    inputs: Vec<u16>,
    /// Worker threads (each with its own rings, in a fanout group).
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// The name of a frame, as for `nexthop run`.
    #[arg(long, value_name = "SOURCE", default_value = "dst-mac")]
    name: NameSource,
    /// Unknown names: drop or controller (flood is refused: a node's FIB
    /// knows only its partition's ports).
    #[arg(long, value_name = "POLICY", default_value = "drop")]
    miss: MissPolicy,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Serve the counters at http://ADDR/metrics (Prometheus text) and
    /// /stats.json, as `nexthop run --metrics`. Loopback only unless
    /// --metrics-allow-remote.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Allow --metrics on an address that is not loopback.
    #[arg(long)]
    metrics_allow_remote: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
}

/// The stage of one cluster node (see the module docs).
pub struct ClusterStage<'a> {
    /// Owner map with peer-port actions, uncounted: splits each group.
    owner: Pipeline<&'a PackedOwnerMap>,
    /// The same, counting the frames handed over.
    hand: Pipeline<&'a PackedOwnerMap>,
    /// This node's FIB.
    local: Pipeline<QueryView<'a>>,
    /// Ports whose frames come from other nodes (indexed by port).
    from_cluster: Vec<bool>,
    /// Every port the stage sends on, sorted.
    ports: Vec<u16>,
    /// The two counting pipelines' counters, merged after each group.
    counters: Counters,
}

impl std::fmt::Debug for ClusterStage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterStage")
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// Buffers of a [`ClusterStage`] kept from one group to the next.
#[derive(Debug, Default)]
pub struct ClusterScratch {
    decisions: Vec<Decision>,
    handed: FrameBuf,
    kept: FrameBuf,
}

/// The owner map's action table for node `me`: owner `J` becomes
/// `Port(peer port of J)`, `me` becomes `Drop` (kept here). The ids are the
/// owner map's own, in the same order.
///
/// # Errors
/// An owner action that is not `port J` with `J` a node, a node other than
/// `me` without a peer port, or two owners on one peer port.
pub fn owner_actions(
    owner: &ActionTable,
    nodes: usize,
    me: usize,
    peers: &BTreeMap<usize, u16>,
) -> Result<ActionTable> {
    let mut t = ActionTable::new();
    for (id, a) in owner.iter() {
        let j = match a {
            Action::Port(j) if usize::from(*j) < nodes => usize::from(*j),
            other => {
                bail!("owner map: action {id} is {other}, not the port of a node below {nodes}")
            }
        };
        let mapped = if j == me {
            Action::Drop
        } else {
            match peers.get(&j) {
                Some(&p) => Action::Port(p),
                None => bail!("node {j} owns names but has no --peer {j}=PORT"),
            }
        };
        let got = t.intern(&mapped, u64::MAX)?;
        if got != id {
            bail!("owner map: two owners share one peer port ({mapped})");
        }
    }
    Ok(t)
}

impl<'a> ClusterStage<'a> {
    /// A stage over `owner` (the owner map's table and its peer-port
    /// actions from [`owner_actions`]) and `local` (this node's FIB),
    /// receiving from other nodes on `cluster_ports`.
    ///
    /// # Errors
    /// A pipeline the tables refuse (key type and name source disagree).
    pub fn new(
        owner: (&'a PackedOwnerMap, &ActionTable),
        local: (&'a MappedQuery, &ActionTable),
        key_type: nexthop_othello::fib::KeyType,
        cfg: PipelineConfig,
        cluster_ports: &BTreeSet<u16>,
    ) -> Result<Self> {
        let owner_pipe = Pipeline::new(owner.0, owner.1, key_type, cfg)?;
        let hand = Pipeline::new(owner.0, owner.1, key_type, cfg)?;
        let local = Pipeline::new(local.0.view(), local.1, key_type, cfg)?;
        let mut ports: BTreeSet<u16> = local.ports().iter().copied().collect();
        ports.extend(hand.ports().iter().copied());
        let mut from_cluster = Vec::new();
        for &p in cluster_ports {
            let i = usize::from(p);
            if from_cluster.len() <= i {
                from_cluster.resize(i + 1, false);
            }
            from_cluster[i] = true;
        }
        Ok(ClusterStage {
            owner: owner_pipe,
            hand,
            local,
            from_cluster,
            ports: ports.into_iter().collect(),
            counters: Counters::default(),
        })
    }

    fn merge_counters(&mut self) {
        let mut c = self.hand.counters().clone();
        c.merge(self.local.counters());
        self.counters = c;
    }
}

impl Stage for ClusterStage<'_> {
    type Scratch = ClusterScratch;

    fn ports(&self) -> &[u16] {
        &self.ports
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn take_counters(&mut self) -> Counters {
        self.hand.take_counters();
        self.local.take_counters();
        std::mem::take(&mut self.counters)
    }

    fn set_counters(&mut self, counters: Counters) {
        self.hand.take_counters();
        self.local.set_counters(counters);
        self.merge_counters();
    }

    fn forward_group<'b>(
        &mut self,
        s: &mut ClusterScratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    ) {
        self.route(s, in_port, group, lists, |p| out.refuse(p, 1));
        out.send_lists(lists);
    }
}

impl ClusterStage<'_> {
    /// Decide for one group received on `in_port` and push every frame
    /// onto the list of each port it leaves by (a peer port for a frame
    /// handed over); `refuse(p)` for a port beyond the lists.
    fn route<'b>(
        &mut self,
        s: &mut ClusterScratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        mut refuse: impl FnMut(u16),
    ) {
        let mut push = |lists: &mut [Vec<&'b [u8]>], f: &'b [u8], ports: &[u16]| {
            for &p in ports {
                match lists.get_mut(usize::from(p)) {
                    Some(list) => list.push(f),
                    None => refuse(p),
                }
            }
        };
        let from_cluster = self
            .from_cluster
            .get(usize::from(in_port))
            .copied()
            .unwrap_or(false);
        let mut handed = s.handed.take();
        let mut kept = s.kept.take();
        if from_cluster {
            // Handed over by another node: owned here, decided here.
            kept.extend_from_slice(group);
        } else {
            self.owner.process(in_port, group, &mut s.decisions);
            for (f, d) in group.iter().zip(&s.decisions) {
                match d {
                    Decision::Port(_) => handed.push(*f),
                    _ => kept.push(*f),
                }
            }
        }
        if !handed.is_empty() {
            self.hand.process(in_port, &handed, &mut s.decisions);
            for (f, d) in handed.iter().zip(&s.decisions) {
                if let Egress::Ports(ps) = self.hand.egress(d) {
                    push(lists, f, ps);
                }
            }
        }
        if !kept.is_empty() {
            self.local.process(in_port, &kept, &mut s.decisions);
            for (f, d) in kept.iter().zip(&s.decisions) {
                if let Egress::Ports(ps) = self.local.egress(d) {
                    push(lists, f, ps);
                }
            }
        }
        s.handed.put(handed);
        s.kept.put(kept);
        self.merge_counters();
    }
}

/// Open the cluster's tables for node `a.node` and check the ports.
fn open(a: &RunArgs) -> Result<(cluster::ClusterManifest, OwnerTable, LookupFib)> {
    let m = cluster::open_manifest(&a.cluster).map_err(|e| anyhow!("{e}"))?;
    if a.node >= m.nodes {
        bail!(
            "--node {}: the cluster {} has nodes 0 to {}",
            a.node,
            a.cluster.display(),
            m.nodes - 1
        );
    }
    let owner = open_owner(&a.cluster, &m)?;
    let local = open_lookup(&cluster::node_dir(&a.cluster, a.node))?;
    Ok((m, owner, local))
}

/// `nexthop cluster run`.
pub fn run(a: &RunArgs) -> Result<()> {
    if a.miss == MissPolicy::Flood {
        bail!("--miss flood: not supported by a cluster node (its FIB knows only its partition's ports); use drop or controller");
    }
    if a.workers == 0 || a.workers > crate::cmd_run::MAX_WORKERS {
        bail!(
            "--workers {}: give 1 to {}",
            a.workers,
            crate::cmd_run::MAX_WORKERS
        );
    }
    let after = StopAfter {
        duration: match a.duration {
            Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => bail!("--duration {s}: expected a positive number of seconds"),
            None => None,
        },
        frames: None,
    };
    let (m, owner, local) = open(a)?;
    let by_port = crate::cmd_run::port_table(&a.ports)?;
    let mut peers = BTreeMap::new();
    for p in &a.peers {
        if p.node >= m.nodes || p.node == a.node {
            bail!(
                "--peer {}={}: give another node of 0..{} (this is node {})",
                p.node,
                p.port,
                m.nodes,
                a.node
            );
        }
        if peers.insert(p.node, p.port).is_some() {
            bail!("--peer {}: node {} is given twice", p.node, p.node);
        }
        if !by_port.contains_key(&p.port) {
            bail!(
                "--peer {}={}: port {} has no interface (add --port {}=IFACE)",
                p.node,
                p.port,
                p.port,
                p.port
            );
        }
    }
    let cluster_ports: BTreeSet<u16> = peers.values().copied().collect();
    if cluster_ports.len() != peers.len() {
        bail!("--peer: two nodes share one port");
    }
    let outside: BTreeSet<u16> = if a.inputs.is_empty() {
        BTreeSet::from([0])
    } else {
        a.inputs.iter().copied().collect()
    };
    for p in &outside {
        if cluster_ports.contains(p) {
            bail!("--in {p}: port {p} is a --peer port (an internal link), not an outside input");
        }
        if !by_port.contains_key(p) {
            bail!("--in {p}: port {p} has no interface (add --port {p}=IFACE)");
        }
    }
    let inputs: BTreeSet<u16> = outside.union(&cluster_ports).copied().collect();
    let hand_actions = owner_actions(&owner.actions, m.nodes, a.node, &peers)?;
    let key_type = local.current.key_type;
    if owner.key_type != key_type {
        bail!(
            "{}: the owner map and node {}'s FIB have different key types",
            a.cluster.display(),
            a.node
        );
    }
    let cfg = PipelineConfig {
        name: a.name,
        miss: a.miss,
        ..PipelineConfig::default()
    };
    let mut stages = Vec::with_capacity(a.workers);
    for _ in 0..a.workers {
        stages.push(
            ClusterStage::new(
                (&owner.map, &hand_actions),
                (&local.mapped, &local.actions),
                key_type,
                cfg,
                &cluster_ports,
            )
            .with_context(|| format!("{}", a.cluster.display()))?,
        );
    }
    let missing: Vec<String> = stages[0]
        .ports()
        .iter()
        .filter(|p| !by_port.contains_key(p))
        .map(u16::to_string)
        .collect();
    if !missing.is_empty() {
        bail!(
            "node {}'s FIB sends to port(s) {} with no interface (add --port N=IFACE)",
            a.node,
            missing.join(",")
        );
    }
    let ports_cfg = PortsConfig {
        workers: a.workers,
        io: IoMode::Afpacket,
        xdp_attach: XdpAttach::default(),
        xdp_queue: 0,
        ring: RingConfig::default(),
        fanout: FanoutMode::Hash,
        fanout_group_base: (std::process::id() & 0x7fff) as u16,
    };
    let stop = StopFlag::install().map_err(|e| anyhow!("installing signal handlers: {e}"))?;
    let worker_ports = open_ports(&by_port, &inputs, &ports_cfg)?;
    let io_names = io_list(&worker_ports[0], by_port.keys().copied());
    let show = |ps: &dyn Fn(u16) -> bool| {
        by_port
            .iter()
            .filter(|(p, _)| ps(**p))
            .map(|(p, i)| format!("{p}={i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let out_ports = stages[0].ports().to_vec();
    // The readiness line (scripts and the lab wait for "forwarding").
    eprintln!(
        "nexthop cluster run: forwarding node={} nodes={} in={} cluster={} out={} io={io_names} workers={} (Ctrl-C stops)",
        a.node,
        m.nodes,
        show(&|p| outside.contains(&p)),
        show(&|p| cluster_ports.contains(&p)),
        show(&|p| out_ports.contains(&p)),
        a.workers
    );
    let workers: Vec<Worker<ClusterStage<'_>>> = stages
        .into_iter()
        .zip(worker_ports)
        .map(|(pipeline, ports)| Worker {
            pipeline,
            ports,
            cpu: None,
        })
        .collect();
    let shared = SharedSnapshot::new();
    let _metrics_server =
        crate::cmd_run::start_metrics(a.metrics, a.metrics_allow_remote, &shared)?;
    let engine = Engine::new(EngineConfig {
        after,
        report_every: (!a.quiet || a.metrics.is_some()).then_some(Duration::from_secs(1)),
    });
    let done = engine.run(workers, &NoRefresh, &stop, |r: &Report<'_>| {
        if a.metrics.is_some() {
            let p = &r.merged;
            shared.publish(metrics_of(p.counters, p.ports, p.elapsed, &cluster_ports));
        }
        if !a.quiet {
            eprintln!("{}", progress_line(&r.merged));
        }
    })?;
    let run = &done.merged;
    if a.metrics.is_some() {
        shared.publish(metrics_of(
            &run.counters,
            &run.ports,
            run.elapsed,
            &cluster_ports,
        ));
    }
    let (handed, from_cluster) = cluster_counts(&run.counters, &cluster_ports);
    let mut stdout = io::stdout().lock();
    writeln!(
        stdout,
        "{} io={io_names} node={} nodes={} handed_over={handed} from_cluster={from_cluster}",
        summary_line(run),
        a.node,
        m.nodes
    )?;
    stdout.flush()?;
    Ok(())
}

/// Frames sent on and received from the internal links (`cluster_ports`).
fn cluster_counts(c: &Counters, cluster_ports: &BTreeSet<u16>) -> (u64, u64) {
    let handed = cluster_ports.iter().map(|&p| c.tx(p).frames).sum();
    let from_cluster = cluster_ports.iter().map(|&p| c.rx(p).frames).sum();
    (handed, from_cluster)
}

/// The metrics of a node: the engine's counters and port statistics plus
/// the frames handed over and received on internal links.
fn metrics_of(
    c: &Counters,
    ports: &PortStats,
    elapsed: Duration,
    cluster_ports: &BTreeSet<u16>,
) -> MetricsSnapshot {
    let (handed, from_cluster) = cluster_counts(c, cluster_ports);
    MetricsSnapshot::from_counters(c)
        .with_port_stats(ports)
        .with_uptime(elapsed)
        .with_counter(
            "cluster_handed_over_frames_total",
            "Frames sent to their owner node on an internal link.",
            &[],
            handed,
        )
        .with_counter(
            "cluster_from_cluster_frames_total",
            "Frames received from another node on an internal link.",
            &[],
            from_cluster,
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_othello::cluster::build;
    use nexthop_othello::fib::KeyType;
    use nexthop_othello::Config;

    fn mac(i: u32) -> [u8; 6] {
        let b = i.to_be_bytes();
        [2, 0, b[0], b[1], b[2], b[3]]
    }

    fn frame(dst: [u8; 6]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&[2, 0, 0, 0, 0, 0xfe, 0x88, 0xb5]);
        f.resize(60, 0);
        f
    }

    #[test]
    fn peer_maps_parse_and_refuse_with_the_argument() {
        assert_eq!("2=12".parse::<PeerMap>(), Ok(PeerMap { node: 2, port: 12 }));
        for bad in ["", "2", "x=1", "1=x", "1=70000", "-1=3"] {
            let e = bad.parse::<PeerMap>().unwrap_err();
            assert!(e.contains(bad) || bad.is_empty(), "{bad}: {e}");
        }
    }

    /// Four nodes in one process: every name entering at every node is
    /// handed to its owner on the right peer port (or kept), and at the
    /// owner, arriving on a cluster port, leaves on its own port; every
    /// frame is counted once.
    #[test]
    fn a_frame_is_handed_to_its_owner_once_and_forwarded_there() {
        let nodes = 4;
        let routes: Vec<(usize, [u8; 6], Action)> = (0..400u32)
            .map(|i| (i as usize + 1, mac(i), Action::Port(1 + (i % 3) as u16)))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), KeyType::Mac, Config::default(), &routes, nodes).unwrap();
        let m = cluster::open_manifest(dir.path()).unwrap();
        let owner = open_owner(dir.path(), &m).unwrap();
        let locals: Vec<LookupFib> = (0..nodes)
            .map(|k| open_lookup(&cluster::node_dir(dir.path(), k)).unwrap())
            .collect();
        // Node K reaches node J on port 10 + J.
        let peer_port = |j: usize| 10 + j as u16;
        let hand: Vec<ActionTable> = (0..nodes)
            .map(|k| {
                let peers = (0..nodes)
                    .filter(|&j| j != k)
                    .map(|j| (j, peer_port(j)))
                    .collect();
                owner_actions(&owner.actions, nodes, k, &peers).unwrap()
            })
            .collect();
        let mut stages: Vec<ClusterStage<'_>> = (0..nodes)
            .map(|k| {
                let cp = (0..nodes).filter(|&j| j != k).map(peer_port).collect();
                ClusterStage::new(
                    (&owner.map, &hand[k]),
                    (&locals[k].mapped, &locals[k].actions),
                    KeyType::Mac,
                    PipelineConfig::default(),
                    &cp,
                )
                .unwrap()
            })
            .collect();
        let frames: Vec<Vec<u8>> = routes.iter().map(|r| frame(r.1)).collect();
        let group: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        let mut s = ClusterScratch::default();
        // The ports a one-frame group was pushed to.
        let on = |lists: &[Vec<&[u8]>]| -> Vec<usize> {
            (0..lists.len()).filter(|&p| !lists[p].is_empty()).collect()
        };
        for entry in 0..nodes {
            for (i, f) in group.iter().enumerate() {
                let owner_k = cluster::node_of(&routes[i].1, nodes);
                let mut lists: Vec<Vec<&[u8]>> = vec![Vec::new(); 20];
                stages[entry].route(&mut s, 0, &[f], &mut lists, |p| panic!("port {p}"));
                let sent_on = on(&lists);
                if owner_k == entry {
                    assert_eq!(sent_on, vec![1 + i % 3], "kept at {entry}");
                    continue;
                }
                assert_eq!(sent_on, vec![usize::from(peer_port(owner_k))], "handed");
                // At the owner, from node `entry`'s link.
                let mut lists: Vec<Vec<&[u8]>> = vec![Vec::new(); 20];
                stages[owner_k].route(&mut s, peer_port(entry), &[f], &mut lists, |p| {
                    panic!("port {p}")
                });
                let sent_on = on(&lists);
                assert_eq!(sent_on, vec![1 + i % 3], "at the owner");
            }
        }
        let mut total = Counters::default();
        for st in &stages {
            assert!(st.counters().is_consistent());
            total.merge(st.counters());
        }
        let handed: u64 = (0..nodes).map(|j| total.tx(peer_port(j)).frames).sum();
        // Each of 400 names enters at 4 nodes, owned by one of them.
        assert_eq!(handed, 3 * 400);
        assert_eq!(total.frames_in, 4 * 400 + handed);
        assert_eq!(total.forwarded, total.frames_in);
    }

    #[test]
    fn owner_actions_need_a_peer_for_every_other_owner() {
        let routes: Vec<(usize, [u8; 6], Action)> = (0..200u32)
            .map(|i| (i as usize + 1, mac(i), Action::Port(1)))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), KeyType::Mac, Config::default(), &routes, 3).unwrap();
        let m = cluster::open_manifest(dir.path()).unwrap();
        let owner = open_owner(dir.path(), &m).unwrap();
        let peers = BTreeMap::from([(1, 11u16)]);
        let e = owner_actions(&owner.actions, 3, 0, &peers).unwrap_err();
        assert!(e.to_string().contains("node 2"), "{e}");
        let peers = BTreeMap::from([(1, 11u16), (2, 11u16)]);
        let e = owner_actions(&owner.actions, 3, 0, &peers).unwrap_err();
        assert!(e.to_string().contains("share"), "{e}");
        let peers = BTreeMap::from([(1, 11u16), (2, 12u16)]);
        let t = owner_actions(&owner.actions, 3, 0, &peers).unwrap();
        for (id, a) in owner.actions.iter() {
            let want = match a {
                Action::Port(0) => Action::Drop,
                Action::Port(j) => Action::Port(10 + j),
                _ => unreachable!(),
            };
            assert_eq!(t.get(id), Some(&want));
        }
    }
}
