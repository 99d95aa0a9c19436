//! `nexthop lpm build | lookup | update | stats`: Bloomfwd IP tables in a
//! single file (format in `nexthop_lpm::persist`), replaced atomically
//! (temporary file + rename) by `update`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nexthop_lpm::parse::{load_routes, load_updates, parse_addr, NextHopMode, UpdateKind};
use nexthop_lpm::persist::{FamilyStats, LpmTable, DEFAULT_V6_LEVELS};
use nexthop_lpm::{Config, HashKind};

use crate::textio::{for_each_input, write_atomic};

/// `nexthop lpm` subcommands.
#[derive(Debug, Subcommand)]
pub enum LpmCmd {
    /// Build a table file from a route file (prefix/len next-hop per line,
    /// IPv4 and IPv6 mixed, # comments; plain or gzip).
    Build(BuildArgs),
    /// Look addresses up (arguments, or stdin one per line): one next hop
    /// per line, `-` when no route matches.
    Lookup(LookupArgs),
    /// Apply an update stream (time a|w prefix [next-hop]) in place,
    /// atomically; on any malformed line nothing changes.
    Update(UpdateArgs),
    /// Memory per structure, prefixes before/after expansion, measured
    /// false-positive rates.
    Stats(StatsArgs),
}

/// `nexthop lpm build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Route file.
    #[arg(long, value_name = "FILE")]
    routes: PathBuf,
    /// Table file to write (replaced atomically).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The second field is an origin AS number: next hop = asn % 250 + 1
    /// (the RouteViews tables: prefix/len, a tab, the AS number).
    #[arg(long)]
    asn: bool,
    /// Number of IPv6 expansion levels chosen by DPCPE.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_V6_LEVELS)]
    v6_levels: usize,
    /// Target false-positive rate of every Bloom filter.
    #[arg(long, value_name = "F", default_value_t = 0.3)]
    fpr: f64,
    /// Hash of the IPv4 filters and tables (h2, murmur3, knuth).
    #[arg(long, value_name = "HASH", default_value = "h2")]
    hash: HashKind,
}

/// `nexthop lpm lookup`.
#[derive(Debug, Args)]
pub struct LookupArgs {
    /// Table file.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// Addresses (IPv4 or IPv6); without any, read from stdin one per line
    /// (blank lines and # comment lines are skipped).
    #[arg(value_name = "ADDR")]
    addrs: Vec<String>,
}

/// `nexthop lpm update`.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// Table file, replaced atomically.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// Update stream (plain or gzip).
    #[arg(long, value_name = "FILE")]
    updates: PathBuf,
}

/// `nexthop lpm stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Table file.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// Random absent keys per filter for the measured false-positive rate.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    samples: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Run one `nexthop lpm` subcommand.
pub fn run(cmd: LpmCmd) -> Result<()> {
    match cmd {
        LpmCmd::Build(a) => build(&a),
        LpmCmd::Lookup(a) => lookup(&a),
        LpmCmd::Update(a) => update(&a),
        LpmCmd::Stats(a) => stats(&a),
    }
}

fn load_table(path: &Path) -> Result<LpmTable> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    LpmTable::decode(&bytes).with_context(|| format!("{}", path.display()))
}

fn build(a: &BuildArgs) -> Result<()> {
    let mode = if a.asn {
        NextHopMode::Asn
    } else {
        NextHopMode::Raw
    };
    let routes = load_routes(&a.routes, mode)?;
    let mut v4 = Config::ipv4();
    v4.fpr = a.fpr;
    v4.filter_hash = a.hash;
    v4.table_hash = a.hash;
    let mut v6 = Config::ipv6_dpcpe(&routes.v6, a.v6_levels);
    v6.fpr = a.fpr;
    let t = LpmTable::build_with(&routes, v4, v6)?;
    write_atomic(&a.out, &t.encode())?;
    println!(
        "built {}: {} IPv4 and {} IPv6 prefixes (IPv6 levels {:?})",
        a.out.display(),
        t.v4.rib().len(),
        t.v6.rib().len(),
        t.v6.config().levels
    );
    Ok(())
}

