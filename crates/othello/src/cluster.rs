//! A flat-name FIB split across a cluster of `N` nodes (the ScaleBricks
//! design, Othello paper section VI.D).
//!
//! The names are partitioned over the nodes by a hash of the name
//! (balanced: each node gets about `1/N` of them). Every node holds
//!
//! * the *owner map*: one Othello over ALL names whose value is the index
//!   of the node that owns the name (`ceil(log2 N)` value bits, no check
//!   bits: the global partition table), its slots bit-packed at
//!   `ceil(log2 N)` bits each ([`PackedOwnerMap`]), and
//! * the full Concise FIB of its own partition (the configuration the
//!   caller gives, check bits included).
//!
//! A frame entering at any node is looked up in that node's owner map,
//! handed to its owner (an internal hop unless the entry node owns it) and
//! forwarded there with the owner's FIB.
//!
//! # Directory layout
//!
//! ```text
//! DIR/cluster.json   {"format": "nexthop-cluster", "format_version": 2,
//!                     "key_type": ..., "nodes": N, "names": ...}
//! DIR/owner.map      the packed owner map ([`crate::owner`] file format)
//! DIR/owner/         a FIB directory (fibdir): name -> "port K", K the owner
//! DIR/node-K/        a FIB directory: node K's partition with its actions
//! ```
//!
//! Each subdirectory is an ordinary FIB directory (`nexthop fib lookup`
//! and `stats` read it); the owner map's actions are `port 0` ..
//! `port N-1`, the owner's node index, and the values of `owner.map` are
//! the ids of DIR/owner's action table. A node holds `owner.map`, that
//! action table and its own FIB, not DIR/owner's byte-per-slot snapshot.
//! A version 1 cluster (made before `owner.map`) still opens:
//! [`open_owner_map`] packs its DIR/owner snapshot on load.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::error::FormatError;
use crate::fib::{Action, ConciseFib, FibError, KeyType, NameKey};
use crate::fibdir::{self, DirError};
pub use crate::owner::PackedOwnerMap;

/// The cluster manifest file name.
pub const CLUSTER_MANIFEST: &str = "cluster.json";
/// The `format` field of the cluster manifest.
pub const CLUSTER_FORMAT: &str = "nexthop-cluster";
/// The cluster manifest version this code writes (it also reads version
/// 1, whose owner map is packed on load).
pub const CLUSTER_FORMAT_VERSION: u32 = 2;
/// The owner map's subdirectory.
pub const OWNER_DIR: &str = "owner";
/// The packed owner map's file (version 2 clusters).
pub const OWNER_MAP: &str = "owner.map";
/// The most nodes a cluster may have (node indices fit a `port` action).
pub const MAX_NODES: usize = 256;

