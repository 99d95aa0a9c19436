//! `nexthop`: build, query and update Concise FIBs on disk, and a demo.
//!
//! Glue only: the algorithms live in `nexthop-othello`; this crate parses
//! arguments, reads and writes files (see `nexthop_othello::fibdir` for the directory
//! layout and its atomic replacement) and reports errors as
//! `error: ...` with a non-zero exit.
#![forbid(unsafe_code)]

mod cmd_cluster;
mod cmd_cluster_run;
mod cmd_controller;
mod cmd_fib;
mod cmd_forward;
mod cmd_gen;
mod cmd_lpm;
mod cmd_ndn;
mod cmd_ndn_mgmt;
mod cmd_ndn_repo;
mod cmd_run;
mod cmd_sdf;
mod cmd_sdf_ovs;
mod cmd_sdf_router;
mod cmd_stats;
mod demo;
mod lab;
mod ndnlab;
mod textio;
mod threadcpu;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use nexthop_othello::fib::KeyType;
use nexthop_othello::Sizing;

/// nexthop: a software forwarding plane built on Othello hashing.
#[derive(Debug, Parser)]
#[command(name = "nexthop", version = env!("NEXTHOP_LONG_VERSION"), propagate_version = true)]
struct Cli {
    /// Log events on stderr at this level and above: error, warn, info,
    /// debug, trace or off (or a RUST_LOG-style filter such as
    /// `nexthop_control=debug`). Default: RUST_LOG, else info.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Log event format on stderr: text (one line per event) or json (one
    /// JSON object per line). Progress lines and summaries are output, not
    /// log events: they keep their format.
    #[arg(long, global = true, value_name = "FORMAT", default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    cmd: Cmd,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Concise FIB directories: build, lookup, update, stats.
    #[command(subcommand)]
    Fib(FibCmd),
    /// A FIB split across a cluster of nodes: build, forward (offline).
    #[command(subcommand)]
    Cluster(cmd_cluster::ClusterCmd),
    /// Generate a dataset, build a FIB, verify it, measure lookups and updates.
    Demo(DemoArgs),
    /// Forward a pcap file's frames through a Concise FIB (--fib) or an IP
    /// LPM table (--lpm); write a pcap per output port.
    Forward(cmd_forward::ForwardArgs),
    /// Write a pcap of frames addressed to the names of a MAC routes file.
    Gen(cmd_gen::GenArgs),
    /// Forward frames between live Linux interfaces (AF_PACKET or AF_XDP)
    /// through a Concise FIB or an IP LPM table.
    Run(cmd_run::RunArgs),
    /// Serve a FIB directory to forwarders over the authenticated update protocol.
    Controller(cmd_controller::ControllerArgs),
    /// Print a running forwarder's counters from its metrics endpoint.
    Stats(cmd_stats::StatsArgs),
    /// Bloomfwd IPv4/IPv6 longest-prefix-match tables: build, lookup, update, stats.
    #[command(subcommand)]
    Lpm(cmd_lpm::LpmCmd),
    /// NDN name FIB files: build, lookup, stats.
    #[command(subcommand)]
    Ndn(cmd_ndn::NdnCmd),
    /// Software-defined forwarding: an app decides what its decision cache
    /// misses (`sdf run --app l2switch --in-pcap FILE --out-dir DIR`, or
    /// live: `--port N=IFACE ...`).
    #[command(subcommand)]
    Sdf(cmd_sdf::SdfCmd),
    /// The main job: controller, forwarder, source and 4 sinks in network
    /// namespaces, live updates under traffic, every frame checked.
    Lab(LabArgs),
}

