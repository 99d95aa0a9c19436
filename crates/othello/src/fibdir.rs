//! The on-disk FIB directory of a Concise FIB: generations, manifest,
//! checksums, atomic replacement.
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
//! `nexthop fib build` and `nexthop fib update` write it, `nexthop fib
//! lookup`, `nexthop run --fib` and `nexthop controller --fib` read it;
//! anything else (the control crate, Python) opens it with [`open`] and
//! reads the files through [`Current::read_verified`].
//!
//! # Atomic replacement
//!
//! [`commit`] writes a new generation to `gen-(N+1).tmp`, fsyncs every file,
//! renames the directory to `gen-(N+1)`, makes a symlink under a temporary
//! name and renames it over `current`, fsyncs the directory, and then
//! removes stale `*.tmp` and the generations [`Retention`] lets go. A
//! reader that follows `current` therefore sees a whole old or a whole new
//! generation, and a crash at any point leaves a valid FIB (at worst with a
//! stale `*.tmp` or an old generation that the next commit removes).
//!
//! # Old generations and readers
//!
//! A reader resolves `current` to `gen-N` and then opens its files, so a
//! commit between the two must not remove `gen-N`. [`commit`] keeps
//! ([`Retention::default`]):
//! * the previous generation, always;
//! * up to two more, each while the generation that replaced it is younger
//!   than a grace period of 60 s (a reader resolved it at most that long
//!   ago);
//! * nothing older: at most four generations exist after a commit, however
//!   fast commits come, and the extra ones go at the first commit after
//!   their grace period.
//!
//! A reader that finds its generation gone anyway (several commits while it
//! opened the files) resolves `current` again, once: [`open_retrying`]. A
//! file once opened (or mapped) stays readable after its generation is
//! removed, so only the opening is at risk.
//!
//! # Threading and processes
//!
//! One writer at a time: concurrent commits to one directory are not
//! coordinated. Readers need no lock.
//!
//! # Validation
//!
//! [`open`] checks the manifest's format name, format version, generation
//! (against its directory) and key type, and that every required file is
//! listed; [`Current::read_verified`] checks a file's size and XXH3-64
//! against the manifest before returning its bytes. Every failure is a
//! [`DirError`] naming the file.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::fib::{ConciseFib, KeyType, KeyTypeParseError, NameKey};

/// `manifest.json`'s `format`.
pub const FORMAT: &str = "nexthop-fib";
/// `manifest.json`'s `format_version` this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// The symlink to the current generation.
pub const CURRENT: &str = "current";
/// The manifest of a generation.
pub const MANIFEST: &str = "manifest.json";
/// The control state (`ConciseFib::save_control`).
pub const CONTROL: &str = "control.bin";
/// The data-plane snapshot (`Othello::snapshot(0)`).
pub const SNAPSHOT: &str = "snapshot.bin";
/// The action table, `ID ACTION` per line.
pub const ACTIONS: &str = "actions.txt";
/// The files every generation holds besides its manifest.
pub const REQUIRED: [&str; 3] = [CONTROL, SNAPSHOT, ACTIONS];