/// Why a cluster could not be built or opened.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// `nodes` outside `1..=MAX_NODES`.
    #[error("a cluster needs 1 to {MAX_NODES} nodes, not {0}")]
    Nodes(usize),
    /// No routes to split.
    #[error("no routes: a cluster needs at least one name")]
    Empty,
    /// Building a Concise FIB failed.
    #[error("{what}: {error}")]
    Fib {
        /// Which table (owner map or node K).
        what: String,
        /// The error.
        error: FibError,
    },
    /// Writing or reading a FIB directory failed.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// The packed owner map is missing, damaged or does not fit the cluster.
    #[error("{path}: {error}")]
    OwnerMap {
        /// The file (or, for a version 1 cluster, the snapshot) read.
        path: PathBuf,
        /// What is wrong.
        error: FormatError,
    },
    /// The cluster manifest is missing, unreadable or inconsistent.
    #[error("{path}: {reason}")]
    Manifest {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The cluster manifest (`DIR/cluster.json`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterManifest {
    /// Always [`CLUSTER_FORMAT`].
    pub format: String,
    /// [`CLUSTER_FORMAT_VERSION`] when written; 1 or 2 when read.
    pub format_version: u32,
    /// Key type of every table.
    pub key_type: String,
    /// Number of nodes.
    pub nodes: usize,
    /// Names over all nodes.
    pub names: usize,
    /// Names per node, indexed by node.
    pub node_names: Vec<usize>,
}

/// What [`build`] wrote: sizes in bytes of the lookup snapshots (the
/// memory a forwarder maps).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClusterReport {
    /// Number of nodes.
    pub nodes: usize,
    /// Names over all nodes.
    pub names: usize,
    /// Value bits of the owner map.
    pub owner_value_bits: u8,
    /// Bytes of the packed owner map file (held by every node).
    pub owner_bytes: u64,
    /// Bytes of the owner map's byte-per-slot snapshot (DIR/owner, not
    /// held by a node; for comparison).
    pub owner_unpacked_bytes: u64,
    /// Per node: names, local FIB snapshot bytes, owner + local bytes.
    pub node: Vec<NodeReport>,
}

/// One node of a [`ClusterReport`].
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct NodeReport {
    /// Names this node owns.
    pub names: usize,
    /// Snapshot bytes of its local FIB.
    pub fib_bytes: u64,
    /// Owner map plus local FIB: what the node holds.
    pub total_bytes: u64,
}

/// `ceil(log2 nodes)`, at least 1 (an Othello needs one value bit).
pub fn owner_value_bits(nodes: usize) -> u8 {
    let mut l = 1u8;
    while (1usize << l) < nodes {
        l += 1;
    }
    l
}

/// FNV-1a, fixed across runs and platforms (the partition must not
/// depend on a process's random hash keys).
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        // Final avalanche so `% nodes` uses all bits.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The node that owns `name` in a cluster of `nodes` nodes (`nodes >= 1`).
pub fn node_of<K: Hash>(name: &K, nodes: usize) -> usize {
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    name.hash(&mut h);
    (h.finish() % nodes.max(1) as u64) as usize
}

/// Split `routes` over `nodes` nodes by [`node_of`]; each part keeps the
/// routes' input order and line numbers.
pub fn partition<K: NameKey>(
    routes: &[(usize, K, Action)],
    nodes: usize,
) -> Vec<Vec<(usize, K, Action)>> {
    let mut parts: Vec<Vec<(usize, K, Action)>> = vec![Vec::new(); nodes];
    for r in routes {
        parts[node_of(&r.1, nodes)].push(r.clone());
    }
    parts
}

/// `DIR/node-K`.
pub fn node_dir(dir: &Path, k: usize) -> PathBuf {
    dir.join(format!("node-{k}"))
}

fn snapshot_bytes(dir: &Path) -> Result<u64, DirError> {
    let cur = fibdir::open(dir)?;
    Ok(cur
        .manifest
        .files
        .iter()
        .find(|f| f.name == fibdir::SNAPSHOT)
        .map_or(0, |f| f.bytes))
}

/// Build a cluster of `nodes` nodes from `routes` into `dir` (created if
/// missing; an earlier cluster there is replaced table by table): the owner map with
/// [`owner_value_bits`] value bits and no check bits, and per node a
/// Concise FIB of its partition with `cfg`. `cfg.seed` seeds every table.
///
/// # Errors
/// [`ClusterError::Nodes`], [`ClusterError::Empty`], a FIB build error
/// (duplicate names, too many actions for `cfg.value_bits`) or an I/O
/// error.
pub fn build<K: NameKey>(
    dir: &Path,
    key_type: KeyType,
    cfg: Config,
    routes: &[(usize, K, Action)],
    nodes: usize,
) -> Result<ClusterReport, ClusterError> {
    if nodes == 0 || nodes > MAX_NODES {
        return Err(ClusterError::Nodes(nodes));
    }
    if routes.is_empty() {
        return Err(ClusterError::Empty);
    }
    let parts = partition(routes, nodes);
    let owner_bits = owner_value_bits(nodes);
    let owner_cfg = Config {
        value_bits: owner_bits,
        check_bits: 0,
        ..cfg
    };
    let owner_routes: Vec<(usize, K, Action)> = routes
        .iter()
        .map(|(line, k, _)| (*line, k.clone(), Action::Port(node_of(k, nodes) as u16)))
        .collect();
    let owner = ConciseFib::build(owner_cfg, &owner_routes).map_err(|error| ClusterError::Fib {
        what: "owner map".into(),
        error,
    })?;
    fs::create_dir_all(dir).map_err(|e| ClusterError::Manifest {
        path: dir.to_path_buf(),
        reason: format!("cannot create: {e}"),
    })?;
    let owner_dir = dir.join(OWNER_DIR);
    fibdir::commit_fib(&owner_dir, key_type, &owner)?;
    let packed = PackedOwnerMap::from_snapshot(&owner.othello().snapshot(0)).map_err(|error| {
        ClusterError::OwnerMap {
            path: owner_dir.clone(),
            error,
        }
    })?;
    drop(owner);
    let owner_bytes = write_atomic(&dir.join(OWNER_MAP), &packed.to_bytes())?;
    drop(packed);
    let owner_unpacked_bytes = snapshot_bytes(&owner_dir)?;
    let mut node = Vec::with_capacity(nodes);
    for (k, part) in parts.iter().enumerate() {
        let fib = ConciseFib::build(cfg, part).map_err(|error| ClusterError::Fib {
            what: format!("node {k}"),
            error,
        })?;
        let nd = node_dir(dir, k);
        fibdir::commit_fib(&nd, key_type, &fib)?;
        let fib_bytes = snapshot_bytes(&nd)?;
        node.push(NodeReport {
            names: part.len(),
            fib_bytes,
            total_bytes: owner_bytes + fib_bytes,
        });
    }
    let manifest = ClusterManifest {
        format: CLUSTER_FORMAT.into(),
        format_version: CLUSTER_FORMAT_VERSION,
        key_type: key_type.name().into(),
        nodes,
        names: routes.len(),
        node_names: parts.iter().map(Vec::len).collect(),
    };
    let text = serde_json::to_string_pretty(&manifest).expect("manifest serializes");
    write_atomic(&dir.join(CLUSTER_MANIFEST), text.as_bytes())?;
    Ok(ClusterReport {
        nodes,
        names: routes.len(),
        owner_value_bits: owner_bits,
        owner_bytes,
        owner_unpacked_bytes,
        node,
    })
}

/// Write `bytes` to `path` through a temporary file and a rename; returns
/// the length written.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<u64, ClusterError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, bytes)
        .and_then(|()| fs::rename(&tmp, path))
        .map_err(|e| ClusterError::Manifest {
            path: path.to_path_buf(),
            reason: format!("cannot write: {e}"),
        })?;
    Ok(bytes.len() as u64)
}

