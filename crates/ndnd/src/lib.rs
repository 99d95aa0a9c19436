//! The NDN forwarder process around `nexthop-ndn`'s forwarding pipeline.
//!
//! * [`core::Core`] (no I/O): NDNLPv2 reassembly, the management commands
//!   `rib/register` and `rib/unregister`, the routes they install in the
//!   name FIB, and the [`nexthop_ndn::fw::Forwarder`] the packets go
//!   through. It is what the fuzz target `ndn_face` drives.
//! * [`daemon::Daemon`]: the sockets (UDP unicast, TCP and Unix stream
//!   listeners), one face per remote endpoint or connection, all polled by
//!   the one thread that owns the `Core`.
//!
//! See the crate README for the threading contract, the faces and the caps.

pub mod client;
pub mod config;
pub mod core;
pub mod daemon;
pub mod dataset;
pub mod frag;
pub mod mgmt;
pub mod reasm;

pub use config::NdndConfig;
pub use core::{Core, CoreCounters, FaceInfo};
pub use daemon::{Daemon, DaemonMetrics};
