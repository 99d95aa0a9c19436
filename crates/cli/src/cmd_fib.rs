//! `nexthop fib build | lookup | update | stats`.

use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use nexthop_othello::fib::{
    parse_changes, parse_routes, ActionTable, ConciseFib, FibError, KeyType, LineError, NameKey,
    RouteChange,
};
use nexthop_othello::{Config, MappedQuery, QueryView, Sizing, MISS};

use crate::textio::count;
use nexthop_othello::fibdir::{self, Current, ACTIONS, CONTROL, SNAPSHOT};

/// Run `$body` with `$K` bound to the Rust type of key type `$kt`.
macro_rules! with_key_type {
    ($kt:expr, $K:ident => $body:expr) => {
        match $kt {
            KeyType::Mac => {
                type $K = [u8; 6];
                $body
            }
            KeyType::Ipv4 => {
                type $K = std::net::Ipv4Addr;
                $body
            }
            KeyType::Ipv6 => {
                type $K = std::net::Ipv6Addr;
                $body
            }
            KeyType::U64 => {
                type $K = u64;
                $body
            }
            KeyType::Str => {
                type $K = Vec<u8>;
                $body
            }
        }
    };
}

/// Names per batched lookup.
const CHUNK: usize = 4096;

/// Options of `fib build`.
#[derive(Clone, Debug)]
pub struct BuildOpts {
    pub key_type: KeyType,
    pub value_bits: u8,
    pub check_bits: u8,
    pub sizing: Sizing,
    pub capacity: Option<usize>,
    pub seed: Option<u64>,
    pub stash_capacity: usize,
}

impl BuildOpts {
    pub fn config(&self) -> Result<Config> {
        let cfg = Config {
            value_bits: self.value_bits,
            check_bits: self.check_bits,
            sizing: self.sizing,
            seed: self.seed.unwrap_or(Config::default().seed),
            stash_capacity: self.stash_capacity,
            ..Config::default()
        };
        cfg.validate().context("invalid configuration")?;
        Ok(cfg)
    }
}

/// What a build did, with timings (`fib build --json` prints it).
#[derive(Clone, Debug, serde::Serialize)]
pub struct BuildReport {
    pub names: usize,
    pub actions: usize,
    pub generation: u64,
    pub parse_secs: f64,
    pub build_secs: f64,
    pub write_secs: f64,
}

/// What an update did, with timings (`fib update --json` prints it).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct UpdateReport {
    pub changes: usize,
    pub adds: usize,
    pub deletes: usize,
    pub sets: usize,
    pub slot_writes: usize,
    pub rebuilds: usize,
    pub names: usize,
    pub from_generation: u64,
    pub generation: u64,
    pub load_secs: f64,
    pub apply_secs: f64,
    pub write_secs: f64,
}

impl UpdateReport {
    pub fn summary(&self, dir: &Path) -> String {
        format!(
            "applied {} ({}, {}, {}) to {}: {}, {}; generation {} -> {}, {}",
            count(self.changes as u64, "change", "changes"),
            count(self.adds as u64, "add", "adds"),
            count(self.deletes as u64, "delete", "deletes"),
            count(self.sets as u64, "action change", "action changes"),
            dir.display(),
            count(self.slot_writes as u64, "slot write", "slot writes"),
            match self.rebuilds {
                0 => "no rebuild".to_string(),
                n => format!(
                    "rebuilt ({}: new seed or larger arrays)",
                    count(n as u64, "rebuild", "rebuilds")
                ),
            },
            self.from_generation,
            self.generation,
            count(self.names as u64, "name", "names")
        )
    }
}

pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{}: not valid UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

fn line_err(path: &Path, e: LineError) -> anyhow::Error {
    anyhow!("{}:{}: {}", path.display(), e.line, e.reason)
}

fn fib_err(path: &Path, e: FibError) -> anyhow::Error {
    match e {
        FibError::AtLine { line, error } => anyhow!("{}:{line}: {error}", path.display()),
        other => anyhow!("{}: {other}", path.display()),
    }
}

/// Write `fib` as a new generation of `dir`; returns the generation.
fn commit_fib<K: NameKey>(dir: &Path, key_type: KeyType, fib: &ConciseFib<K>) -> Result<u64> {
    let done = fibdir::commit_fib(dir, key_type, fib)?;
    for (path, err) in &done.not_removed {
        eprintln!("warning: {}: could not remove: {err}", path.display());
    }
    Ok(done.generation)
}

