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
//! removes older generations. A reader that follows `current` therefore
//! sees a whole old or a whole new generation, and a crash at any point
//! leaves a valid FIB (at worst with a stale `*.tmp` or an old generation
//! that the next commit removes).
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
/// (see the module docs for the order of writes). `manifest.generation`
/// and `manifest.files` are filled in here.
pub fn commit(
    dir: &Path,
    manifest: &mut Manifest,
    files: &[(&str, &[u8])],
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
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let base = name.strip_suffix(".tmp").unwrap_or(&name);
            if parse_gen(base).is_some_and(|n| n != gen || base != name) {
                if let Err(err) = fs::remove_dir_all(e.path()) {
                    not_removed.push((e.path(), err));
                }
            }
        }
    }
    Ok(Committed {
        generation: gen,
        not_removed,
    })
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
    let control = fib.save_control();
    let snapshot = fib.othello().snapshot(0);
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
