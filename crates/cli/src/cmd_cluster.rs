//! `nexthop cluster build | forward | run`: a flat-name FIB split across a
//! cluster of nodes (see `nexthop_othello::cluster` for the partition,
//! the owner map and the directory layout).
//!
//! `cluster forward` runs the whole cluster offline over a pcap file:
//! every frame enters at an entry node, is looked up in that node's owner
//! map, handed to its owner (an internal hop when the owner is another
//! node) and forwarded there with the owner's FIB. The output files are
//! those `nexthop forward` writes for the single FIB of all names.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use nexthop_dataplane::pcap::{PcapFrame, PcapIn, PcapInError, PcapPorts};
use nexthop_dataplane::{
    Counters, Decision, Egress, MissPolicy, NameSource, Pipeline, PipelineConfig, BATCH,
};
use nexthop_othello::cluster::{
    self, ClusterManifest, ClusterReport, PackedOwnerMap, MAX_NODES, OWNER_DIR,
};
use nexthop_othello::fib::{parse_routes, ActionTable, KeyType, NameKey};
use nexthop_othello::fibdir;
use nexthop_othello::{Config, Sizing};

use crate::cmd_fib::{open_lookup, read_text, LookupFib};

/// The input port number of the pcap file in counters.
const IN_PORT: u16 = 0;

/// What a node holds of the owner map: the packed map, DIR/owner's action
/// table (the map's values are its ids) and key type.
#[derive(Debug)]
pub struct OwnerTable {
    /// The packed owner map.
    pub map: PackedOwnerMap,
    /// Action id to `port K`, K the owner node.
    pub actions: ActionTable,
    /// The cluster's key type.
    pub key_type: KeyType,
}

/// Open the owner map of the cluster in `dir` (manifest `m`): the packed
/// map (a version 1 cluster's snapshot packed on load) and DIR/owner's
/// action table.
///
/// # Errors
/// A missing or damaged owner map or DIR/owner, named.
pub fn open_owner(dir: &std::path::Path, m: &ClusterManifest) -> Result<OwnerTable> {
    let owner_dir = dir.join(OWNER_DIR);
    let cur = fibdir::open(&owner_dir).map_err(|e| anyhow!("{e}"))?;
    let actions = ActionTable::from_text(&cur.read_actions_text().map_err(|e| anyhow!("{e}"))?)
        .map_err(|e| anyhow!("{}: {e}", cur.path(fibdir::ACTIONS).display()))?;
    let map = cluster::open_owner_map(dir, m).map_err(|e| anyhow!("{e}"))?;
    Ok(OwnerTable {
        map,
        actions,
        key_type: cur.key_type,
    })
}

/// `nexthop cluster` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Split a routes file over N nodes: DIR/owner (the owner map over all
    /// names) and DIR/node-K (node K's FIB); reports memory per node.
    Build(BuildArgs),
    /// Forward a pcap file through the cluster (entry node, owner map,
    /// hand-over, owner's FIB); write a pcap per output port.
    Forward(ForwardArgs),
    /// Run node K of a cluster live: frames from outside ports go to
    /// their owner over an internal link (--peer J=PORT) or are forwarded
    /// here; frames from internal links are forwarded here.
    Run(crate::cmd_cluster_run::RunArgs),
}

/// `nexthop cluster build` arguments.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Name type: mac, ipv4, ipv6, u64 or str.
    #[arg(long, value_name = "TYPE")]
    key_type: KeyType,
    /// Routes file: NAME ACTION per line, as for `fib build`.
    #[arg(long, value_name = "FILE")]
    routes: PathBuf,
    /// Number of nodes (1 to 256).
    #[arg(long, value_name = "N")]
    nodes: usize,
    /// Cluster directory to create (or replace if it holds a cluster).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Value bits l of every node's FIB.
    #[arg(long, value_name = "L", default_value_t = 8)]
    value_bits: u8,
    /// Check bits r of every node's FIB (alien-name detection).
    #[arg(long, value_name = "R", default_value_t = 0)]
    check_bits: u8,
    /// Array sizing: pow2 or tight.
    #[arg(long, value_name = "RULE", default_value = "pow2")]
    sizing: Sizing,
    /// Start of the hash seed sequence (default: a fixed constant).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Print the build report as JSON.
    #[arg(long)]
    json: bool,
}