fn build_typed<K: NameKey>(
    opts: &BuildOpts,
    cfg: Config,
    routes: &Path,
    out: &Path,
) -> Result<BuildReport> {
    let t = Instant::now();
    let text = read_text(routes)?;
    let parsed = parse_routes::<K>(&text).map_err(|e| line_err(routes, e))?;
    drop(text);
    let parse_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let fib = ConciseFib::build_with_capacity(cfg, opts.capacity.unwrap_or(0), &parsed)
        .map_err(|e| fib_err(routes, e))?;
    drop(parsed);
    let build_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let generation = commit_fib(out, opts.key_type, &fib)?;
    Ok(BuildReport {
        names: fib.len(),
        actions: fib.action_table().len(),
        generation,
        parse_secs,
        build_secs,
        write_secs: t.elapsed().as_secs_f64(),
    })
}

/// Build the FIB directory `out` from the routes file `routes`, replacing
/// the FIB already there. The caller has checked `out` with
/// [`fibdir::check_build_target`].
pub fn build_dir(opts: &BuildOpts, routes: &Path, out: &Path) -> Result<BuildReport> {
    let cfg = opts.config()?;
    with_key_type!(opts.key_type, K => build_typed::<K>(opts, cfg, routes, out))
}

/// `nexthop fib build`.
pub fn build(opts: &BuildOpts, routes: &Path, out: &Path, json: bool) -> Result<()> {
    opts.config()?;
    fibdir::check_build_target(out, &[])?;
    let r = build_dir(opts, routes, out)?;
    if json {
        let mut v = serde_json::to_value(&r)?;
        v["fib"] = out.display().to_string().into();
        v["key_type"] = opts.key_type.name().into();
        println!("{v}");
        return Ok(());
    }
    println!(
        "built {}: {} (key type {}), {}, generation {} (parse {:.2} s, build {:.2} s, write {:.2} s)",
        out.display(),
        count(r.names as u64, "name", "names"),
        opts.key_type,
        count(r.actions as u64, "action", "actions"),
        r.generation,
        r.parse_secs,
        r.build_secs,
        r.write_secs
    );
    Ok(())
}

/// The data-plane side of a FIB directory: the mapped snapshot and actions.
#[derive(Debug)]
pub struct LookupFib {
    pub current: Current,
    pub actions: ActionTable,
    pub mapped: MappedQuery,
}

/// Open the current generation for lookups, verifying checksums. A
/// generation removed by updates while it was being opened is resolved
/// again, once ([`fibdir::open_retrying`]); once open, the mapping outlives
/// its files.
pub fn open_lookup(dir: &Path) -> Result<LookupFib> {
    fibdir::open_retrying(dir, open_lookup_generation)
}

fn open_lookup_generation(current: Current) -> Result<LookupFib> {
    let actions_path = current.path(ACTIONS);
    let actions = ActionTable::from_text(&current.read_actions_text()?)
        .map_err(|e| line_err(&actions_path, e))?;
    // Check the manifest checksum, then map (which checks the snapshot's own).
    current.read_verified(SNAPSHOT)?;
    let snap = current.path(SNAPSHOT);
    let mapped = MappedQuery::open(&snap).map_err(|e| anyhow!("{}: {e}", snap.display()))?;
    let meta = *mapped.view().meta();
    let c = &current.manifest.config;
    if (meta.value_bits, meta.check_bits) != (c.value_bits, c.check_bits) {
        return Err(anyhow!(
            "{}: widths l = {}, r = {} differ from the manifest's l = {}, r = {}",
            snap.display(),
            meta.value_bits,
            meta.check_bits,
            c.value_bits,
            c.check_bits
        ));
    }
    Ok(LookupFib {
        current,
        actions,
        mapped,
    })
}

/// Batched lookups of parsed names, answers written one per line: the
/// action as text, or with `json` an object `{"name", "action"}` (`action`
/// null for a miss).
struct Looker<'a, K, W: Write> {
    view: QueryView<'a>,
    actions: &'a ActionTable,
    batch: Vec<K>,
    /// The batch's names as given (`json` only).
    names: Vec<String>,
    ids: Vec<u64>,
    json: bool,
    w: W,
}