/// What went wrong reading or writing a FIB directory; every variant
/// names the path it is about.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DirError {
    /// A file system operation failed (`what` says which).
    #[error("{}: {what}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operation, e.g. `cannot read`.
        what: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// `dir` has no `current` symlink.
    #[error("{}: not a FIB directory (no '{CURRENT}' symlink)", dir.display())]
    NotAFib {
        /// The directory.
        dir: PathBuf,
        /// Why the link could not be read.
        #[source]
        source: io::Error,
    },
    /// `current` points somewhere other than a `gen-N`.
    #[error("{}: points to {}, not gen-N", link.display(), target.display())]
    BadCurrent {
        /// The `current` symlink.
        link: PathBuf,
        /// Where it points.
        target: PathBuf,
    },
    /// A build target holds other files and is not a FIB.
    #[error(
        "{}: directory is not empty and is not a FIB (no '{CURRENT}' symlink); \
         refusing to overwrite it",
        dir.display()
    )]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// A file's buffer could not be allocated; nothing was written.
    #[error(transparent)]
    OutOfMemory(#[from] crate::AllocError),
    /// The generation counter would wrap.
    #[error("{}: generation counter overflow", dir.display())]
    GenerationOverflow {
        /// The FIB directory.
        dir: PathBuf,
    },
    /// The manifest is not valid JSON of the expected shape.
    #[error("{}: invalid manifest", path.display())]
    InvalidManifest {
        /// The manifest file.
        path: PathBuf,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// The manifest's `format` is not [`FORMAT`].
    #[error("{}: format is '{found}', expected '{FORMAT}'", path.display())]
    WrongFormat {
        /// The manifest file.
        path: PathBuf,
        /// The format it names.
        found: String,
    },
    /// The manifest's `format_version` is not [`FORMAT_VERSION`].
    #[error(
        "{}: unsupported format version {found} (this build reads {FORMAT_VERSION})",
        path.display()
    )]
    UnsupportedVersion {
        /// The manifest file.
        path: PathBuf,
        /// The version it names.
        found: u32,
    },
    /// The manifest's generation differs from its directory's.
    #[error("{}: generation {manifest} does not match its directory gen-{dir}", path.display())]
    GenerationMismatch {
        /// The manifest file.
        path: PathBuf,
        /// The generation in the manifest.
        manifest: u64,
        /// The generation of the directory holding it.
        dir: u64,
    },
    /// The manifest's key type is unknown.
    #[error("{}: {source}", path.display())]
    KeyType {
        /// The manifest file.
        path: PathBuf,
        /// The parse error.
        source: KeyTypeParseError,
    },
    /// A required file has no entry in the manifest.
    #[error("{}: missing file entry '{name}'", path.display())]
    MissingEntry {
        /// The manifest file.
        path: PathBuf,
        /// The file it does not list.
        name: &'static str,
    },
    /// A file asked for is not listed in the manifest.
    #[error("{}: not listed in {MANIFEST}", path.display())]
    NotListed {
        /// The data file.
        path: PathBuf,
    },
    /// A data file's size differs from the manifest's.
    #[error(
        "{}: size mismatch: manifest says {expected} bytes, file has {got} (truncated or replaced?)",
        path.display()
    )]
    SizeMismatch {
        /// The data file.
        path: PathBuf,
        /// Bytes listed in the manifest.
        expected: u64,
        /// Bytes on disk.
        got: u64,
    },
    /// A data file's checksum differs from the manifest's.
    #[error(
        "{}: checksum mismatch: manifest says {expected}, file has {got} (the file is corrupted)",
        path.display()
    )]
    ChecksumMismatch {
        /// The data file.
        path: PathBuf,
        /// The checksum listed in the manifest.
        expected: String,
        /// The checksum of the bytes on disk.
        got: String,
    },
    /// `actions.txt` is not UTF-8.
    #[error("{}: not valid UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The decoder's error.
        #[source]
        source: std::string::FromUtf8Error,
    },
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> DirError + 'a {
    move |source| DirError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The configuration a FIB was built with (informational).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ManifestConfig {
    /// Value bits `l`.
    pub value_bits: u8,
    /// Check bits `r`.
    pub check_bits: u8,
    /// Array sizing rule (`pow2` or `tight`).
    pub sizing: String,
    /// Hash seed sequence start.
    pub seed: u64,
    /// Stash capacity.
    pub stash_capacity: usize,
}

/// One data file of a generation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileEntry {
    /// File name inside `gen-N/`.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// XXH3-64 (seed 0), as `0x` and 16 hex digits.
    pub xxh3_64: String,
}

/// `gen-N/manifest.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Name type (`mac`, `ipv4`, `ipv6`, `u64`, `str`).
    pub key_type: String,
    /// The generation `N` (filled in by [`commit`]).
    pub generation: u64,
    /// Names in the FIB.
    pub names: usize,
    /// Distinct actions in the FIB.
    pub actions: usize,
    /// How it was built.
    pub config: ManifestConfig,
    /// The data files with sizes and checksums (filled in by [`commit`]).
    pub files: Vec<FileEntry>,
}

impl Manifest {
    /// The key type it names.
    pub fn key_type(&self) -> Result<KeyType, KeyTypeParseError> {
        self.key_type.parse()
    }
}

