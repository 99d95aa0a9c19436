//! NDN name FIB: longest-name-prefix match by binary search of hash tables
//! (Yuan's dissertation, chapter 3), the fingerprint-only hash table for
//! speculative core forwarding (§4.3.4), the exact and fingerprint-only
//! PITs and the Content Store (chapter 5, §6.1), and the forwarding
//! pipeline with its strategies ([`fw`], no I/O). With the non-default
//! `test-support` feature, also seeded and real-derived name-set
//! generators (`names`) and the name-trie oracle (`oracle`) that tests,
//! benchmarks and harnesses use.
//!
//! No I/O except the name-set loaders and the FIB file codec, which take
//! bytes or paths and return typed errors. See the crate README for the
//! algorithm, memory layout, invariants, update procedure and threading.
#![deny(missing_docs)]

pub mod bulk;
pub mod control;
pub mod cs;
pub mod error;
pub mod fht;
pub mod fib;
pub mod fw;
pub mod hasher;
pub mod name;
#[cfg(feature = "test-support")]
pub mod names;
pub mod nexthop;
#[cfg(any(test, feature = "test-support"))]
pub mod oracle;
pub mod persist;
pub mod pit;
pub mod routes;
pub mod table;

pub use bulk::{BuildStats, FibBuilder};
pub use control::{FibControl, FibStats};
pub use error::{FibError, NameError};
pub use fib::{BatchResult, BatchScratch, Config, Fib, Match, Memory, Prefetch, SearchTree, Trace};
pub use hasher::Strategy;
pub use name::{NameBuf, NameSlice, NameView};
pub use nexthop::NextHop;