impl<K: NameKey, W: Write> Looker<'_, K, W> {
    /// Queue one name; a malformed name answers the names before it and
    /// stops with an error naming `at()` (`argument N`, `stdin:N`): the
    /// names after it are not looked up.
    fn push(&mut self, name: &str, at: impl FnOnce() -> String) -> Result<()> {
        match K::parse_name(name) {
            Ok(k) => self.batch.push(k),
            Err(why) => return self.invalid(name, &why, at()),
        }
        if self.json {
            self.names.push(name.to_string());
        }
        if self.batch.len() == CHUNK {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn invalid(&mut self, name: &str, why: &str, at: String) -> Result<()> {
        self.finish()?;
        Err(anyhow!(
            "{at}: invalid name '{name}': {why} (the names before it were answered, the names after it were not looked up)"
        ))
    }

    /// Look up the queued names, writing one answer per line.
    fn flush_batch(&mut self) -> io::Result<()> {
        let n = self.batch.len();
        self.view.lookup_batch(&self.batch, &mut self.ids[..n]);
        for (i, &id) in self.ids[..n].iter().enumerate() {
            let action = (id != MISS).then(|| self.actions.get(id)).flatten();
            if self.json {
                let v = serde_json::json!({
                    "name": self.names[i],
                    "action": action.map(|a| a.to_string()),
                });
                writeln!(self.w, "{v}")?;
                continue;
            }
            match action {
                Some(a) => writeln!(self.w, "{a}")?,
                None => self.w.write_all(b"miss\n")?,
            }
        }
        self.batch.clear();
        self.names.clear();
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush_batch()?;
        self.w.flush()
    }
}

fn lookup_typed<K: NameKey>(fib: &LookupFib, names: &[String], json: bool) -> Result<()> {
    let mut l = Looker::<K, _> {
        view: fib.mapped.view(),
        actions: &fib.actions,
        batch: Vec::with_capacity(CHUNK),
        names: Vec::new(),
        ids: vec![0u64; CHUNK],
        json,
        w: BufWriter::with_capacity(1 << 16, io::stdout().lock()),
    };
    if !names.is_empty() {
        for (i, n) in names.iter().enumerate() {
            l.push(n, || format!("argument {}", i + 1))?;
        }
    } else {
        let mut stdin = io::stdin().lock();
        let mut line = Vec::new();
        let mut number = 0usize;
        loop {
            line.clear();
            if stdin
                .read_until(b'\n', &mut line)
                .context("reading names from stdin")?
                == 0
            {
                break;
            }
            number += 1;
            match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() || text.trim_start().starts_with('#') => {}
                Ok(text) => l.push(text.trim(), || format!("stdin:{number}"))?,
                Err(_) => {
                    let lossy = String::from_utf8_lossy(&line).trim().to_string();
                    return l.invalid(&lossy, "not valid UTF-8", format!("stdin:{number}"));
                }
            }
        }
    }
    l.finish()?;
    Ok(())
}

/// `nexthop fib lookup`: names from `names`, or from stdin (one per line;
/// blank lines and `#` comment lines skipped) when `names` is empty; JSON
/// lines with `json`.
pub fn lookup(dir: &Path, names: &[String], json: bool) -> Result<()> {
    let fib = open_lookup(dir)?;
    with_key_type!(fib.current.key_type, K => lookup_typed::<K>(&fib, names, json))
}

/// Load the control side of the current generation (verified).
fn load_control<K: NameKey>(cur: &Current) -> Result<ConciseFib<K>> {
    let control = cur.read_verified(CONTROL)?;
    let actions = cur.read_actions_text()?;
    ConciseFib::<K>::load_control(&control, &actions).map_err(|e| match e {
        FibError::Actions(le) => line_err(&cur.path(ACTIONS), le),
        FibError::UnknownActionId { .. } => anyhow!(
            "{} and {}: {e}",
            cur.path(CONTROL).display(),
            cur.path(ACTIONS).display()
        ),
        other => anyhow!("{}: {other}", cur.path(CONTROL).display()),
    })
}

fn update_typed<K: NameKey>(
    dir: &Path,
    cur: &Current,
    path: &Path,
    text: &str,
) -> Result<UpdateReport> {
    let changes = parse_changes::<K>(text).map_err(|e| line_err(path, e))?;
    let t = Instant::now();
    let mut fib = load_control::<K>(cur)?;
    let load_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let applied = fib.apply_changes(&changes).map_err(|e| fib_err(path, e))?;
    let apply_secs = t.elapsed().as_secs_f64();
    let mut r = UpdateReport {
        changes: changes.len(),
        names: fib.len(),
        from_generation: cur.manifest.generation,
        load_secs,
        apply_secs,
        ..UpdateReport::default()
    };
    for (_, c) in &changes {
        match c {
            RouteChange::Add(..) => r.adds += 1,
            RouteChange::Delete(_) => r.deletes += 1,
            RouteChange::Set(..) => r.sets += 1,
        }
    }
    for c in &applied {
        r.slot_writes += c.writes(0).len();
        r.rebuilds += c.is_rebuild() as usize;
    }
    let t = Instant::now();
    r.generation = commit_fib(dir, cur.key_type, &fib)?;
    r.write_secs = t.elapsed().as_secs_f64();
    Ok(r)
}

