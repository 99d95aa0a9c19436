//! `nexthop gen`: write a pcap of Ethernet frames addressed to the names of
//! a MAC routes file (and, optionally, to unknown names), for `nexthop
//! forward` runs and benchmarks that anyone can reproduce.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use nexthop_dataplane::pcap::PcapOut;
use nexthop_othello::fib::parse_routes;
use rand::Rng;

/// Arguments of `nexthop gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Routes file of a MAC FIB (`NAME ACTION` lines): destinations are
    /// drawn uniformly from its names.
    #[arg(long, value_name = "FILE")]
    routes: PathBuf,
    /// Number of frames to write.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    frames: u64,
    /// Percentage of frames sent to random names that are not in the file.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.0)]
    unknown: f64,
    /// Frame length in bytes, 60..=9000 (without the FCS).
    #[arg(long, value_name = "BYTES", default_value_t = 60)]
    size: usize,
    /// Seed of the destination stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output pcap file (classic pcap, microsecond timestamps, Ethernet).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// Source MAC of generated frames (locally administered, unicast).
const SRC: [u8; 6] = [0x02, 0x00, 0x5e, 0x00, 0x53, 0x01];
/// EtherType of generated frames: IEEE 802 local experimental 1.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// `nexthop gen`.
pub fn run(a: &GenArgs) -> Result<()> {
    if !(60..=9000).contains(&a.size) {
        bail!("--size must be in 60..=9000 bytes, got {}", a.size);
    }
    if !(0.0..=100.0).contains(&a.unknown) {
        bail!(
            "--unknown must be a percentage in 0..=100, got {}",
            a.unknown
        );
    }
    let text = std::fs::read_to_string(&a.routes)
        .with_context(|| format!("reading {}", a.routes.display()))?;
    let routes = parse_routes::<[u8; 6]>(&text)
        .map_err(|e| anyhow::anyhow!("{}:{e}", a.routes.display()))?;
    let names: Vec<[u8; 6]> = routes.into_iter().map(|(_, n, _)| n).collect();
    if names.is_empty() && a.unknown < 100.0 {
        bail!("{}: no routes to address frames to", a.routes.display());
    }
    let known: std::collections::HashSet<[u8; 6]> = names.iter().copied().collect();
    // Record i is stamped i microseconds.
    let mut w = PcapOut::create(&a.out, PcapOut::ethernet_header())?;
    let mut rng = nexthop_testutil::keys::rng(a.seed);
    let mut frame = vec![0u8; a.size];
    frame[6..12].copy_from_slice(&SRC);
    frame[12..14].copy_from_slice(&ETHERTYPE);
    let (mut to_known, mut to_unknown) = (0u64, 0u64);
    for i in 0..a.frames {
        let dst = if rng.gen::<f64>() * 100.0 < a.unknown {
            to_unknown += 1;
            loop {
                let mut m: [u8; 6] = rng.gen();
                m[0] = (m[0] & 0xfe) | 0x02;
                if !known.contains(&m) {
                    break m;
                }
            }
        } else {
            to_known += 1;
            names[rng.gen_range(0..names.len())]
        };
        frame[0..6].copy_from_slice(&dst);
        frame[14..22].copy_from_slice(&i.to_be_bytes());
        w.write(Duration::from_micros(i), &frame)?;
    }
    w.finish()?;
    println!(
        "wrote {} frames of {} bytes to {}: {to_known} to names of {} ({} names), {to_unknown} to unknown names",
        a.frames,
        a.size,
        a.out.display(),
        a.routes.display(),
        names.len()
    );
    Ok(())
}
