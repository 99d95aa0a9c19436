//! The on-disk FIB directory: generations, manifest, checksums, atomic
//! replacement.
//!
//! ```text
//! DIR/
//!   current -> gen-N          symlink, replaced atomically by rename
//!   gen-N/
//!     manifest.json           format, key type, config, generation, files + XXH3-64
//!     control.bin             Othello::save (names, graph, slot words)
//!     snapshot.bin            Othello::snapshot(0): what the data plane maps
//!     actions.txt             "ID ACTION" lines
//! ```
//!
//! A new generation is written to `gen-(N+1).tmp`, every file fsynced, the
//! directory renamed to `gen-(N+1)`, a symlink made under a temporary name
//! and renamed over `current`, the directory fsynced, and then older
//! generations removed. A reader that follows `current` therefore sees a
//! whole old or a whole new generation, and a crash at any point leaves a
//! valid FIB (at worst with a stale `*.tmp` that the next write removes).
//!
//! One writer at a time: concurrent `build`/`update` runs on one directory
//! are not coordinated.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use nexthop_othello::fib::KeyType;
use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "nexthop-fib";
pub const FORMAT_VERSION: u32 = 1;
pub const CURRENT: &str = "current";
pub const MANIFEST: &str = "manifest.json";
pub const CONTROL: &str = "control.bin";
pub const SNAPSHOT: &str = "snapshot.bin";
pub const ACTIONS: &str = "actions.txt";
const REQUIRED: [&str; 3] = [CONTROL, SNAPSHOT, ACTIONS];

/// The configuration a FIB was built with (informational except key type).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ManifestConfig {
    pub value_bits: u8,
    pub check_bits: u8,
    pub sizing: String,
    pub seed: u64,
    pub stash_capacity: usize,
}

/// One data file of a generation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    pub name: String,
    pub bytes: u64,
    /// XXH3-64 (seed 0), as `0x` and 16 hex digits.
    pub xxh3_64: String,
}

/// `gen-N/manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    pub key_type: String,
    pub generation: u64,
    pub names: usize,
    pub actions: usize,
    pub config: ManifestConfig,
    pub files: Vec<FileEntry>,
}

impl Manifest {
    pub fn key_type(&self) -> Result<KeyType> {
        Ok(self.key_type.parse()?)
    }
}

fn checksum_hex(bytes: &[u8]) -> String {
    format!("{:#018x}", nexthop_hash::hash64(bytes, 0))
}

fn gen_name(n: u64) -> String {
    format!("gen-{n}")
}

/// `N` of a `gen-N` name (canonical decimal only).
fn parse_gen(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("gen-")?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// Whether `dir` holds a FIB (a `current` symlink to a `gen-N`).
pub fn is_fib(dir: &Path) -> bool {
    current_generation(dir).is_ok()
}

/// The generation `current` points at.
pub fn current_generation(dir: &Path) -> Result<u64> {
    let link = dir.join(CURRENT);
    let target = fs::read_link(&link).with_context(|| {
        format!(
            "{}: not a FIB directory (no '{CURRENT}' symlink)",
            dir.display()
        )
    })?;
    target.to_str().and_then(parse_gen).with_context(|| {
        format!(
            "{}: points to {}, not gen-N",
            link.display(),
            target.display()
        )
    })
}

/// Refuse to build into `dir` unless it is absent, already a FIB, or holds
/// nothing but files named in `allowed`.
pub fn check_build_target(dir: &Path, allowed: &[&str]) -> Result<()> {
    match fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{}: cannot read directory", dir.display())),
        Ok(mut entries) => {
            let only_allowed = entries.all(|e| {
                e.is_ok_and(|e| allowed.iter().any(|a| e.file_name().to_str() == Some(*a)))
            });
            if only_allowed || is_fib(dir) {
                Ok(())
            } else {
                bail!(
                    "{}: directory is not empty and is not a FIB (no '{CURRENT}' symlink); \
                     refusing to overwrite it",
                    dir.display()
                )
            }
        }
    }
}

fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("{}: fsync", dir.display()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).with_context(|| format!("{}: create", path.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("{}: write", path.display()))
}