/// Apply the changes file `changes` to the FIB at `dir`, all or nothing,
/// writing a new generation.
pub fn update_dir(dir: &Path, changes: &Path) -> Result<UpdateReport> {
    let cur = fibdir::open(dir)?;
    let text = read_text(changes)?;
    with_key_type!(cur.key_type, K => update_typed::<K>(dir, &cur, changes, &text))
}

/// `nexthop fib update`.
pub fn update(dir: &Path, changes: &Path, json: bool) -> Result<()> {
    let r = update_dir(dir, changes)?;
    if json {
        let mut v = serde_json::to_value(&r)?;
        v["fib"] = dir.display().to_string().into();
        println!("{v}");
        return Ok(());
    }
    println!("{}", r.summary(dir));
    Ok(())
}

fn stats_typed<K: NameKey>(dir: &Path, cur: &Current, json: bool) -> Result<()> {
    let fib = load_control::<K>(cur)?;
    let s = fib.othello().stats();
    let cfg = fib.othello().config();
    let c = s.counters;
    let snapshot_bytes = cur
        .manifest
        .files
        .iter()
        .find(|f| f.name == SNAPSHOT)
        .map_or(0, |f| f.bytes);
    let v = serde_json::json!({
        "fib": dir.display().to_string(),
        "key_type": cur.key_type.name(),
        "names": s.len,
        "capacity": s.capacity,
        "value_bits": s.meta.value_bits,
        "check_bits": s.meta.check_bits,
        "ma": s.meta.ma,
        "mb": s.meta.mb,
        "slot_bytes": s.slot_bytes,
        "data_plane_bytes": s.query_bytes,
        "snapshot_file_bytes": snapshot_bytes,
        "bits_per_key": s.bits_per_key,
        "seed": s.meta.seed,
        "config_seed": cfg.seed,
        "generation": cur.manifest.generation,
        "othello_generation": s.meta.generation,
        "sizing": s.meta.sizing.to_string(),
        "stash_entries": s.stash_len,
        "stash_capacity": cfg.stash_capacity,
        "actions": fib.action_table().len(),
        "action_table": fib.action_table().iter().map(|(_, a)| a.to_string()).collect::<Vec<_>>(),
        "grow_rebuilds": c.grow_rebuilds,
        "reseed_rebuilds": c.reseed_rebuilds,
        "stashed_total": c.stashed,
        "slot_writes_total": c.slot_writes,
    });
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &v).map_err(io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    let bpk = s
        .bits_per_key
        .map_or("-".to_string(), |b| format!("{b:.2}"));
    let actions: Vec<String> = fib
        .action_table()
        .iter()
        .map(|(i, a)| format!("{i}={a}"))
        .collect();
    let rows: Vec<(&str, String)> = vec![
        ("fib", dir.display().to_string()),
        ("key type", cur.key_type.to_string()),
        ("names (n)", s.len.to_string()),
        ("capacity", s.capacity.to_string()),
        ("value bits (l)", s.meta.value_bits.to_string()),
        ("check bits (r)", s.meta.check_bits.to_string()),
        ("ma", s.meta.ma.to_string()),
        ("mb", s.meta.mb.to_string()),
        ("slot bytes", s.slot_bytes.to_string()),
        ("data-plane bytes", s.query_bytes.to_string()),
        ("bits/key", bpk),
        (
            "seed",
            format!("{:#018x} (config seed {:#018x})", s.meta.seed, cfg.seed),
        ),
        (
            "generation",
            format!(
                "{} (othello generation {})",
                cur.manifest.generation, s.meta.generation
            ),
        ),
        ("sizing", s.meta.sizing.to_string()),
        (
            "stash entries",
            format!("{} of {}", s.stash_len, cfg.stash_capacity),
        ),
        (
            "actions",
            format!("{} [{}]", fib.action_table().len(), actions.join(" ")),
        ),
        ("grow rebuilds", c.grow_rebuilds.to_string()),
        ("reseed rebuilds", c.reseed_rebuilds.to_string()),
        ("stashed on insert", c.stashed.to_string()),
        ("slot writes (total)", c.slot_writes.to_string()),
    ];
    for (k, v) in rows {
        writeln!(out, "{k:<20} {v}")?;
    }
    Ok(())
}

/// `nexthop fib stats`.
pub fn stats(dir: &Path, json: bool) -> Result<()> {
    fibdir::open_retrying(
        dir,
        |cur| with_key_type!(cur.key_type, K => stats_typed::<K>(dir, &cur, json)),
    )
}
