//! nexthop's data plane: the flat-name switching pipeline and its ports.
//!
//! * [`Pipeline`] names each frame ([`NameSource`]: destination MAC,
//!   IPv4 5-tuple or a configured byte range), looks the names up in
//!   batches of [`BATCH`] in a Concise FIB data plane ([`NameTable`]:
//!   a memory-mapped [`QueryView`](nexthop_othello::QueryView) or an
//!   in-memory [`Query`](nexthop_othello::Query)), resolves the action ids
//!   through the FIB's action table and returns one [`Decision`] per frame.
//!   It does no I/O, so every port type reuses it.
//! * [`IpPipeline`] routes IPv4 and IPv6 frames: it parses Ethernet (and
//!   VLAN tags) and the IP header, drops TTL-expired frames, looks the
//!   destinations up in batches in a Bloomfwd LPM table
//!   ([`nexthop_lpm::persist::LpmTable`]), and rewrites each forwarded
//!   frame in place for its next hop's [`Neighbor`] (MACs, TTL or hop
//!   limit, incremental IPv4 checksum).
//! * [`pcap`]: pcap file ports (one input file, one output file per port)
//!   and [`pcap::forward_pcap`], which drives a pipeline between them.
//! * `afpacket` (Linux): live ports, a `TPACKET_V3` receive ring and
//!   batched `sendmmsg` transmit; `live`: the ports of a live run (also
//!   in-memory ones), its stop conditions and what it reports.
//! * `engine` (Linux): the forwarder engine. Worker threads run any
//!   pipeline implementing `engine::Stage` (the flat-name and IP
//!   pipelines today) to completion over their own live ports; the table
//!   refresh is passed in (`engine::Refresh`), so this crate never
//!   depends on the control plane; the workers' reports are merged port
//!   by port.
//! * [`sdf`]: the software-defined-forwarding pipeline: a revocable
//!   decision cache on the workers, the app on its own thread behind a
//!   bounded queue, a pending-miss table (one app call per flow in
//!   flight), and its offline pcap driver.
//! * `affinity` (Linux, re-exported from `nexthop-mem`): CPU lists and
//!   thread pinning for workers and control threads.
//! * `afxdp` (Linux, the `afxdp` feature): AF_XDP live ports through
//!   libxdp (a UMEM with fill, completion, rx and tx rings per socket),
//!   which the same loop drives.
//!
//! Frames that cannot be named (runts, frames cut inside a header, frames
//! too short for the name bytes) are counted by reason and dropped; nothing
//! in a frame can make the pipeline panic. See `docs/dataplane.md` for the
//! whole contract.
//!
//! ```
//! use nexthop_dataplane::{Decision, Egress, Pipeline, PipelineConfig};
//! use nexthop_othello::fib::{Action, ConciseFib, KeyType};
//! use nexthop_othello::Config;
//!
//! let routes = vec![(1, [2u8, 0, 0, 0, 0, 1], Action::Port(3))];
//! let fib = ConciseFib::build(Config::default(), &routes)?;
//! let query = fib.othello().export(0);
//! let mut p = Pipeline::new(&query, fib.action_table(), KeyType::Mac, PipelineConfig::default())?;
//!
//! let mut frame = vec![2u8, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9, 0x08, 0x00];
//! frame.resize(60, 0);
//! let mut decisions = Vec::new();
//! p.process(0, &[&frame[..]], &mut decisions);
//! assert_eq!(decisions, [Decision::Port(3)]);
//! assert_eq!(p.egress(&decisions[0]), Egress::Ports(&[3]));
//! assert_eq!(p.counters().tx(3).frames, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
// Unsafe code is denied except in the live-port modules (AF_PACKET sockets,
// the ring mapping, signal handlers, the AF_XDP shim's calls) and `framebuf` (reusing an empty
// vector's allocation for another lifetime), which allow it module by module.
#![deny(unsafe_code)]

/// CPU lists and thread pinning (they live in `nexthop-mem`, which the
/// benchmarks' worker pool also uses).
#[cfg(target_os = "linux")]
pub use nexthop_mem::affinity;
#[cfg(target_os = "linux")]
pub mod afpacket;
#[cfg(all(target_os = "linux", feature = "afxdp"))]
pub mod afxdp;
mod counters;
#[cfg(target_os = "linux")]
pub mod engine;
mod error;
pub mod framebuf;
mod ipfwd;
#[cfg(target_os = "linux")]
pub mod live;
pub mod metrics;
mod name;
mod neighbors;
#[cfg(target_os = "linux")]
pub mod netns;
pub mod pcap;
mod pipeline;
pub mod sdf;

pub use counters::{Counters, HitCounts, MalformedCounts, PortCounter};
pub use error::{ConfigError, FrameError, MalformedKind};
pub use framebuf::{FrameBuf, FrameLists};
pub use ipfwd::{IpConfig, IpConfigError, IpDecision, IpPipeline};
pub use name::{key_len, NameSource, ParseNameSourceError};
pub use neighbors::{Neighbor, NeighborLineError, Neighbors, NeighborsError};
pub use pipeline::{
    Decision, Egress, MissPolicy, NameTable, ParseMissPolicyError, Pipeline, PipelineConfig, BATCH,
    DEFAULT_MAX_FRAME_LEN,
};