/// `nexthop cluster forward` arguments.
#[derive(Debug, Args)]
pub struct ForwardArgs {
    /// Cluster directory (made by `nexthop cluster build`).
    #[arg(long, value_name = "DIR")]
    cluster: PathBuf,
    /// Input pcap file of Ethernet frames.
    #[arg(long, value_name = "FILE")]
    in_pcap: PathBuf,
    /// Output directory: port-N.pcap per output port, controller.pcap.
    #[arg(long, value_name = "DIR")]
    out_dir: PathBuf,
    /// Entry node of each frame: round-robin (frame i enters at node
    /// i mod N) or a node index K.
    #[arg(long, value_name = "ENTRY", default_value = "round-robin")]
    entry: String,
    /// The name of a frame, as for `nexthop forward`.
    #[arg(long, value_name = "SOURCE", default_value = "dst-mac")]
    name: NameSource,
    /// Unknown names: drop or controller (flood is refused: a node's FIB
    /// knows only its own partition's ports).
    #[arg(long, value_name = "POLICY", default_value = "drop")]
    miss: MissPolicy,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// `nexthop cluster ...`.
pub fn run(c: ClusterCmd) -> Result<()> {
    match c {
        ClusterCmd::Build(a) => build(&a),
        ClusterCmd::Forward(a) => forward(&a),
        ClusterCmd::Run(a) => crate::cmd_cluster_run::run(&a),
    }
}

fn build_typed<K: NameKey>(a: &BuildArgs, cfg: Config) -> Result<ClusterReport> {
    let text = read_text(&a.routes)?;
    let routes = parse_routes::<K>(&text)
        .map_err(|e| anyhow!("{}:{}: {}", a.routes.display(), e.line, e.reason))?;
    cluster::build(&a.out, a.key_type, cfg, &routes, a.nodes)
        .map_err(|e| anyhow!("{}: {e}", a.out.display()))
}

fn build(a: &BuildArgs) -> Result<()> {
    if a.nodes == 0 || a.nodes > MAX_NODES {
        return Err(anyhow!("--nodes {}: give 1 to {MAX_NODES}", a.nodes));
    }
    if a.out.exists()
        && !a.out.join(cluster::CLUSTER_MANIFEST).exists()
        && std::fs::read_dir(&a.out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(anyhow!(
            "{}: exists and is not a cluster directory; refusing to write into it",
            a.out.display()
        ));
    }
    // The same configuration rules as `fib build`.
    let cfg = crate::cmd_fib::BuildOpts {
        key_type: a.key_type,
        value_bits: a.value_bits,
        check_bits: a.check_bits,
        sizing: a.sizing,
        capacity: None,
        seed: a.seed,
        stash_capacity: Config::default().stash_capacity,
    }
    .config()?;
    let t = Instant::now();
    let r = match a.key_type {
        KeyType::Mac => build_typed::<[u8; 6]>(a, cfg)?,
        KeyType::Ipv4 => build_typed::<std::net::Ipv4Addr>(a, cfg)?,
        KeyType::Ipv6 => build_typed::<std::net::Ipv6Addr>(a, cfg)?,
        KeyType::U64 => build_typed::<u64>(a, cfg)?,
        KeyType::Str => build_typed::<Vec<u8>>(a, cfg)?,
    };
    let secs = t.elapsed().as_secs_f64();
    // One node holding everything: the sum of the partitions' FIBs is
    // within rounding of one FIB of all names (same bits per name).
    let single: u64 = r.node.iter().map(|n| n.fib_bytes).sum();
    let max_node = r.node.iter().map(|n| n.total_bytes).max().unwrap_or(0);
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["cluster"] = a.out.display().to_string().into();
        v["key_type"] = a.key_type.name().into();
        v["all_fibs_bytes"] = single.into();
        v["max_node_bytes"] = max_node.into();
        v["build_secs"] = secs.into();
        println!("{v}");
    } else {
        println!(
            "built cluster {}: {} names over {} nodes; owner map {} B (l = {}, packed; {} B a byte per slot), largest node {} B (owner + local FIB) vs {} B for all the FIBs ({:.2} s)",
            a.out.display(),
            r.names,
            r.nodes,
            r.owner_bytes,
            r.owner_value_bits,
            r.owner_unpacked_bytes,
            max_node,
            single,
            secs
        );
    }
    Ok(())
}

