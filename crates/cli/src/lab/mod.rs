//! `nexthop lab`: the main job. A controller with a generated FIB, a
//! forwarder (`nexthop run`) following it, a traffic source and four sinks,
//! each in its own network namespace joined by veth pairs; traffic at the
//! highest rate the machine gives, live route changes while it flows,
//! every received frame checked against the FIB's history, and a summary.
//! Without root (or with `--pcap`) the same plan runs offline through pcap
//! files (see [`pcap`]).
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
//!
//! The files: [`plan`] (names, actions, changes, the FIB and key both
//! variants start from), [`frame`] (the lab's frames and port masks),
//! [`live`] (namespaces, source, sinks, the forwarder process), [`pcap`]
//! (the offline variant), [`phases`] (`--alternate`), [`cpu`] (thread
//! placement and the CPU line), [`summary`] (`summary.json`). The leaves
//! `frame`, `phases`, `cpu` and `summary` use no other file of the lab;
//! `plan` uses `frame`; `live` and `pcap` use the others, never each other.
//!
//! `nexthop lab --switches N` runs [`net`] instead: N forwarders in a line
//! or a leaf-spine (`--topology`), each following its column of one network-wide FIB through a private
//! Redis (it uses `frame`, `plan`'s key file and `live`'s process and
//! metrics helpers). `nexthop lab --cluster N` runs [`cluster`] instead: a
//! FIB split over N live nodes (`nexthop cluster run`), every frame sent
//! into every node and checked at its owner's port (it uses `frame` and
//! `live`'s process helpers). Both build their namespaces, links and node
//! processes with [`topo`]. Every live lab reads its sinks with [`sink`].

use crate::textio::say;

mod cluster;
mod cpu;
mod frame;
mod live;
mod net;
pub use cluster::DEFAULT_NAMES as CLUSTER_DEFAULT_NAMES;
pub use net::Topology;
mod pcap;
mod phases;
mod plan;
mod sink;
mod summary;
mod topo;

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::netns;

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
    /// there are more CPUs than workers (see [`cpu::cpu_plan`]).
    pub pin: bool,
    /// Phases of this many seconds alternately without and with live
    /// changes (0: changes all the time); see [`phases`].
    pub alternate: f64,
    /// Print `summary.json`'s object on stdout, the text on stderr.
    pub json: bool,
    /// A network of this many forwarders instead (0: the main job); see
    /// [`net`].
    pub switches: usize,
    /// The network lab's shape.
    pub topology: net::Topology,
    /// A FIB split over this many live nodes instead (0: not); see
    /// [`cluster`].
    pub cluster: usize,
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
    pub(crate) fn arg(self) -> &'static str {
        match self {
            LabIo::Afpacket => "afpacket",
            LabIo::Auto => "auto",
            LabIo::Afxdp => "afxdp",
        }
    }
}

pub(crate) fn step(what: &str, t: Instant, detail: impl std::fmt::Display) {
    say!("[{:6.1}s] {what:<10} {detail}", t.elapsed().as_secs_f64());
}

/// The end of a lab's summary, the same for every lab: the lab's own
/// mismatches and the summary's `examples` as `!` lines, PASS or FAIL, the
/// JSON summary with `--json`, and an error naming `DIR/summary.json` when
/// the lab failed.
pub(crate) fn finish_summary(
    mismatches: &[String],
    summary: &serde_json::Value,
    pass: bool,
    json: bool,
    out: &std::path::Path,
    lab: &str,
) -> Result<()> {
    let examples = summary["examples"].as_array().into_iter().flatten();
    for e in mismatches
        .iter()
        .map(String::as_str)
        .chain(examples.filter_map(|e| e.as_str()))
    {
        say!("  ! {e}");
    }
    say!("  result       {}", if pass { "PASS" } else { "FAIL" });
    if json {
        println!("{summary}");
    }
    if !pass {
        bail!(
            "{lab} lab FAILED (see {})",
            out.join("summary.json").display()
        );
    }
    Ok(())
}

/// `nexthop lab`.
pub fn run(o: &LabOpts) -> Result<()> {
    crate::textio::text_to_stderr(o.json);
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
    if o.topology != net::Topology::Line && o.switches == 0 {
        bail!("--topology is for the network lab: give it with --switches N");
    }
    if o.switches > 0 && o.cluster > 0 {
        bail!("--switches and --cluster are two different labs: give one");
    }
    if o.switches > 0 {
        return net::run(o, &stop);
    }
    if o.cluster > 0 {
        return cluster::run(o, &stop);
    }
    let why_offline = if o.pcap {
        Some("--pcap given".to_string())
    } else if !netns::is_root() {
        Some("network namespaces need root, and this runs as another user".to_string())
    } else {
        None
    };
    if let Some(why) = why_offline {
        say!("nexthop lab: {why}: running the offline pcap variant instead");
        return pcap::run(o, &stop);
    }
    match live::Topology::create() {
        Ok(topo) => live::run(o, topo, &stop),
        Err(e) => {
            say!(
                "nexthop lab: cannot create network namespaces ({e}): running the offline pcap variant instead"
            );
            pcap::run(o, &stop)
        }
    }
}