/// The checksum a manifest lists for `bytes`: XXH3-64 (seed 0) as `0x`
/// and 16 hex digits.
pub fn checksum_hex(bytes: &[u8]) -> String {
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
pub fn current_generation(dir: &Path) -> Result<u64, DirError> {
    let link = dir.join(CURRENT);
    let target = fs::read_link(&link).map_err(|source| DirError::NotAFib {
        dir: dir.to_path_buf(),
        source,
    })?;
    match target.to_str().and_then(parse_gen) {
        Some(gen) => Ok(gen),
        None => Err(DirError::BadCurrent { link, target }),
    }
}

/// Refuse to build into `dir` unless it is absent, already a FIB, or holds
/// nothing but files named in `allowed`.
pub fn check_build_target(dir: &Path, allowed: &[&str]) -> Result<(), DirError> {
    match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(dir, "cannot read directory")(e)),
        Ok(mut entries) => {
            let only_allowed = entries.all(|e| {
                e.is_ok_and(|e| allowed.iter().any(|a| e.file_name().to_str() == Some(*a)))
            });
            if only_allowed || is_fib(dir) {
                Ok(())
            } else {
                Err(DirError::NotEmpty {
                    dir: dir.to_path_buf(),
                })
            }
        }
    }
}

fn fsync_dir(dir: &Path) -> Result<(), DirError> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io_err(dir, "fsync"))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), DirError> {
    let mut f = File::create(path).map_err(io_err(path, "create"))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(io_err(path, "write"))
}

/// Which superseded generations [`commit_with`] keeps for readers that
/// may still be opening them (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Generations before the new one kept whatever their age (at least 1:
    /// the previous generation, which a reader may have just resolved).
    pub keep: usize,
    /// Most generations before the new one kept at all; those past `keep`
    /// only while younger than `grace`.
    pub max_kept: usize,
    /// How long after it was replaced a generation past `keep` is kept.
    pub grace: std::time::Duration,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention {
            keep: 1,
            max_kept: 3,
            grace: std::time::Duration::from_secs(60),
        }
    }
}

/// What [`commit`] did.
#[derive(Debug)]
pub struct Committed {
    /// The new current generation.
    pub generation: u64,
    /// Older generations (or stale `*.tmp`) that could not be removed; the
    /// new generation is committed regardless, and the next commit tries
    /// again.
    pub not_removed: Vec<(PathBuf, io::Error)>,
}

/// Write a new generation holding `files` (name, bytes) and make it current
/// (see the module docs for the order of writes), keeping old generations
/// as [`Retention::default`] says. `manifest.generation` and
/// `manifest.files` are filled in here.
pub fn commit(
    dir: &Path,
    manifest: &mut Manifest,
    files: &[(&str, &[u8])],
) -> Result<Committed, DirError> {
    commit_with(dir, manifest, files, &Retention::default())
}

/// [`commit`], keeping old generations as `retention` says.
pub fn commit_with(
    dir: &Path,
    manifest: &mut Manifest,
    files: &[(&str, &[u8])],
    retention: &Retention,
) -> Result<Committed, DirError> {
    if !dir.exists() {
        fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
        // Make the new directory's own entry durable too.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fsync_dir(parent)?;
        }
    }
    let mut last = current_generation(dir).unwrap_or(0);
    for e in fs::read_dir(dir).map_err(io_err(dir, "read directory"))? {
        let name = e.map_err(io_err(dir, "read directory"))?.file_name();
        let name = name.to_string_lossy();
        let base = name.strip_suffix(".tmp").unwrap_or(&name);
        if let Some(n) = parse_gen(base) {
            last = last.max(n);
        }
    }
    let gen = last
        .checked_add(1)
        .ok_or_else(|| DirError::GenerationOverflow {
            dir: dir.to_path_buf(),
        })?;
    let final_dir = dir.join(gen_name(gen));
    let tmp = dir.join(format!("{}.tmp", gen_name(gen)));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(io_err(&tmp, "remove stale"))?;
    }
    fs::create_dir(&tmp).map_err(io_err(&tmp, "create"))?;

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
    let mpath = tmp.join(MANIFEST);
    let mut json =
        serde_json::to_vec_pretty(manifest).map_err(|source| DirError::InvalidManifest {
            path: mpath.clone(),
            source,
        })?;
    json.push(b'\n');
    write_synced(&mpath, &json)?;
    fsync_dir(&tmp)?;
    fs::rename(&tmp, &final_dir).map_err(io_err(&tmp, "rename"))?;
    fsync_dir(dir)?;

    let link_tmp = dir.join(format!("{CURRENT}.tmp"));
    if fs::symlink_metadata(&link_tmp).is_ok() {
        fs::remove_file(&link_tmp).map_err(io_err(&link_tmp, "remove stale"))?;
    }
    std::os::unix::fs::symlink(gen_name(gen), &link_tmp).map_err(io_err(&link_tmp, "symlink"))?;
    fs::rename(&link_tmp, dir.join(CURRENT)).map_err(io_err(&link_tmp, "rename over current"))?;
    fsync_dir(dir)?;

    // The new generation is committed; what cannot be tidied up is reported.
    let mut not_removed = Vec::new();
    for path in expired(dir, gen, retention) {
        if let Err(err) = remove_generation(&path) {
            not_removed.push((path, err));
        }
    }
    Ok(Committed {
        generation: gen,
        not_removed,
    })
}