/// The packed owner map of the cluster in `dir` whose manifest
/// ([`open_manifest`]) is `m`: `DIR/owner.map` for a version 2 cluster,
/// DIR/owner's snapshot packed on load for a version 1 cluster. Its value
/// bits must be [`owner_value_bits`] of the node count.
///
/// # Errors
/// [`ClusterError::OwnerMap`] naming the file and what is wrong, or the
/// FIB directory error of a version 1 cluster's damaged DIR/owner.
pub fn open_owner_map(dir: &Path, m: &ClusterManifest) -> Result<PackedOwnerMap, ClusterError> {
    let (path, map) = if m.format_version == 1 {
        let cur = fibdir::open(&dir.join(OWNER_DIR))?;
        let snap = cur.read_verified(fibdir::SNAPSHOT)?;
        let path = cur.path(fibdir::SNAPSHOT);
        let map = PackedOwnerMap::from_snapshot(&snap);
        (path, map)
    } else {
        let path = dir.join(OWNER_MAP);
        let map = PackedOwnerMap::read(&path);
        (path, map)
    };
    let map = map.map_err(|error| ClusterError::OwnerMap {
        path: path.clone(),
        error,
    })?;
    if map.value_bits() != owner_value_bits(m.nodes) {
        return Err(ClusterError::OwnerMap {
            path,
            error: FormatError::Malformed("owner map value bits do not fit the node count"),
        });
    }
    Ok(map)
}

