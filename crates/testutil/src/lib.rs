//! Test and benchmark support for nexthop (not published).
//!
//! * [`alloc`]: a counting global allocator, for tests that check a path
//!   allocates nothing.
//! * [`keys`]: seeded key generators (`nexthop_othello::keys`, re-exported): the Othello/Concise LFSR query stream,
//!   uniform and distinct integers, Zipf popularity, and realistic MACs,
//!   IPv4/IPv6 hosts, 5-tuples and names, plus [`keys::gen_bytes`] to get any
//!   of them as canonical bytes by [`keys::KeyKind`] name.
//! * [`cuckoo`]: a bucketed (2,4) cuckoo hash table after CuckooSwitch, the
//!   baseline that benchmarks run beside nexthop's structures.
//! * [`clock`]: this thread's CPU time, which benchmarks time with.
//! * [`bench`](mod@bench): the comparison benches' scaffold: medians, per-round ratios,
//!   the machine, a JSON object writer.
//! * [`args`]: positional arguments of the probe examples (counts such as
//!   `1e7`, words from a list), refusing bad input.
//! * [`pool`]: long-lived worker threads pinned to their own CPUs, the
//!   harness of multi-core benchmarks.
//! * [`redis`](mod@redis): a test's own `redis-server`, stopped when its guard drops.
//! * [`ovs`]: a test's own Open vSwitch (`ovsdb-server` + `ovs-vswitchd`,
//!   userspace datapath), stopped when its guard drops.
//!
//! Everything is deterministic from an explicit `u64` seed: a test that fails
//! can be rerun with the seed it printed.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod alloc;
pub mod args;
pub mod bench;
pub mod clock;
pub mod cuckoo;
pub mod ovs;
pub mod pool;
pub mod redis;

/// The seeded key generators (`nexthop_othello::keys`, re-exported so
/// tests and benchmarks keep their paths).
pub use nexthop_othello::keys;

pub use clock::thread_cpu_secs;
pub use cuckoo::{CuckooError, CuckooTable};
pub use keys::{
    distinct_u64, five_tuples, gen_bytes, ipv4s, ipv6s, macs, strings, uniform_u64, zipf_indices,
    FiveTuple, KeyKind, Lfsr64, ParseKeyKindError, Zipf, ZipfError,
};
pub use pool::Pool;