#[derive(Debug, Subcommand)]
enum FibCmd {
    /// Build a FIB directory from a routes file (NAME ACTION per line).
    Build(BuildArgs),
    /// Look names up (arguments, or stdin one per line) and print their actions.
    Lookup(LookupArgs),
    /// Apply a changes file (+ NAME ACTION, - NAME, = NAME ACTION) atomically.
    Update(UpdateArgs),
    /// Print sizes, configuration and counters of a FIB directory.
    Stats(StatsArgs),
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// Name type: mac, ipv4, ipv6, u64 or str.
    #[arg(long, value_name = "TYPE")]
    key_type: KeyType,
    /// Routes file: NAME ACTION per line, # comments; ACTION is a port (3),
    /// a port set (1+3), drop or controller.
    #[arg(long, value_name = "FILE")]
    routes: PathBuf,
    /// FIB directory to create, or to replace if it already holds a FIB.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Value bits l: the FIB holds at most 2^l distinct actions.
    #[arg(long, value_name = "L", default_value_t = 8)]
    value_bits: u8,
    /// Check bits r for alien-name detection (0: off; misses are then
    /// impossible and unknown names get an arbitrary action).
    #[arg(long, value_name = "R", default_value_t = 0)]
    check_bits: u8,
    /// Array sizing: pow2 (power-of-two arrays) or tight (about 2.33 l bits/name).
    #[arg(long, value_name = "RULE", default_value = "pow2")]
    sizing: Sizing,
    /// Size the arrays for this many names, so adds up to it never rebuild.
    #[arg(long, value_name = "N", value_parser = textio::count_arg)]
    capacity: Option<usize>,
    /// Start of the hash seed sequence (default: a fixed constant).
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Names whose edge would close a cycle go to a stash of at most this many.
    #[arg(long, value_name = "N", default_value_t = 16)]
    stash_capacity: usize,
    /// Print the build report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct LookupArgs {
    /// FIB directory.
    #[arg(long, value_name = "DIR")]
    fib: PathBuf,
    /// Names to look up; without any, names are read from stdin, one per
    /// line (blank lines and # comment lines are skipped).
    #[arg(value_name = "NAME")]
    names: Vec<String>,
    /// Print one JSON object per name ({"name", "action"}; action null
    /// for a miss) instead of the action alone.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct UpdateArgs {
    /// FIB directory, updated in place atomically.
    #[arg(long, value_name = "DIR")]
    fib: PathBuf,
    /// Changes file: + NAME ACTION, - NAME, = NAME ACTION per line.
    #[arg(long, value_name = "FILE")]
    changes: PathBuf,
    /// Print the update report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct StatsArgs {
    /// FIB directory.
    #[arg(long, value_name = "DIR")]
    fib: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Number of MAC names.
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = textio::count_arg)]
    names: usize,
    /// Number of changes in the update step (default: min(100000, N/10)).
    #[arg(long, value_name = "N", value_parser = textio::count_arg)]
    changes: Option<usize>,
    /// FIB directory (replaced if it holds a FIB); routes.txt and
    /// changes.txt are written beside current/ in it.
    #[arg(long, value_name = "DIR", default_value = "out/demo-fib")]
    out: PathBuf,
    /// Seed of the generated dataset and changes.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Print the summary as one JSON object on stdout (the progress and
    /// text summary go to stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct LabArgs {
    /// Number of MAC names in the FIB (traffic goes to all of them);
    /// default 1 000 000, with --cluster 4 096 (every name is sent into
    /// every node).
    #[arg(long, value_name = "N", value_parser = textio::count_arg)]
    names: Option<usize>,
    /// Seconds of traffic.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    duration: f64,
    /// Route changes per second pushed by the controller during the
    /// traffic (action changes of traffic names, adds and deletes of
    /// others).
    #[arg(long, value_name = "N", default_value_t = 10_000.0)]
    update_rate: f64,
    /// Frames per second offered by the source (0: as fast as it can).
    #[arg(long, value_name = "PPS", default_value_t = 0.0)]
    rate: f64,
    /// Names checked one frame each after the traffic (exact ports).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = textio::count_arg)]
    final_names: usize,
    /// Output directory: FIB, key, forwarder logs, pcaps.
    #[arg(long, value_name = "DIR", default_value = "out/lab")]
    out: PathBuf,
    /// Seed of names, actions and changes.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Run the offline pcap variant (the default when not root).
    #[arg(long)]
    pcap: bool,
    /// Frames of the pcap variant.
    #[arg(long, value_name = "N", default_value_t = 2_000_000, value_parser = textio::count_arg)]
    pcap_frames: usize,
    /// Forwarder worker threads (PACKET_FANOUT round robin among them).
    #[arg(long, value_name = "N", default_value_t = 1)]
    workers: usize,
    /// Benchmark baseline: the forwarder sends every frame to port 1
    /// without a lookup (`nexthop run --trivial-port 1`); frames are
    /// counted, not checked.
    #[arg(long)]
    trivial: bool,
    /// Route changes the controller merges into one delta (see
    /// `nexthop controller --changes-per-delta`); 1: one delta per change.
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    changes_per_delta: u32,
    /// The forwarder's port I/O (`nexthop run --io`): afpacket (the
    /// default), auto (AF_XDP where a socket binds) or afxdp.
    #[arg(long, value_name = "IO", default_value = "afpacket")]
    io: lab::LabIo,
    /// Let the scheduler place every thread. By default, when the machine
    /// has more CPUs than workers, the forwarder's workers are pinned to
    /// the last CPUs (one each) and everything else (source, sinks,
    /// controller, the forwarder's follower) to the others, so a worker's
    /// rate is that of a core of its own.
    #[arg(long)]
    no_pin: bool,
    /// Benchmark: cut the traffic into phases of SECS seconds, alternately
    /// without and with live changes at --update-rate (starting without),
    /// and report each phase with changes against its neighbours without
    /// (same-run ratios; 0: changes all the time).
    #[arg(long, value_name = "SECS", default_value_t = 0.0)]
    alternate: f64,
    /// Print the summary as JSON on stdout (the figures of OUT/summary.json,
    /// which every run writes) and the progress and text summary on stderr.
    #[arg(long)]
    json: bool,
    /// Instead of the main job: N forwarders (4 to 16, in a line), each
    /// following its switch's column of one network-wide FIB through a
    /// private redis-server, traffic across every hop while routes move,
    /// every frame's sink checked (needs root). Uses --names, --duration,
    /// --update-rate, --rate (default 20 000 frames/s), --seed, --out.
    #[arg(long, value_name = "N", default_value_t = 0)]
    switches: usize,
    /// The network lab's shape: line (the default) or leaf-spine (spines
    /// over leaves, a sink on every leaf; 2 spines, N/4 from N = 12).
    #[arg(long, value_name = "SHAPE", default_value = "line")]
    topology: lab::Topology,
    /// Instead of the main job: a FIB of --names names split over N live
    /// nodes (4 to 16, `nexthop cluster run` each, a full mesh of internal
    /// links), one frame per name sent into every node, each checked at
    /// its owner's port (needs root). Uses --names, --rate (default 20 000
    /// frames/s), --seed, --out.
    #[arg(long, value_name = "N", default_value_t = 0)]
    cluster: usize,
}