/// Remove a generation directory. A `gen-N` is first renamed to
/// `gen-N.tmp` (atomic), so a reader never finds it half emptied under its
/// own name: its files are all there or the directory is gone, which
/// [`open_retrying`] takes as the sign to resolve `current` again. A crash
/// between the two steps leaves a `*.tmp` that the next commit removes.
fn remove_generation(path: &Path) -> io::Result<()> {
    let is_tmp = path.extension().is_some_and(|e| e == "tmp");
    if is_tmp {
        return fs::remove_dir_all(path);
    }
    let mut doomed = path.as_os_str().to_owned();
    doomed.push(".tmp");
    fs::rename(path, &doomed)?;
    fs::remove_dir_all(&doomed)
}

/// What a commit of generation `gen` removes: every `*.tmp` generation,
/// every generation after `gen` (left by a failed or abandoned writer), and
/// the generations before it that `retention` does not keep.
fn expired(dir: &Path, gen: u64, retention: &Retention) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut remove = Vec::new();
    let mut older: Vec<(u64, PathBuf)> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let base = name.strip_suffix(".tmp").unwrap_or(&name);
        let Some(n) = parse_gen(base) else { continue };
        if base != name || n > gen {
            remove.push(e.path());
        } else if n < gen {
            older.push((n, e.path()));
        }
    }
    // Newest first: older[i] was replaced by older[i - 1] (by `gen` for i = 0).
    older.sort_unstable_by_key(|o| std::cmp::Reverse(o.0));
    let keep = retention.keep.max(1);
    let mut replaced_by = dir.join(gen_name(gen));
    for (i, (_, path)) in older.into_iter().enumerate() {
        let in_grace = || {
            fs::metadata(&replaced_by)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                // A clock that went back: the replacement is recent.
                .is_none_or(|age| age < retention.grace)
        };
        if i >= keep && (i >= retention.max_kept || !in_grace()) {
            remove.push(path.clone());
        }
        replaced_by = path;
    }
    remove
}

/// Write `fib` as a new generation of `dir` (its control state, snapshot
/// and action table, with a manifest naming `key_type` and the Othello
/// configuration): [`commit`] for a whole Concise FIB.
pub fn commit_fib<K: NameKey>(
    dir: &Path,
    key_type: KeyType,
    fib: &ConciseFib<K>,
) -> Result<Committed, DirError> {
    let cfg = *fib.othello().config();
    let control = fib.try_save_control()?;
    let snapshot = fib.othello().try_snapshot(0)?;
    let actions = fib.action_table().to_text();
    let mut manifest = Manifest {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        key_type: key_type.name().into(),
        generation: 0,
        names: fib.len(),
        actions: fib.action_table().len(),
        config: ManifestConfig {
            value_bits: cfg.value_bits,
            check_bits: cfg.check_bits,
            sizing: cfg.sizing.to_string(),
            seed: cfg.seed,
            stash_capacity: cfg.stash_capacity,
        },
        files: Vec::new(),
    };
    commit(
        dir,
        &mut manifest,
        &[
            (CONTROL, &control),
            (SNAPSHOT, &snapshot),
            (ACTIONS, actions.as_bytes()),
        ],
    )
}

