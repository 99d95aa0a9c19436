//! Othello hashing and the Concise flat-name FIB.
//!
//! See the crate README for the algorithm, memory layout, invariants, update
//! procedure and threading contract.
#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cluster;
pub mod config;
pub mod control;
pub mod delta;
pub mod error;
pub mod fib;
pub mod fib_net;
pub mod fibdir;
#[cfg(feature = "keys")]
pub mod keys;
pub mod owner;
pub mod persist;
pub mod query;
mod snapshot;
pub mod view;

pub use config::{Config, Sizing, MAX_STASH};
pub use control::{BatchError, BatchOp, Change, Counters, Othello, Stats};
pub use delta::{Delta, Op};
pub use error::{AllocError, ConfigError, FormatError, UpdateError};
pub use nexthop_mem::HugeBox;
pub use persist::StoredKey;
pub use query::{Query, QueryMeta, BATCH_GROUP, MISS, STRIPES};
pub use view::{MappedQuery, QueryView};
