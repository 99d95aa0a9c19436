//! `nexthop lpm build | lookup | update | stats`: Bloomfwd IP tables in a
//! single file (format in `nexthop_lpm::persist`), replaced atomically
//! (temporary file + rename) by `update`. Every command prints JSON with
//! `--json`; next hops print the way the route file wrote them (dotted
//! quads stay dotted quads).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nexthop_lpm::parse::NextHopForm;
use nexthop_lpm::parse::{
    load_route_file_limited, load_updates_limited, parse_addr, NextHopMode, UpdateKind,
    DEFAULT_MAX_DECOMPRESSED,
};
use nexthop_lpm::persist::{FamilyStats, LpmTable, DEFAULT_MAX_MEMORY, DEFAULT_V6_LEVELS};
use nexthop_lpm::{Config, HashKind};

use crate::textio::{for_each_input, write_atomic};

/// `nexthop lpm` subcommands.
#[derive(Debug, Subcommand)]
pub enum LpmCmd {
    /// Build a table file from a route file (prefix/len next-hop per line,
    /// IPv4 and IPv6 mixed, # comments; plain or gzip; each prefix once).
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
    /// Largest estimated memory in bytes building the table may take (a
    /// configuration or file that needs more is refused with the estimate).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MEMORY)]
    max_memory: u64,
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
    /// Largest size in bytes a gzip input may decompress to (a larger
    /// one is refused as a possible gzip bomb).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_DECOMPRESSED)]
    max_decompressed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `nexthop lpm lookup`.
#[derive(Debug, Args)]
pub struct LookupArgs {
    /// Table file.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// Largest estimated memory in bytes building the table may take (a
    /// configuration or file that needs more is refused with the estimate).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MEMORY)]
    max_memory: u64,
    /// Addresses (IPv4 or IPv6); without any, read from stdin one per line
    /// (blank lines and # comment lines are skipped).
    #[arg(value_name = "ADDR")]
    addrs: Vec<String>,
    /// Print one JSON array of {"address", "next_hop"} (null when no route
    /// matches) instead of one next hop per line.
    #[arg(long)]
    json: bool,
}

/// `nexthop lpm update`.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// Table file, replaced atomically.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// Largest estimated memory in bytes building the table may take (a
    /// configuration or file that needs more is refused with the estimate).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MEMORY)]
    max_memory: u64,
    /// Update stream (plain or gzip).
    #[arg(long, value_name = "FILE")]
    updates: PathBuf,
    /// Largest size in bytes a gzip input may decompress to (a larger
    /// one is refused as a possible gzip bomb).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_DECOMPRESSED)]
    max_decompressed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `nexthop lpm stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Table file.
    #[arg(long, value_name = "FILE")]
    table: PathBuf,
    /// Largest estimated memory in bytes building the table may take (a
    /// configuration or file that needs more is refused with the estimate).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MEMORY)]
    max_memory: u64,
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

fn load_table(path: &Path, max_memory: u64) -> Result<LpmTable> {
    let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
    LpmTable::decode_with_limit(&bytes, max_memory).with_context(|| format!("{}", path.display()))
}

/// `n` and `word`, with an `s` unless `n` is 1 ("1 prefix", "2 prefixes").
fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else if word.ends_with('x') {
        format!("{n} {word}es")
    } else {
        format!("{n} {word}s")
    }
}

fn print_json(v: &serde_json::Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn build(a: &BuildArgs) -> Result<()> {
    let mode = if a.asn {
        NextHopMode::Asn
    } else {
        NextHopMode::Raw
    };
    let file = load_route_file_limited(&a.routes, mode, a.max_decompressed)?;
    let routes = &file.routes;
    let mut v4 = Config::ipv4();
    v4.fpr = a.fpr;
    v4.filter_hash = a.hash;
    v4.table_hash = a.hash;
    let mut v6 = Config::ipv6_dpcpe(&routes.v6, a.v6_levels);
    v6.fpr = a.fpr;
    let mut t = LpmTable::build_limited(routes, v4, v6, a.max_memory)?;
    t.next_hops = file.next_hops;
    write_atomic(&a.out, &t.encode())?;
    let (n4, n6) = (t.v4.rib().len(), t.v6.rib().len());
    if a.json {
        return print_json(&serde_json::json!({
            "table": a.out.display().to_string(),
            "ipv4_prefixes": n4,
            "ipv6_prefixes": n6,
            "ipv6_levels": t.v6.config().levels,
            "next_hops": next_hop_form_name(t.next_hops),
        }));
    }
    println!(
        "built {}: {} and {} (IPv6 levels {:?})",
        a.out.display(),
        count(n4, "IPv4 prefix"),
        count(n6, "IPv6 prefix"),
        t.v6.config().levels
    );
    Ok(())
}

fn next_hop_form_name(f: NextHopForm) -> &'static str {
    match f {
        NextHopForm::Integer => "integer",
        NextHopForm::Ipv4 => "ipv4",
    }
}

fn lookup(a: &LookupArgs) -> Result<()> {
    let t = load_table(&a.table, a.max_memory)?;
    let form = t.next_hops;
    if a.json {
        let mut rows = Vec::new();
        for_each_input(&a.addrs, |s| {
            let nh = t.lookup(parse_addr(s)?);
            let nh = match (nh, form) {
                (None, _) => serde_json::Value::Null,
                (Some(nh), NextHopForm::Integer) => nh.into(),
                (Some(nh), NextHopForm::Ipv4) => form.show(nh).to_string().into(),
            };
            rows.push(serde_json::json!({ "address": s, "next_hop": nh }));
            Ok(())
        })?;
        return print_json(&serde_json::Value::Array(rows));
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for_each_input(&a.addrs, |s| {
        let addr = parse_addr(s)?;
        match t.lookup(addr) {
            Some(nh) => writeln!(out, "{}", form.show(nh))?,
            None => writeln!(out, "-")?,
        }
        Ok(())
    })?;
    out.flush()?;
    Ok(())
}

fn update(a: &UpdateArgs) -> Result<()> {
    let mut t = load_table(&a.table, a.max_memory)?;
    // Parse everything first: a malformed line leaves the table untouched.
    let updates = load_updates_limited(&a.updates, a.max_decompressed)?;
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
    let (n4, n6) = (t.v4.rib().len(), t.v6.rib().len());
    if a.json {
        return print_json(&serde_json::json!({
            "table": a.table.display().to_string(),
            "updates": updates.len(),
            "announces": ann,
            "withdraws": wd,
            "absent_withdraws": absent,
            "ipv4_prefixes": n4,
            "ipv6_prefixes": n6,
        }));
    }
    println!(
        "applied {}: {}, {}, {} of absent prefixes; {} and {}",
        count(updates.len(), "update"),
        count(ann, "announce"),
        count(wd, "withdraw"),
        count(absent, "withdraw"),
        count(n4, "IPv4 prefix"),
        count(n6, "IPv6 prefix"),
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
        "{name}: {}, {} after expansion; lookup structure {} ({:.1} bytes/prefix); fpr target {}, hash {}/{}\n",
        count(s.prefixes, "prefix"),
        s.direct_prefixes + expanded,
        count(s.lookup_bytes, "byte"),
        if s.prefixes == 0 { 0.0 } else { s.lookup_bytes as f64 / s.prefixes as f64 },
        s.config.fpr,
        s.config.filter_hash.name(),
        s.config.table_hash.name(),
    );
    o += &format!(
        "  direct array /0../{}: {}, {}\n",
        s.config.direct_bits,
        count(s.direct_prefixes, "prefix"),
        count(s.direct_bytes, "byte")
    );
    o += &format!(
        "  sub-masks: {}, {}, {}\n",
        count(s.refined.0, "refined slot"),
        count(s.refined.1, "refined sub-slot"),
        count(s.sub_mask_bytes, "byte")
    );
    for (g, f) in s.groups.iter().zip(&s.measured_fpr) {
        o += &format!(
            "  group /{}../{}: {} -> {} expanded; filter {} k={} ({}), table {}; measured fpr {:.4}\n",
            g.lo,
            g.level,
            count(g.prefixes, "prefix"),
            g.expanded,
            count(g.filter_bits as usize, "bit"),
            g.hashes,
            count(g.filter_bytes, "byte"),
            count(g.table_bytes, "byte"),
            f
        );
    }
    o
}

fn stats(a: &StatsArgs) -> Result<()> {
    let t = load_table(&a.table, a.max_memory)?;
    let (v4, v6) = t.stats(a.samples);
    if a.json {
        print_json(&serde_json::json!({ "ipv4": family_json(&v4), "ipv6": family_json(&v6) }))?;
    } else {
        print!("{}{}", family_text("ipv4", &v4), family_text("ipv6", &v6));
    }
    Ok(())
}