fn lookup(a: &LookupArgs) -> Result<()> {
    let t = load_table(&a.table)?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for_each_input(&a.addrs, |s| {
        let addr = parse_addr(s)?;
        match t.lookup(addr) {
            Some(nh) => writeln!(out, "{nh}")?,
            None => writeln!(out, "-")?,
        }
        Ok(())
    })?;
    out.flush()?;
    Ok(())
}

fn update(a: &UpdateArgs) -> Result<()> {
    let mut t = load_table(&a.table)?;
    // Parse everything first: a malformed line leaves the table untouched.
    let updates = load_updates(&a.updates)?;
    let (mut ann, mut wd, mut absent) = (0usize, 0usize, 0usize);
    for u in &updates {
        let changed = t.apply(u);
        match u.kind {
            UpdateKind::Announce(_) => ann += 1,
            UpdateKind::Withdraw if changed => wd += 1,
            UpdateKind::Withdraw => absent += 1,
        }
    }
    write_atomic(&a.table, &t.encode())?;
    println!(
        "applied {} updates: {ann} announces, {wd} withdraws, {absent} withdraws of absent prefixes; {} IPv4 and {} IPv6 prefixes",
        updates.len(),
        t.v4.rib().len(),
        t.v6.rib().len()
    );
    Ok(())
}

fn family_json(s: &FamilyStats) -> serde_json::Value {
    serde_json::json!({
        "prefixes": s.prefixes,
        "lookup_bytes": s.lookup_bytes,
        "bytes_per_prefix": if s.prefixes == 0 { 0.0 } else { s.lookup_bytes as f64 / s.prefixes as f64 },
        "direct": { "prefixes": s.direct_prefixes, "bytes": s.direct_bytes, "bits": s.config.direct_bits },
        "sub_masks": { "refined_slots": s.refined.0, "refined_sub_slots": s.refined.1, "bytes": s.sub_mask_bytes },
        "fpr_target": s.config.fpr,
        "filter_hash": s.config.filter_hash.name(),
        "table_hash": s.config.table_hash.name(),
        "groups": s.groups.iter().zip(&s.measured_fpr).map(|(g, f)| serde_json::json!({
            "level": g.level, "lengths": [g.lo, g.level], "prefixes": g.prefixes,
            "expanded": g.expanded, "filter_bits": g.filter_bits, "hashes": g.hashes,
            "filter_bytes": g.filter_bytes, "table_bytes": g.table_bytes, "measured_fpr": f,
        })).collect::<Vec<_>>(),
    })
}

fn family_text(name: &str, s: &FamilyStats) -> String {
    let mut o = String::new();
    let expanded: usize = s.groups.iter().map(|g| g.expanded).sum();
    o += &format!(
        "{name}: {} prefixes, {} after expansion; lookup structure {} bytes ({:.1} bytes/prefix); fpr target {}, hash {}/{}\n",
        s.prefixes,
        s.direct_prefixes + expanded,
        s.lookup_bytes,
        if s.prefixes == 0 { 0.0 } else { s.lookup_bytes as f64 / s.prefixes as f64 },
        s.config.fpr,
        s.config.filter_hash.name(),
        s.config.table_hash.name(),
    );
    o += &format!(
        "  direct array /0../{}: {} prefixes, {} bytes\n",
        s.config.direct_bits, s.direct_prefixes, s.direct_bytes
    );
    o += &format!(
        "  sub-masks: {} refined slots, {} refined sub-slots, {} bytes\n",
        s.refined.0, s.refined.1, s.sub_mask_bytes
    );
    for (g, f) in s.groups.iter().zip(&s.measured_fpr) {
        o += &format!(
            "  group /{}../{}: {} prefixes -> {} expanded; filter {} bits k={} ({} bytes), table {} bytes; measured fpr {:.4}\n",
            g.lo, g.level, g.prefixes, g.expanded, g.filter_bits, g.hashes, g.filter_bytes, g.table_bytes, f
        );
    }
    o
}

fn stats(a: &StatsArgs) -> Result<()> {
    let t = load_table(&a.table)?;
    let (v4, v6) = t.stats(a.samples);
    if a.json {
        let j = serde_json::json!({ "ipv4": family_json(&v4), "ipv6": family_json(&v6) });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}{}", family_text("ipv4", &v4), family_text("ipv6", &v6));
    }
    Ok(())
}