/// The current generation's manifest, validated, and its directory.
#[derive(Debug)]
pub struct Current {
    /// The validated manifest.
    pub manifest: Manifest,
    /// `DIR/gen-N`.
    pub gen_dir: PathBuf,
    /// The manifest's key type.
    pub key_type: KeyType,
}

impl Current {
    /// Path of data file `name` in this generation.
    pub fn path(&self, name: &str) -> PathBuf {
        self.gen_dir.join(name)
    }

    /// Read data file `name` and check its size and checksum against the
    /// manifest.
    pub fn read_verified(&self, name: &str) -> Result<Vec<u8>, DirError> {
        let path = self.path(name);
        let Some(entry) = self.manifest.files.iter().find(|f| f.name == name) else {
            return Err(DirError::NotListed { path });
        };
        let bytes = fs::read(&path).map_err(io_err(&path, "cannot read"))?;
        if bytes.len() as u64 != entry.bytes {
            return Err(DirError::SizeMismatch {
                path,
                expected: entry.bytes,
                got: bytes.len() as u64,
            });
        }
        let sum = checksum_hex(&bytes);
        if sum != entry.xxh3_64 {
            return Err(DirError::ChecksumMismatch {
                path,
                expected: entry.xxh3_64.clone(),
                got: sum,
            });
        }
        Ok(bytes)
    }

    /// Read `actions.txt` (verified) as text.
    pub fn read_actions_text(&self) -> Result<String, DirError> {
        let bytes = self.read_verified(ACTIONS)?;
        String::from_utf8(bytes).map_err(|source| DirError::NotUtf8 {
            path: self.path(ACTIONS),
            source,
        })
    }
}

