//! The update protocol between a controller and its forwarders.
//!
//! A [`Controller`] owns a Concise FIB ([`nexthop_othello::fib::ConciseFib`]),
//! listens on TCP and sends every forwarder that connects a snapshot of the
//! data-plane structure, then the delta of every route change, in order. A
//! [`FibFollower`] runs on the forwarder: it installs the snapshot,
//! applies each delta in place to the lock-free [`nexthop_othello::Query`]
//! its pipeline reads, and reconnects and resynchronises after failures.
//!
//! Every message travels in a [`frame::Frame`]: magic, version, type,
//! session id, sequence number, generation, payload length, payload and an
//! HMAC-SHA256 tag. A connection starts with a [`handshake`]: both sides
//! send a random nonce (in frames keyed by the shared secret, [`AuthKey`]),
//! and every later frame is keyed by a per-connection, per-direction key
//! derived from the secret and both nonces (HKDF-SHA256), so nothing
//! recorded on one connection is accepted on another. Receivers accept
//! only the exact next sequence number of their connection. The wire format,
//! message flow, authentication, replay protection, resync and threading
//! are documented in `docs/control.md`. An [`AdminClient`] pushes route
//! changes to a running controller and reads its counters over the same
//! listener and handshake ([`admin`]). The [`redis_bus`] carries the same
//! snapshots and deltas through Redis instead: a [`RedisController`]
//! publishes them (holding a lease, so a standby can take over), a
//! [`RedisFollower`] follows them.
#![forbid(unsafe_code)]

pub mod admin;
pub mod controller;
pub mod follower;
pub mod frame;
pub mod handshake;
pub mod message;
pub mod redis_bus;

pub use admin::{AdminClient, AdminError, PushReport};
pub use controller::{
    ApplyReport, ControlError, Controller, ControllerConfig, ControllerStats, Propagation,
};
pub use follower::{FibFollower, FollowerConfig, FollowerStats, RejectReason, Table};
pub use frame::{AuthKey, Frame, FrameError, KeyError, MsgType, ReadError};
pub use handshake::{HandshakeError, SessionKeys};
pub use message::{
    BatchDelta, ErrorCode, Hello, Message, MessageError, FEATURE_DELTA_BATCH, ROLE_ADMIN,
};
pub use redis_bus::{
    AcquireError, BusError, BusFib, BusReport, RedisController, RedisControllerConfig,
    RedisFollower, RedisFollowerConfig, RedisFollowerStats,
};

/// Poll `done` every `step` until it holds or `timeout` passes; whether
/// it held (the followers' `wait_for`).
pub(crate) fn poll_until(
    timeout: std::time::Duration,
    step: std::time::Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let end = std::time::Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() >= end {
            return false;
        }
        std::thread::sleep(step);
    }
}