/// `--names`, or its default: the cluster lab sends every name into every
/// node, so it takes fewer.
fn lab_names(a: &LabArgs) -> usize {
    a.names.unwrap_or(if a.cluster > 0 {
        lab::CLUSTER_DEFAULT_NAMES
    } else {
        1_000_000
    })
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.cmd {
        Cmd::Fib(FibCmd::Build(a)) => {
            let opts = cmd_fib::BuildOpts {
                key_type: a.key_type,
                value_bits: a.value_bits,
                check_bits: a.check_bits,
                sizing: a.sizing,
                capacity: a.capacity,
                seed: a.seed,
                stash_capacity: a.stash_capacity,
            };
            cmd_fib::build(&opts, &a.routes, &a.out, a.json)
        }
        Cmd::Fib(FibCmd::Lookup(a)) => cmd_fib::lookup(&a.fib, &a.names, a.json),
        Cmd::Fib(FibCmd::Update(a)) => cmd_fib::update(&a.fib, &a.changes, a.json),
        Cmd::Fib(FibCmd::Stats(a)) => cmd_fib::stats(&a.fib, a.json),
        Cmd::Demo(a) => demo::run(&demo::DemoOpts {
            names: a.names,
            changes: a.changes,
            out: a.out,
            seed: a.seed,
            json: a.json,
        }),
        Cmd::Forward(a) => cmd_forward::run(a),
        Cmd::Cluster(c) => cmd_cluster::run(c),
        Cmd::Gen(a) => cmd_gen::run(&a),
        Cmd::Run(a) => cmd_run::run(a),
        Cmd::Controller(a) => cmd_controller::run(&a),
        Cmd::Stats(a) => cmd_stats::run(&a),
        Cmd::Lpm(c) => cmd_lpm::run(c),
        Cmd::Ndn(c) => cmd_ndn::run(c),
        Cmd::Sdf(c) => cmd_sdf::run(c),
        Cmd::Lab(a) => lab::run(&lab::LabOpts {
            names: lab_names(&a),
            duration: a.duration,
            update_rate: a.update_rate,
            rate: a.rate,
            final_names: a.final_names,
            out: a.out,
            seed: a.seed,
            pcap: a.pcap,
            pcap_frames: a.pcap_frames,
            workers: a.workers,
            trivial: a.trivial,
            changes_per_delta: a.changes_per_delta as usize,
            io: a.io,
            pin: !a.no_pin,
            alternate: a.alternate,
            json: a.json,
            switches: a.switches,
            topology: a.topology,
            cluster: a.cluster,
        }),
    }
}

/// Whether the error is a closed stdout (`nexthop fib lookup ... | head`).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.log_format == LogFormat::Json;
    if let Err(e) = nexthop_dataplane::metrics::init_logging_at(json, cli.log_level.as_deref()) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab_args(args: &[&str]) -> LabArgs {
        let cli = Cli::try_parse_from(["nexthop", "lab"].iter().chain(args)).expect("parses");
        match cli.cmd {
            Cmd::Lab(a) => a,
            other => panic!("not the lab: {other:?}"),
        }
    }

    #[test]
    fn the_cluster_lab_defaults_to_names_it_accepts() {
        assert_eq!(lab_names(&lab_args(&[])), 1_000_000);
        assert_eq!(lab_names(&lab_args(&["--cluster", "4"])), 4096);
        assert_eq!(
            lab_names(&lab_args(&["--cluster", "4", "--names", "1000"])),
            1000
        );
        assert_eq!(lab_names(&lab_args(&["--names", "2e3"])), 2000);
    }
}
