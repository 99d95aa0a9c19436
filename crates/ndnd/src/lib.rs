//! The NDN forwarder process around `nexthop-ndn`'s forwarding pipeline.
//!
//! * [`core::Core`] (no I/O): NDNLPv2 reassembly and local fields, the
//!   management commands (`rib`, `strategy-choice`, `faces/update`) and
//!   status datasets ([`dataset`]), the routes they install in the name
//!   FIB, and the [`nexthop_ndn::fw::Forwarder`] the packets go through.
//!   It is what the fuzz targets `ndn_face` and `ndn_mgmt` drive.
//! * [`daemon::Daemon`]: the sockets (UDP unicast, TCP and Unix stream
//!   listeners), one face per remote endpoint or connection, all polled by
//!   the one thread that owns the `Core`; NDNLPv2 fragmentation on send
//!   ([`frag`]) and the counters for a metrics exporter.
//! * [`ether`]: the NDN Ethernet face (ethertype 0x8624, multicast
//!   group 01:00:5e:00:17:aa) on an `AF_PACKET` socket per interface.
//! * [`threads`]: with `threads > 1`, the forwarding threads the daemon
//!   dispatches to (NDT by name hash, PitToken thread id for Data/Nack).
//! * [`input`]: with `udp_input_threads > 1`, the threads that read the
//!   UDP listen address's other `SO_REUSEPORT` sockets for the daemon.
//! * [`udp`]: `recvmmsg`/`sendmmsg` in batches and the socket buffer
//!   sizes, for the daemon's UDP listener and the tools' faces.
//! * [`client::Client`]: management of a running forwarder, as `nfdc`.
//!
//! See the crate README for the threading contract, the faces and the caps.

pub mod client;
pub mod config;
pub mod core;
pub mod daemon;
pub mod dataset;
pub mod ether;
pub mod frag;
pub mod input;
pub mod mgmt;
pub mod reasm;
pub mod stream;
pub mod threads;
pub mod tools;
pub mod udp;

pub use config::{CsPolicy, NdndConfig, PitKind};
pub use core::{Core, CoreCounters, FaceInfo};
pub use daemon::{Daemon, DaemonMetrics, ThreadMetrics};