/// Write a new generation holding `files` (name, bytes) and make it current.
/// `manifest.generation` and `manifest.files` are filled in here. Returns
/// the new generation number.
pub fn commit(dir: &Path, manifest: &mut Manifest, files: &[(&str, &[u8])]) -> Result<u64> {
    if !dir.exists() {
        fs::create_dir_all(dir).with_context(|| format!("{}: create directory", dir.display()))?;
        // Make the new directory's own entry durable too.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fsync_dir(parent)?;
        }
    }
    let mut last = current_generation(dir).unwrap_or(0);
    for e in fs::read_dir(dir).with_context(|| format!("{}: read directory", dir.display()))? {
        let name = e?.file_name();
        let name = name.to_string_lossy();
        let base = name.strip_suffix(".tmp").unwrap_or(&name);
        if let Some(n) = parse_gen(base) {
            last = last.max(n);
        }
    }
    let gen = last.checked_add(1).context("generation counter overflow")?;
    let final_dir = dir.join(gen_name(gen));
    let tmp = dir.join(format!("{}.tmp", gen_name(gen)));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).with_context(|| format!("{}: remove stale", tmp.display()))?;
    }
    fs::create_dir(&tmp).with_context(|| format!("{}: create", tmp.display()))?;

    manifest.generation = gen;
    manifest.files = files
        .iter()
        .map(|(name, bytes)| FileEntry {
            name: name.to_string(),
            bytes: bytes.len() as u64,
            xxh3_64: checksum_hex(bytes),
        })
        .collect();
    for (name, bytes) in files {
        write_synced(&tmp.join(name), bytes)?;
    }
    let mut json = serde_json::to_vec_pretty(manifest).context("encoding manifest")?;
    json.push(b'\n');
    write_synced(&tmp.join(MANIFEST), &json)?;
    fsync_dir(&tmp)?;
    fs::rename(&tmp, &final_dir).with_context(|| format!("{}: rename", tmp.display()))?;
    fsync_dir(dir)?;

    let link_tmp = dir.join(format!("{CURRENT}.tmp"));
    if fs::symlink_metadata(&link_tmp).is_ok() {
        fs::remove_file(&link_tmp)
            .with_context(|| format!("{}: remove stale", link_tmp.display()))?;
    }
    std::os::unix::fs::symlink(gen_name(gen), &link_tmp)
        .with_context(|| format!("{}: symlink", link_tmp.display()))?;
    fs::rename(&link_tmp, dir.join(CURRENT))
        .with_context(|| format!("{}: rename over {CURRENT}", link_tmp.display()))?;
    fsync_dir(dir)?;

    // The new generation is committed; failing to tidy up is only a warning.
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let base = name.strip_suffix(".tmp").unwrap_or(&name);
            if parse_gen(base).is_some_and(|n| n != gen || base != name) {
                if let Err(err) = fs::remove_dir_all(e.path()) {
                    eprintln!("warning: {}: could not remove: {err}", e.path().display());
                }
            }
        }
    }
    Ok(gen)
}

/// The current generation's manifest, validated, and its directory.
#[derive(Debug)]
pub struct Current {
    pub manifest: Manifest,
    pub gen_dir: PathBuf,
    pub key_type: KeyType,
}

impl Current {
    /// Path of data file `name` in this generation.
    pub fn path(&self, name: &str) -> PathBuf {
        self.gen_dir.join(name)
    }

    /// Read data file `name` and check its size and checksum against the
    /// manifest.
    pub fn read_verified(&self, name: &str) -> Result<Vec<u8>> {
        let path = self.path(name);
        let entry = self
            .manifest
            .files
            .iter()
            .find(|f| f.name == name)
            .with_context(|| format!("{}: not listed in {MANIFEST}", path.display()))?;
        let bytes = fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
        if bytes.len() as u64 != entry.bytes {
            bail!(
                "{}: size mismatch: manifest says {} bytes, file has {} (truncated or replaced?)",
                path.display(),
                entry.bytes,
                bytes.len()
            );
        }
        let sum = checksum_hex(&bytes);
        if sum != entry.xxh3_64 {
            bail!(
                "{}: checksum mismatch: manifest says {}, file has {} (the file is corrupted)",
                path.display(),
                entry.xxh3_64,
                sum
            );
        }
        Ok(bytes)
    }

    /// Read `actions.txt` (verified) as text.
    pub fn read_actions_text(&self) -> Result<String> {
        let bytes = self.read_verified(ACTIONS)?;
        String::from_utf8(bytes)
            .with_context(|| format!("{}: not valid UTF-8", self.path(ACTIONS).display()))
    }
}

