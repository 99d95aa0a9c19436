//! `nexthop gen`: write a pcap of Ethernet frames addressed to the names of
//! a MAC routes file (and, optionally, to unknown names), or, with
//! `--ip-routes`, IPv4/IPv6 UDP frames addressed inside the prefixes of an
//! LPM route file (and, optionally, to addresses no route covers), for
//! `nexthop forward` runs and benchmarks that anyone can reproduce.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use nexthop_dataplane::pcap::PcapOut;
use nexthop_lpm::parse::{load_routes, NextHopMode};
use nexthop_lpm::{Address, BinaryTrie, Prefix};
use nexthop_othello::fib::parse_routes;
use rand::Rng;

/// Arguments of `nexthop gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Routes file of a MAC FIB (`NAME ACTION` lines): destinations are
    /// drawn uniformly from its names.
    #[arg(long, value_name = "FILE", required_unless_present = "ip_routes")]
    routes: Option<PathBuf>,
    /// IP frames instead: an LPM route file (`prefix/len next-hop` lines,
    /// as for `nexthop lpm build`). Each frame is IPv4 or IPv6 UDP to a
    /// random address inside a route drawn uniformly from the file
    /// (IPv6 frames are at least 62 bytes).
    #[arg(long, value_name = "FILE", conflicts_with = "routes")]
    ip_routes: Option<PathBuf>,
    /// IP frames: the IPv4 TTL / IPv6 hop limit.
    #[arg(long, value_name = "N", default_value_t = 64, requires = "ip_routes")]
    ttl: u8,
    /// Number of frames to write.
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = crate::textio::count_arg_u64)]
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
    /// Print the report as one JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
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
    let routes_path = match (&a.routes, &a.ip_routes) {
        (_, Some(ip)) => return gen_ip(a, ip),
        (Some(r), None) => r,
        (None, None) => bail!("give --routes FILE or --ip-routes FILE"),
    };
    let text = std::fs::read_to_string(routes_path)
        .with_context(|| format!("reading {}", routes_path.display()))?;
    let routes = parse_routes::<[u8; 6]>(&text)
        .map_err(|e| anyhow::anyhow!("{}:{e}", routes_path.display()))?;
    let names: Vec<[u8; 6]> = routes.into_iter().map(|(_, n, _)| n).collect();
    if names.is_empty() && a.unknown < 100.0 {
        bail!("{}: no routes to address frames to", routes_path.display());
    }
    let known: std::collections::HashSet<[u8; 6]> = names.iter().copied().collect();
    // Record i is stamped i microseconds.
    let mut w = PcapOut::create(&a.out, PcapOut::ethernet_header())?;
    let mut rng = nexthop_othello::keys::rng(a.seed);
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
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "frames": a.frames,
                "bytes_per_frame": a.size,
                "out": a.out.display().to_string(),
                "routes": routes_path.display().to_string(),
                "names": names.len(),
                "to_known": to_known,
                "to_unknown": to_unknown,
            })
        );
    } else {
        println!(
            "wrote {} frames of {} bytes to {}: {to_known} to names of {} ({} names), {to_unknown} to unknown names",
            a.frames,
            a.size,
            a.out.display(),
            routes_path.display(),
            names.len()
        );
    }
    Ok(())
}

/// Destination MAC of generated IP frames: the router's port.
const ROUTER: [u8; 6] = [0x02, 0x00, 0x5e, 0x00, 0x53, 0xfe];
/// Source addresses of generated IP frames (documentation prefixes).
const SRC4: [u8; 4] = [192, 0, 2, 1];
const SRC6: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;

/// A random address inside `p`.
fn inside<A: Address>(p: Prefix<A>, rng: &mut impl Rng) -> A {
    let host = if p.len() >= A::BITS {
        0
    } else {
        u128::MAX >> (128 - u32::from(A::BITS) + u32::from(p.len()))
    };
    A::from_u128(p.addr().to_u128() | (rng.gen::<u128>() & host))
}

