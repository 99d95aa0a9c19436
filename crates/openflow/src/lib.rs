//! Open vSwitch as the fast path of software-defined forwarding: an SDF
//! app (the same [`nexthop_sdf::app::App`] the nexthop data plane runs)
//! decides the packets OVS misses, and its decisions become OpenFlow 1.3
//! flows, revoked by cookie when the app's state changes (paper §6–7,
//! where the fast path was a NetFPGA TCAM).
//!
//! * [`codec`]: the OpenFlow 1.3 messages used, typed, with an encoder
//!   and a decoder that never panics on untrusted bytes (no maintained
//!   crate covers OF1.3 synchronously: `rovs-openflow` is a
//!   work-in-progress async client, `rust_ofp` speaks OpenFlow 1.0).
//! * [`flow`]: a cached [`nexthop_sdf::Decision`] as a flow: match =
//!   exactly the marked bits (OXM with masks), priority from the mark's
//!   specificity, outputs, rewrites and the TTL primitive as actions; or
//!   why it cannot be one.
//! * [`backend`]: the controller without I/O: packet-in, app, then
//!   flow-mod, barrier and packet-out; `removed(state_id)` as deletes
//!   filtered by cookie; a flush on every (re)connect; counters.
//! * [`conn`]: the controller over TCP, one switch session at a time.
//! * [`vsctl`]: the bridge's controller and the app's tunnel ports, set
//!   with `ovs-vsctl`.
//!
//! See the crate README for the cookie layout and what is not expressible.
#![forbid(unsafe_code)]

pub mod backend;
pub mod codec;
pub mod conn;
pub mod flow;
pub mod vsctl;

pub use backend::{
    summary_fields, summary_line, BackendConfig, Controller, Counters, PortMapper, Revocation,
};
pub use codec::{Body, DecodeError, Message};
pub use conn::{serve, Channel, ServeConfig};