/// Open the current generation of the FIB at `dir` and validate its manifest.
pub fn open(dir: &Path) -> Result<Current> {
    let gen = current_generation(dir)?;
    let gen_dir = dir.join(gen_name(gen));
    let mpath = gen_dir.join(MANIFEST);
    let text = fs::read(&mpath).with_context(|| format!("{}: cannot read", mpath.display()))?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .with_context(|| format!("{}: invalid manifest", mpath.display()))?;
    let bad = |what: String| anyhow::anyhow!("{}: {what}", mpath.display());
    if manifest.format != FORMAT {
        return Err(bad(format!(
            "format is '{}', expected '{FORMAT}'",
            manifest.format
        )));
    }
    if manifest.format_version != FORMAT_VERSION {
        return Err(bad(format!(
            "unsupported format version {} (this build reads {FORMAT_VERSION})",
            manifest.format_version
        )));
    }
    if manifest.generation != gen {
        return Err(bad(format!(
            "generation {} does not match its directory gen-{gen}",
            manifest.generation
        )));
    }
    let key_type = manifest.key_type().map_err(|e| bad(e.to_string()))?;
    for name in REQUIRED {
        if !manifest.files.iter().any(|f| f.name == name) {
            return Err(bad(format!("missing file entry '{name}'")));
        }
    }
    Ok(Current {
        manifest,
        gen_dir,
        key_type,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            key_type: "u64".into(),
            generation: 0,
            names: 0,
            actions: 0,
            config: ManifestConfig {
                value_bits: 8,
                check_bits: 0,
                sizing: "pow2".into(),
                seed: 1,
                stash_capacity: 16,
            },
            files: vec![],
        }
    }

    fn files(tag: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
        REQUIRED.iter().map(|n| (*n, tag.to_vec())).collect()
    }

    fn commit_files(dir: &Path, tag: &[u8]) -> u64 {
        let f = files(tag);
        let refs: Vec<(&str, &[u8])> = f.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        commit(dir, &mut manifest(), &refs).unwrap()
    }

    #[test]
    fn generation_names_are_canonical() {
        assert_eq!(parse_gen("gen-12"), Some(12));
        assert_eq!(parse_gen("gen-0"), Some(0));
        for bad in [
            "gen-",
            "gen-012",
            "gen-1x",
            "gen--1",
            "gen-1.tmp",
            "current",
        ] {
            assert_eq!(parse_gen(bad), None, "{bad}");
        }
    }

    #[test]
    fn commit_replaces_current_and_removes_old_generations() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("fib");
        assert_eq!(commit_files(&dir, b"one"), 1);
        fs::create_dir(dir.join("gen-7.tmp")).unwrap();
        assert_eq!(commit_files(&dir, b"two"), 8);
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["current", "gen-8"]);
        let cur = open(&dir).unwrap();
        assert_eq!(cur.read_verified(CONTROL).unwrap(), b"two");
    }

    #[test]
    fn corrupted_or_truncated_files_are_named_in_errors() {
        let t = tempfile::tempdir().unwrap();
        commit_files(t.path(), b"payload");
        let cur = open(t.path()).unwrap();
        fs::write(cur.path(SNAPSHOT), b"paYload").unwrap();
        let e = format!("{:#}", cur.read_verified(SNAPSHOT).unwrap_err());
        assert!(e.contains("gen-1/snapshot.bin: checksum mismatch"), "{e}");
        fs::write(cur.path(CONTROL), b"pay").unwrap();
        let e = format!("{:#}", cur.read_verified(CONTROL).unwrap_err());
        assert!(e.contains("gen-1/control.bin: size mismatch"), "{e}");
    }

    #[test]
    fn build_target_must_be_empty_or_a_fib() {
        let t = tempfile::tempdir().unwrap();
        check_build_target(&t.path().join("absent"), &[]).unwrap();
        check_build_target(t.path(), &[]).unwrap();
        fs::write(t.path().join("notes.txt"), b"x").unwrap();
        let e = check_build_target(t.path(), &[]).unwrap_err().to_string();
        assert!(e.contains("not a FIB"), "{e}");
        check_build_target(t.path(), &["notes.txt"]).unwrap();
        let fib = t.path().join("fib");
        commit_files(&fib, b"x");
        check_build_target(&fib, &[]).unwrap();
    }
}