/// The IPv4 frame of `len` bytes to `dst`, record `i`.
fn v4_frame(frame: &mut Vec<u8>, len: usize, dst: u32, ttl: u8, i: u64) {
    frame.clear();
    frame.resize(len, 0);
    frame[0..6].copy_from_slice(&ROUTER);
    frame[6..12].copy_from_slice(&SRC);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let h = &mut frame[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&ip_len.to_be_bytes());
    h[4..6].copy_from_slice(&(i as u16).to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = ttl;
    h[9] = 17;
    h[12..16].copy_from_slice(&SRC4);
    h[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = nexthop_wire::checksum::ipv4_header_checksum(h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    udp(&mut frame[34..], ip_len - 20, i);
}

/// The IPv6 frame of `len` (at least 62) bytes to `dst`, record `i`.
fn v6_frame(frame: &mut Vec<u8>, len: usize, dst: u128, hop_limit: u8, i: u64) {
    frame.clear();
    frame.resize(len, 0);
    frame[0..6].copy_from_slice(&ROUTER);
    frame[6..12].copy_from_slice(&SRC);
    frame[12..14].copy_from_slice(&[0x86, 0xdd]);
    let plen = (len - 54) as u16;
    let h = &mut frame[14..54];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&plen.to_be_bytes());
    h[6] = 17;
    h[7] = hop_limit;
    h[8..24].copy_from_slice(&SRC6.to_be_bytes());
    h[24..40].copy_from_slice(&dst.to_be_bytes());
    udp(&mut frame[54..], plen, i);
}

/// A UDP header (ports 49152 → 9, checksum 0 for IPv4; IPv6 tools do
/// not check it here) with the record number as payload.
fn udp(b: &mut [u8], len: u16, i: u64) {
    b[0..2].copy_from_slice(&49152u16.to_be_bytes());
    b[2..4].copy_from_slice(&9u16.to_be_bytes());
    b[4..6].copy_from_slice(&len.to_be_bytes());
    if let Some(p) = b.get_mut(8..16) {
        p.copy_from_slice(&i.to_be_bytes());
    }
}

/// `nexthop gen --ip-routes FILE`.
fn gen_ip(a: &GenArgs, path: &std::path::Path) -> Result<()> {
    let routes = load_routes(path, NextHopMode::Raw)?;
    if routes.is_empty() && a.unknown < 100.0 {
        bail!("{}: no routes to address frames to", path.display());
    }
    let (mut t4, mut t6) = (BinaryTrie::<u32>::new(), BinaryTrie::<u128>::new());
    for (p, nh) in &routes.v4 {
        t4.insert(*p, *nh);
    }
    for (p, nh) in &routes.v6 {
        t6.insert(*p, *nh);
    }
    let (n4, n6) = (routes.v4.len(), routes.v6.len());
    let mut w = PcapOut::create(&a.out, PcapOut::ethernet_header())?;
    let mut rng = nexthop_othello::keys::rng(a.seed);
    let mut frame = Vec::with_capacity(a.size.max(62));
    let (mut v4, mut v6, mut to_unknown) = (0u64, 0u64, 0u64);
    for i in 0..a.frames {
        let unknown = rng.gen::<f64>() * 100.0 < a.unknown;
        // Unknown: of a family the file has routes of (either when it has
        // both), redrawn until no route covers it.
        let pick = if unknown {
            0
        } else {
            rng.gen_range(0..n4 + n6)
        };
        let is_v4 = match (unknown, n4 > 0, n6 > 0) {
            (false, ..) => pick < n4,
            (true, true, true) => rng.gen(),
            (true, _, has_v6) => !has_v6,
        };
        if is_v4 {
            let dst = if unknown {
                to_unknown += 1;
                loop {
                    let d: u32 = rng.gen();
                    if t4.lookup(d).is_none() {
                        break d;
                    }
                }
            } else {
                inside(routes.v4[pick].0, &mut rng)
            };
            v4_frame(&mut frame, a.size, dst, a.ttl, i);
            v4 += 1;
        } else {
            let dst = if unknown {
                to_unknown += 1;
                loop {
                    let d: u128 = rng.gen();
                    if t6.lookup(d).is_none() {
                        break d;
                    }
                }
            } else {
                inside(routes.v6[pick - n4].0, &mut rng)
            };
            v6_frame(&mut frame, a.size.max(62), dst, a.ttl, i);
            v6 += 1;
        }
        w.write(Duration::from_micros(i), &frame)?;
    }
    w.finish()?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "frames": a.frames,
                "ipv4": v4,
                "ipv6": v6,
                "bytes_per_frame": a.size,
                "out": a.out.display().to_string(),
                "routes": path.display().to_string(),
                "ipv4_routes": n4,
                "ipv6_routes": n6,
                "to_prefixes": a.frames - to_unknown,
                "to_unknown": to_unknown,
            })
        );
    } else {
        println!(
            "wrote {} IP frames ({v4} IPv4, {v6} IPv6) of {} bytes to {}: {} to prefixes of {} ({n4} IPv4, {n6} IPv6 routes), {to_unknown} to addresses no route covers",
            a.frames,
            a.size,
            a.out.display(),
            a.frames - to_unknown,
            path.display()
        );
    }
    Ok(())
}