/// Open the current generation with [`open`] and give it to `read`; if
/// that fails and the generation is gone by then (removed by commits in
/// between), resolve `current` again and try again, at most
/// [`OPEN_RETRIES`] times: each retry means several generations were
/// committed during one read, so only a writer committing without pause
/// faster than a reader reads (or a reader descheduled that long) exhausts
/// them. Errors of `read` on a generation that still exists are returned
/// as they are.
pub fn open_retrying<T, E: From<DirError>>(
    dir: &Path,
    mut read: impl FnMut(Current) -> Result<T, E>,
) -> Result<T, E> {
    let mut retries = 0;
    loop {
        let current = match open(dir) {
            Ok(c) => c,
            // `current` named a generation already removed.
            Err(DirError::Io { ref source, .. })
                if retries < OPEN_RETRIES && source.kind() == io::ErrorKind::NotFound =>
            {
                retries += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let gen_dir = current.gen_dir.clone();
        match read(current) {
            Err(_) if retries < OPEN_RETRIES && !gen_dir.exists() => retries += 1,
            done => return done,
        }
    }
}

/// Times [`open_retrying`] resolves `current` again after the generation it
/// read was removed under it.
pub const OPEN_RETRIES: u32 = 16;

/// Open the current generation of the FIB at `dir` and validate its manifest.
pub fn open(dir: &Path) -> Result<Current, DirError> {
    let gen = current_generation(dir)?;
    let gen_dir = dir.join(gen_name(gen));
    let path = gen_dir.join(MANIFEST);
    let text = fs::read(&path).map_err(io_err(&path, "cannot read"))?;
    let manifest: Manifest =
        serde_json::from_slice(&text).map_err(|source| DirError::InvalidManifest {
            path: path.clone(),
            source,
        })?;
    if manifest.format != FORMAT {
        return Err(DirError::WrongFormat {
            path,
            found: manifest.format,
        });
    }
    if manifest.format_version != FORMAT_VERSION {
        return Err(DirError::UnsupportedVersion {
            path,
            found: manifest.format_version,
        });
    }
    if manifest.generation != gen {
        return Err(DirError::GenerationMismatch {
            path,
            manifest: manifest.generation,
            dir: gen,
        });
    }
    let key_type = match manifest.key_type() {
        Ok(k) => k,
        Err(source) => return Err(DirError::KeyType { path, source }),
    };
    for name in REQUIRED {
        if !manifest.files.iter().any(|f| f.name == name) {
            return Err(DirError::MissingEntry { path, name });
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
        commit(dir, &mut manifest(), &refs).unwrap().generation
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

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn commit_kept(dir: &Path, tag: &[u8], retention: &Retention) -> u64 {
        let f = files(tag);
        let refs: Vec<(&str, &[u8])> = f.iter().map(|(n, b)| (*n, b.as_slice())).collect();
        commit_with(dir, &mut manifest(), &refs, retention)
            .unwrap()
            .generation
    }

    #[test]
    fn commit_replaces_current_keeps_the_previous_and_removes_stale_tmp() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("fib");
        assert_eq!(commit_files(&dir, b"one"), 1);
        fs::create_dir(dir.join("gen-7.tmp")).unwrap();
        assert_eq!(commit_files(&dir, b"two"), 8);
        assert_eq!(entries(&dir), ["current", "gen-1", "gen-8"]);
        let cur = open(&dir).unwrap();
        assert_eq!(cur.read_verified(CONTROL).unwrap(), b"two");
    }

    #[test]
    fn fast_commits_keep_at_most_four_generations_and_the_grace_period_ends() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        // Commits well within the default 60 s grace period.
        for i in 0..10u8 {
            commit_kept(dir, &[i], &Retention::default());
        }
        // The previous generation and two more within the grace period.
        assert_eq!(
            entries(dir),
            ["current", "gen-10", "gen-7", "gen-8", "gen-9"]
        );
        std::thread::sleep(std::time::Duration::from_millis(400));
        let short = Retention {
            grace: std::time::Duration::from_millis(300),
            ..Retention::default()
        };
        commit_kept(dir, b"late", &short);
        // gen-9 replaced gen-8 long ago: only the previous one stays.
        assert_eq!(entries(dir), ["current", "gen-10", "gen-11"]);
        // No grace at all still keeps the previous generation.
        let none = Retention {
            grace: std::time::Duration::ZERO,
            ..Retention::default()
        };
        let zero_keep = Retention { keep: 0, ..none };
        commit_kept(dir, b"x", &zero_keep);
        assert_eq!(entries(dir), ["current", "gen-11", "gen-12"]);
    }

    #[test]
    fn a_reader_whose_generation_vanished_resolves_current_again() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        commit_files(dir, b"old");
        let mut calls = 0;
        let got = open_retrying(dir, |cur| {
            calls += 1;
            if calls == 1 {
                // Commits that remove the generation just resolved.
                let only_previous = Retention {
                    max_kept: 1,
                    ..Retention::default()
                };
                commit_kept(dir, b"mid", &only_previous);
                commit_kept(dir, b"new", &only_previous);
                assert!(!cur.gen_dir.exists());
            }
            cur.read_verified(CONTROL)
        })
        .unwrap();
        assert_eq!((calls, got.as_slice()), (2, &b"new"[..]));
        // An error on a generation that still exists is not retried.
        let mut calls = 0;
        let e = open_retrying(dir, |cur| {
            calls += 1;
            cur.read_verified("absent.bin")
        })
        .unwrap_err();
        assert!(matches!(e, DirError::NotListed { .. }), "{e}");
        assert_eq!(calls, 1);
        // A generation removed under every read: the retries are bounded.
        let only_previous = Retention {
            max_kept: 1,
            ..Retention::default()
        };
        let mut calls = 0;
        let e = open_retrying(dir, |cur| {
            calls += 1;
            commit_kept(dir, b"a", &only_previous);
            commit_kept(dir, b"b", &only_previous);
            cur.read_verified(CONTROL)
        })
        .unwrap_err();
        assert!(matches!(e, DirError::Io { .. }), "{e}");
        assert_eq!(calls, OPEN_RETRIES + 1);
    }

    #[test]
    fn readers_racing_hundreds_of_commits_never_fail() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_path_buf();
        commit_files(&dir, b"0");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let dir = dir.clone();
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        open_retrying(&dir, |cur| {
                            for name in REQUIRED {
                                cur.read_verified(name)?;
                            }
                            Ok::<_, DirError>(())
                        })
                        .unwrap_or_else(|e| panic!("read {reads} failed: {e}"));
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for i in 0..300u32 {
            commit_files(&dir, &i.to_le_bytes().repeat(64));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        // Old generations went: at most the current and three before it.
        let gens = entries(&dir)
            .iter()
            .filter(|n| parse_gen(n).is_some())
            .count();
        assert!((2..=4).contains(&gens), "{:?}", entries(&dir));
        assert!(!entries(&dir).iter().any(|n| n.ends_with(".tmp")));
    }

    #[test]
    fn corrupted_or_truncated_files_are_named_in_errors() {
        let t = tempfile::tempdir().unwrap();
        commit_files(t.path(), b"payload");
        let cur = open(t.path()).unwrap();
        fs::write(cur.path(SNAPSHOT), b"paYload").unwrap();
        let e = cur.read_verified(SNAPSHOT).unwrap_err();
        assert!(matches!(e, DirError::ChecksumMismatch { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("gen-1/snapshot.bin: checksum mismatch"),
            "{e}"
        );
        fs::write(cur.path(CONTROL), b"pay").unwrap();
        let e = cur.read_verified(CONTROL).unwrap_err();
        assert!(
            matches!(
                e,
                DirError::SizeMismatch {
                    expected: 7,
                    got: 3,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("gen-1/control.bin: size mismatch"),
            "{e}"
        );
    }

    #[test]
    fn build_target_must_be_empty_or_a_fib() {
        let t = tempfile::tempdir().unwrap();
        check_build_target(&t.path().join("absent"), &[]).unwrap();
        check_build_target(t.path(), &[]).unwrap();
        fs::write(t.path().join("notes.txt"), b"x").unwrap();
        let e = check_build_target(t.path(), &[]).unwrap_err();
        assert!(matches!(e, DirError::NotEmpty { .. }), "{e}");
        assert!(e.to_string().contains("not a FIB"), "{e}");
        check_build_target(t.path(), &["notes.txt"]).unwrap();
        let fib = t.path().join("fib");
        commit_files(&fib, b"x");
        check_build_target(&fib, &[]).unwrap();
    }
    #[test]
    fn manifest_of_another_format_version_or_generation_is_refused() {
        let t = tempfile::tempdir().unwrap();
        commit_files(t.path(), b"x");
        let mpath = t.path().join("gen-1").join(MANIFEST);
        let good = fs::read_to_string(&mpath).unwrap();
        for (from, to, check) in [
            (
                "\"format_version\": 1",
                "\"format_version\": 9",
                (|e: &DirError| matches!(e, DirError::UnsupportedVersion { found: 9, .. }))
                    as fn(&DirError) -> bool,
            ),
            ("\"generation\": 1", "\"generation\": 4", |e| {
                matches!(
                    e,
                    DirError::GenerationMismatch {
                        manifest: 4,
                        dir: 1,
                        ..
                    }
                )
            }),
            ("\"nexthop-fib\"", "\"other\"", |e| {
                matches!(e, DirError::WrongFormat { .. })
            }),
            ("\"u64\"", "\"u65\"", |e| {
                matches!(e, DirError::KeyType { .. })
            }),
            ("\"format\"", "\"fmt\"", |e| {
                matches!(e, DirError::InvalidManifest { .. })
            }),
        ] {
            assert!(good.contains(from), "{from} not in {good}");
            fs::write(&mpath, good.replace(from, to)).unwrap();
            let e = open(t.path()).unwrap_err();
            assert!(check(&e), "{from} -> {to}: {e}");
            assert!(e.to_string().contains("manifest.json"), "{e}");
        }
    }

    #[test]
    fn a_directory_without_current_is_not_a_fib() {
        let t = tempfile::tempdir().unwrap();
        assert!(!is_fib(t.path()));
        let e = open(t.path()).unwrap_err();
        assert!(matches!(e, DirError::NotAFib { .. }), "{e}");
        std::os::unix::fs::symlink("elsewhere", t.path().join(CURRENT)).unwrap();
        let e = open(t.path()).unwrap_err();
        assert!(matches!(e, DirError::BadCurrent { .. }), "{e}");
    }
}