/// Per-node counters of a cluster run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct NodeCounters {
    /// Frames that entered at this node.
    entered: u64,
    /// Frames this node handed to another node (internal hops).
    handed_over: u64,
    /// Frames this node looked up in its own FIB (it owns their names).
    owned: u64,
    /// Frames this node sent out of at least one port.
    forwarded: u64,
}

fn forward(a: &ForwardArgs) -> Result<()> {
    if a.miss == MissPolicy::Flood {
        return Err(anyhow!(
            "--miss flood: not supported by a cluster (a node's FIB knows only its partition's ports); use drop or controller"
        ));
    }
    let m = cluster::open_manifest(&a.cluster).map_err(|e| anyhow!("{e}"))?;
    let n = m.nodes;
    let fixed_entry = match a.entry.as_str() {
        "round-robin" => None,
        s => match s.parse::<usize>() {
            Ok(k) if k < n => Some(k),
            _ => {
                return Err(anyhow!(
                    "--entry {s}: give round-robin or a node index below {n}"
                ))
            }
        },
    };
    let owner_fib = open_owner(&a.cluster, &m)?;
    let node_fibs: Vec<LookupFib> = (0..n)
        .map(|k| open_lookup(&cluster::node_dir(&a.cluster, k)))
        .collect::<Result<_>>()?;
    let cfg = PipelineConfig {
        name: a.name,
        miss: a.miss,
        ..PipelineConfig::default()
    };
    fn pipe(
        f: &LookupFib,
        cfg: PipelineConfig,
        what: String,
    ) -> Result<Pipeline<nexthop_othello::QueryView<'_>>> {
        Pipeline::new(f.mapped.view(), &f.actions, f.current.key_type, cfg)
            .map_err(|e| anyhow!("{what}: {e}"))
    }
    let mut owner = Pipeline::new(&owner_fib.map, &owner_fib.actions, owner_fib.key_type, cfg)
        .map_err(|e| anyhow!("{}: {e}", a.cluster.join(OWNER_DIR).display()))?;
    let mut nodes = node_fibs
        .iter()
        .enumerate()
        .map(|(k, f)| {
            pipe(
                f,
                cfg,
                cluster::node_dir(&a.cluster, k).display().to_string(),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let mut input =
        PcapIn::open(&a.in_pcap).map_err(|e| anyhow!("{}: {e}", a.in_pcap.display()))?;
    let mut out = PcapPorts::create(&a.out_dir, input.header())?;

    let mut per_node = vec![NodeCounters::default(); n];
    let mut batch: Vec<PcapFrame> = (0..BATCH).map(|_| PcapFrame::default()).collect();
    let mut od: Vec<Decision> = Vec::with_capacity(BATCH);
    let mut nd: Vec<Decision> = Vec::with_capacity(BATCH);
    let mut decided: Vec<(usize, Decision)> = Vec::with_capacity(BATCH);
    let mut group_idx: Vec<usize> = Vec::with_capacity(BATCH);
    let mut owners: Vec<usize> = Vec::with_capacity(BATCH);
    let mut time = Duration::ZERO;
    let mut stopped_by = None;
    let mut seq: u64 = 0;
    let mut lookups: u64 = 0;
    loop {
        let mut got = 0;
        for slot in batch.iter_mut() {
            match input.read_frame(slot) {
                Ok(true) => got += 1,
                Ok(false) => break,
                Err(e) => {
                    stopped_by = Some(e);
                    break;
                }
            }
        }
        if got > 0 {
            let t = Instant::now();
            // Every node holds the same owner map: one lookup per frame at
            // its entry node.
            owner.process(IN_PORT, &batch[..got], &mut od);
            owners.clear();
            decided.clear();
            decided.resize(got, (0, Decision::Miss));
            for d in &od {
                let entry = fixed_entry.unwrap_or((seq % n as u64) as usize);
                seq += 1;
                // A name the owner map cannot place (unframeable, or an
                // alien whose value is no node) stays at its entry node,
                // whose FIB then misses or finds it malformed.
                let o = match *d {
                    Decision::Port(k) if usize::from(k) < n => usize::from(k),
                    _ => entry,
                };
                if !matches!(d, Decision::Malformed(_)) {
                    lookups += 1;
                }
                per_node[entry].entered += 1;
                if o != entry {
                    per_node[entry].handed_over += 1;
                }
                owners.push(o);
            }
            let mut group: Vec<&PcapFrame> = Vec::with_capacity(got);
            for (k, node) in nodes.iter_mut().enumerate() {
                group.clear();
                group_idx.clear();
                for (i, &o) in owners.iter().enumerate() {
                    if o == k {
                        group.push(&batch[i]);
                        group_idx.push(i);
                    }
                }
                if group.is_empty() {
                    continue;
                }
                node.process(IN_PORT, &group, &mut nd);
                for (&i, &d) in group_idx.iter().zip(&nd) {
                    if !matches!(d, Decision::Malformed(_)) {
                        lookups += 1;
                    }
                    decided[i] = (k, d);
                }
                per_node[k].owned += group.len() as u64;
            }
            time += t.elapsed();
            for (frame, (k, d)) in batch[..got].iter().zip(&decided) {
                match nodes[*k].egress(d) {
                    Egress::Ports(ports) => {
                        per_node[*k].forwarded += 1;
                        for &p in ports {
                            out.emit(p, frame)?;
                        }
                    }
                    Egress::Controller => out.punt(frame)?,
                    Egress::Discard => {}
                }
            }
        }
        if got < BATCH {
            break;
        }
    }
    let outputs = out.finish()?;
    let mut c = Counters::default();
    for node in &nodes {
        c.merge(node.counters());
    }
    let secs = time.as_secs_f64();
    let ns_per_frame = if c.frames_in > 0 {
        secs * 1e9 / c.frames_in as f64
    } else {
        0.0
    };
    let lookups_per_frame = if c.frames_in > 0 {
        lookups as f64 / c.frames_in as f64
    } else {
        0.0
    };
    let hops: u64 = per_node.iter().map(|p| p.handed_over).sum();
    let out_list = c.out_list();
    let mut stdout = io::stdout().lock();
    if a.json {
        let v = serde_json::json!({
            "cluster": a.cluster.display().to_string(),
            "nodes": n,
            "entry": a.entry,
            "input": a.in_pcap.display().to_string(),
            "out_dir": a.out_dir.display().to_string(),
            "frames_in": c.frames_in,
            "forwarded": c.forwarded,
            "dropped": c.dropped,
            "punted": c.punted,
            "malformed": c.malformed.total(),
            "misses": c.misses,
            "internal_hops": hops,
            "lookups": lookups,
            "lookups_per_frame": lookups_per_frame,
            "out": c.tx_ports().map(|(p, pc)| serde_json::json!({"port": p, "frames": pc.frames, "bytes": pc.bytes})).collect::<Vec<_>>(),
            "files": outputs.iter().map(|f| serde_json::json!({"port": f.port, "path": f.path.display().to_string(), "frames": f.frames})).collect::<Vec<_>>(),
            "per_node": per_node,
            "stopped_by": stopped_by.as_ref().map(|e: &PcapInError| e.to_string()),
            "pipeline_seconds": secs,
            "ns_per_frame": ns_per_frame,
        });
        serde_json::to_writer_pretty(&mut stdout, &v).map_err(io::Error::from)?;
        writeln!(stdout)?;
    } else {
        writeln!(
            stdout,
            "nodes={n} frames_in={} forwarded={} out={out_list} dropped={} punted={} malformed={} misses={} internal_hops={hops} lookups_per_frame={lookups_per_frame:.3} ns_per_frame={ns_per_frame:.1}",
            c.frames_in,
            c.forwarded,
            c.dropped,
            c.punted,
            c.malformed.total(),
            c.misses,
        )?;
        for (k, p) in per_node.iter().enumerate() {
            writeln!(
                stdout,
                "node {k}: entered={} handed_over={} owned={} forwarded={}",
                p.entered, p.handed_over, p.owned, p.forwarded
            )?;
        }
    }
    stdout.flush()?;
    match stopped_by {
        None => Ok(()),
        // A capture cut short is routine (a killed tcpdump), as in `forward`.
        Some(e @ PcapInError::TruncatedRecord { .. }) => {
            eprintln!(
                "warning: {}: {e}; {} frames before it forwarded",
                a.in_pcap.display(),
                c.frames_in
            );
            Ok(())
        }
        Some(e) => Err(anyhow!(
            "{}: {e}; {} frames before it forwarded",
            a.in_pcap.display(),
            c.frames_in
        )),
    }
}
