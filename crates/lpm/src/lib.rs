//! Bloom-filter IP longest-prefix match for IPv4 and IPv6 (Bloomfwd, after
//! Lucchesi, Teodoro et al., "Bloom filters IP lookup on many-core
//! processors"), with its reference baselines: a binary trie (the test
//! oracle), DIR-24-8 and MIHT.
//!
//! See the crate README for the algorithm, memory layout, invariants,
//! update procedure and concurrency contract.

pub mod addr;
pub mod bloomfwd;
pub mod dir248;
pub mod dpcpe;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod hash;
pub mod miht;
pub mod parse;
pub mod persist;
pub mod rib;
pub mod trie;

pub use addr::{Address, NextHop, Prefix, Prefix4, Prefix6, Route, NO_ROUTE};
pub use bloomfwd::{Bloomfwd, BloomfwdControl, Config, ConfigError, GroupStats};
pub use hash::{HashKind, Simd};
pub use trie::BinaryTrie;