/// Read and check `DIR/cluster.json`: the format, the node count, and
/// that the owner map and every node directory exist with the cluster's
/// key type.
///
/// # Errors
/// [`ClusterError::Manifest`] naming what is wrong, or the FIB directory
/// error of a missing or damaged table.
pub fn open_manifest(dir: &Path) -> Result<ClusterManifest, ClusterError> {
    let path = dir.join(CLUSTER_MANIFEST);
    let bad = |reason: String| ClusterError::Manifest {
        path: path.clone(),
        reason,
    };
    let bytes = fs::read(&path).map_err(|e| {
        bad(format!(
            "cannot read ({e}); is this a cluster directory made by `nexthop cluster build`?"
        ))
    })?;
    let m: ClusterManifest =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a cluster manifest: {e}")))?;
    if m.format != CLUSTER_FORMAT || !(1..=CLUSTER_FORMAT_VERSION).contains(&m.format_version) {
        return Err(bad(format!(
            "format {} version {}, expected {CLUSTER_FORMAT} version 1 to {CLUSTER_FORMAT_VERSION}",
            m.format, m.format_version
        )));
    }
    if m.nodes == 0 || m.nodes > MAX_NODES || m.node_names.len() != m.nodes {
        return Err(bad(format!(
            "{} nodes with {} node sizes",
            m.nodes,
            m.node_names.len()
        )));
    }
    if m.node_names.iter().sum::<usize>() != m.names {
        return Err(bad("node sizes do not add up to the names".into()));
    }
    let check = |sub: PathBuf, names: usize| -> Result<(), ClusterError> {
        let cur = fibdir::open(&sub)?;
        if cur.manifest.key_type != m.key_type || cur.manifest.names != names {
            return Err(bad(format!(
                "{} holds {} {} names, the cluster says {} {}",
                sub.display(),
                cur.manifest.names,
                cur.manifest.key_type,
                names,
                m.key_type
            )));
        }
        Ok(())
    };
    check(dir.join(OWNER_DIR), m.names)?;
    for (k, &n) in m.node_names.iter().enumerate() {
        check(node_dir(dir, k), n)?;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(n: u64) -> Vec<(usize, u64, Action)> {
        (0..n)
            .map(|i| (i as usize + 1, i * 7919, Action::Port((i % 5) as u16)))
            .collect()
    }

    #[test]
    fn owner_bits_are_ceil_log2() {
        let got: Vec<u8> = [1, 2, 3, 4, 5, 8, 9, 256]
            .iter()
            .map(|&n| owner_value_bits(n))
            .collect();
        assert_eq!(got, [1, 1, 2, 2, 3, 3, 4, 8]);
    }

    #[test]
    fn partition_is_balanced_and_complete() {
        let r = routes(40_000);
        let parts = partition(&r, 4);
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), r.len());
        for p in &parts {
            assert!((9_000..11_000).contains(&p.len()), "{}", p.len());
            assert!(p.iter().all(|x| node_of(&x.1, 4) == node_of(&p[0].1, 4)));
        }
    }

    #[test]
    fn build_maps_every_name_to_its_owner_and_refuses_bad_input() {
        let tmp = std::env::temp_dir().join(format!("nexthop-cluster-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        let r = routes(1000);
        let cfg = Config::default();
        let rep = build(&tmp, KeyType::U64, cfg, &r, 5).unwrap();
        assert_eq!(rep.owner_value_bits, 3);
        assert_eq!(rep.node.iter().map(|n| n.names).sum::<usize>(), 1000);
        let m = open_manifest(&tmp).unwrap();
        assert_eq!(m.nodes, 5);
        assert!(matches!(
            build(&tmp, KeyType::U64, cfg, &r, 0),
            Err(ClusterError::Nodes(0))
        ));
        assert!(matches!(
            build(&tmp, KeyType::U64, cfg, &r, 257),
            Err(ClusterError::Nodes(257))
        ));
        assert!(matches!(
            build::<u64>(&tmp, KeyType::U64, cfg, &[], 2),
            Err(ClusterError::Empty)
        ));
        fs::write(tmp.join(CLUSTER_MANIFEST), b"{\"format\": 1").unwrap();
        assert!(open_manifest(&tmp).is_err());
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn the_packed_owner_map_places_every_name_and_old_clusters_still_open() {
        let tmp = std::env::temp_dir().join(format!("nexthop-cluster-pk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        let r = routes(4000);
        let rep = build(&tmp, KeyType::U64, Config::default(), &r, 4).unwrap();
        assert!(rep.owner_bytes * 3 < rep.owner_unpacked_bytes, "{rep:?}");
        let m = open_manifest(&tmp).unwrap();
        assert_eq!(m.format_version, CLUSTER_FORMAT_VERSION);
        let map = open_owner_map(&tmp, &m).unwrap();
        assert_eq!(map.value_bits(), 2);
        let actions = fibdir::open(&tmp.join(OWNER_DIR))
            .unwrap()
            .read_actions_text()
            .unwrap();
        let actions = crate::fib::ActionTable::from_text(&actions).unwrap();
        for (_, k, _) in &r {
            let id = map.lookup(k);
            let want = Action::Port(node_of(k, 4) as u16);
            assert_eq!(actions.get(id), Some(&want), "name {k}");
        }
        // A version 1 cluster (no owner.map) packs DIR/owner on load.
        let mut v1 = m.clone();
        v1.format_version = 1;
        fs::write(tmp.join(CLUSTER_MANIFEST), serde_json::to_vec(&v1).unwrap()).unwrap();
        fs::remove_file(tmp.join(OWNER_MAP)).unwrap();
        let m1 = open_manifest(&tmp).unwrap();
        assert_eq!(open_owner_map(&tmp, &m1).unwrap(), map);
        // Version 2 without its owner.map, or with a damaged one, is refused.
        assert!(matches!(
            open_owner_map(&tmp, &m),
            Err(ClusterError::OwnerMap {
                error: FormatError::Io(_),
                ..
            })
        ));
        let mut bytes = map.to_bytes();
        let last = bytes.len() - 9;
        bytes[last] ^= 1;
        fs::write(tmp.join(OWNER_MAP), &bytes).unwrap();
        let e = open_owner_map(&tmp, &m).unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        fs::write(tmp.join(OWNER_MAP), &bytes[..bytes.len() / 2]).unwrap();
        assert!(matches!(
            open_owner_map(&tmp, &m),
            Err(ClusterError::OwnerMap {
                error: FormatError::Truncated { .. },
                ..
            })
        ));
        // A map for another node count does not fit.
        let mut m8 = m.clone();
        m8.nodes = 8;
        fs::write(tmp.join(OWNER_MAP), map.to_bytes()).unwrap();
        assert!(open_owner_map(&tmp, &m8).is_err());
        // A manifest from a newer build is refused.
        let mut v3 = m.clone();
        v3.format_version = 3;
        fs::write(tmp.join(CLUSTER_MANIFEST), serde_json::to_vec(&v3).unwrap()).unwrap();
        let e = open_manifest(&tmp).unwrap_err();
        assert!(e.to_string().contains("version 3"), "{e}");
        fs::remove_dir_all(&tmp).unwrap();
    }
}
