//! The admin channel: push route changes to a running controller and read
//! its counters.
//!
//! ```text
//! admin client                                    controller
//!   |-- Nonce / <- Nonce -------------------------->|  the handshake of crate::handshake,
//!   |-- Hello(seq 1, features ROLE_ADMIN) --------->|  same key file, same caps
//!   |-- Push(seq 2, changes text) ----------------->|  parse_changes + apply_numbered
//!   |<- Report(seq 1, changes, version, ...) -------|  or Error(Refused, "line N: why")
//!   |-- StatsRequest(seq 3) ----------------------->|
//!   |<- Report(seq 2, the counters) ----------------|
//! ```
//!
//! An admin client completes the same version 2 handshake as a forwarder,
//! with the same shared secret, and says what it is with the
//! [`ROLE_ADMIN`] bit of its Hello (authenticated under the session key,
//! like every frame after the nonces), so a forwarder and an admin client
//! cannot be taken for one another. Its connection counts against the
//! controller's `max_connections` and `max_handshakes` like a forwarder's;
//! it is closed after [`ControllerConfig::admin_idle_timeout`] without a
//! request, and a Push larger than [`ControllerConfig::max_push_bytes`]
//! closes it.
//!
//! A Push carries the text of a changes file (`+ NAME ACTION`, `- NAME`,
//! `= NAME ACTION`, `#` comments). The controller parses it with the key
//! type of the FIB it serves ([`parse_changes`]) and applies it with
//! [`Controller::apply_numbered`](crate::Controller::apply_numbered), the
//! path a `--changes` file takes: the same validation, the same merged
//! deltas to every forwarder. A change that does not parse or apply
//! refuses the whole push: the answer is an Error with code
//! [`ErrorCode::Refused`] and the text `line N: reason`, nothing is
//! applied, and the connection stays open for the next request. Otherwise
//! the answer is a Report of what was applied ([`PushReport`]). A
//! StatsRequest is answered with a Report of [`ControllerStats`] and the
//! FIB's version, generation and size.
//!
//! Replays: the session keys depend on both sides' nonces, and each
//! direction accepts only the next sequence number, so a push recorded on
//! one connection is refused on any other (the Hello fails its MAC) and
//! cannot be repeated on its own.
//!
//! [`ControllerConfig::admin_idle_timeout`]: crate::ControllerConfig::admin_idle_timeout
//! [`ControllerConfig::max_push_bytes`]: crate::ControllerConfig::max_push_bytes
//! [`ControllerStats`]: crate::ControllerStats

use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::time::Duration;

use nexthop_othello::fib::{parse_changes, NameKey};
use thiserror::Error;

use crate::controller::{lock, ControllerStats, Shared};
use crate::frame::{encode_parts, read_frame, write_all, AuthKey, FrameError, ReadError};
use crate::handshake::{self, fresh_nonce, HandshakeError, SessionKeys};
use crate::message::{ErrorCode, Hello, Message, ROLE_ADMIN};

/// Largest Report accepted by a client (256 values of at most 264 bytes).
const MAX_REPORT_PAYLOAD: u32 = 1 << 17;

/// Serve an admin client that passed the handshake, on its connection's
/// thread, until it closes, goes idle or sends something invalid.
pub(crate) fn serve<K: NameKey>(
    sh: &Shared<K>,
    s: TcpStream,
    keys: SessionKeys,
    hello: &Hello,
    peer: SocketAddr,
) {
    let who = format!("{peer} (admin {})", hello.forwarder_id);
    sh.info(format_args!("{who}: admin session"));
    let idle = sh.cfg.admin_idle_timeout.max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(idle));
    let max = sh.cfg.max_push_bytes.min(crate::frame::MAX_PAYLOAD);
    let (mut expect, mut seq) = (2u64, 0u64);
    let why = loop {
        let f = match read_frame(&mut &s, &keys.recv, max) {
            Ok(f) => f,
            Err(ReadError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                sh.info(format_args!("{who}: no request for {idle:?}; closing"));
                break None;
            }
            Err(ReadError::Io(_)) => break None,
            Err(ReadError::Frame(e)) => break Some(e.to_string()),
        };
        if f.session != keys.session {
            break Some(format!("frame of session {:#x}", f.session));
        }
        if f.seq != expect {
            break Some(format!("sequence {} where {expect} was next", f.seq));
        }
        expect += 1;
        let answer = match Message::decode(f.ty, &f.payload) {
            Ok(Message::Push { changes }) => push(sh, &who, &changes),
            Ok(Message::StatsRequest) => Ok(stats_values(sh)),
            Ok(Message::Error { .. }) => break None,
            Ok(m) => break Some(format!("unexpected {:?} from an admin client", m.ty())),
            Err(e) => break Some(e.to_string()),
        };
        let m = match answer {
            Ok(values) => Message::Report { values },
            Err(text) => Message::Error {
                code: ErrorCode::Refused,
                text,
            },
        };
        let generation = lock(&sh.state).fib.othello().meta().generation;
        seq += 1;
        let b = encode_parts(
            &keys.send,
            m.ty(),
            keys.session,
            seq,
            generation,
            &m.encode(),
        );
        if let Err(e) = write_all(&mut &s, &b) {
            sh.info(format_args!("{who}: {e}"));
            break None;
        }
    };
    if let Some(why) = why {
        sh.counters.rejects.fetch_add(1, Ordering::Relaxed);
        sh.warn(format_args!("{who}: rejected: {why}; closing"));
    }
    let _ = s.shutdown(Shutdown::Both);
}

/// Apply a Push: its named counters, or the text of the refusal.
fn push<K: NameKey>(sh: &Shared<K>, who: &str, text: &str) -> Result<Vec<(String, u64)>, String> {
    let refused = |e: String| {
        sh.counters.pushes_refused.fetch_add(1, Ordering::Relaxed);
        sh.warn(format_args!("{who}: push refused: {e}"));
        e
    };
    let changes = parse_changes::<K>(text).map_err(|e| refused(e.to_string()))?;
    let r = sh
        .apply_numbered(&changes)
        .map_err(|e| refused(e.to_string()))?;
    sh.counters.pushes.fetch_add(1, Ordering::Relaxed);
    let (generation, names) = {
        let st = lock(&sh.state);
        (st.fib.othello().meta().generation, st.fib.len() as u64)
    };
    sh.info(format_args!(
        "{who}: pushed {} changes ({} deltas to {} forwarders), version {}",
        r.changes, r.deltas, r.followers, r.version
    ));
    let n = |v: usize| v as u64;
    Ok(named(&[
        ("changes", n(r.changes)),
        ("deltas", n(r.deltas)),
        ("slot_writes", n(r.slot_writes)),
        ("rebuilds", n(r.rebuilds)),
        ("new_actions", n(r.new_actions)),
        ("version", r.version),
        ("generation", generation),
        ("followers", n(r.followers)),
        ("names", names),
    ]))
}

fn named(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

/// The counters a StatsRequest is answered with.
fn stats_values<K: NameKey>(sh: &Shared<K>) -> Vec<(String, u64)> {
    let s: ControllerStats = sh.stats();
    let p = sh.propagation();
    let (version, generation, names) = {
        let st = lock(&sh.state);
        (
            st.version,
            st.fib.othello().meta().generation,
            st.fib.len() as u64,
        )
    };
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    named(&[
        ("version", version),
        ("generation", generation),
        ("names", names),
        ("accepted", s.accepted),
        ("active", s.active),
        ("handshaking", s.handshaking),
        ("refused", s.refused),
        ("handshake_timeouts", s.handshake_timeouts),
        ("slow_dropped", s.slow_dropped),
        ("keepalives", s.keepalives),
        ("snapshots_sent", s.snapshots_sent),
        ("snapshot_frames", s.snapshot_frames),
        ("deltas_sent", s.deltas_sent),
        ("changes_sent", s.changes_sent),
        ("batches_sent", s.batches_sent),
        ("resyncs", s.resyncs),
        ("rejects", s.rejects),
        ("acks", s.acks),
        ("acked", s.acked),
        ("admin_sessions", s.admin_sessions),
        ("pushes", s.pushes),
        ("pushes_refused", s.pushes_refused),
        ("propagation_samples", p.samples),
        ("propagation_median_ns", ns(p.median)),
        ("propagation_p99_ns", ns(p.p99)),
        ("propagation_max_ns", ns(p.max)),
    ])
}

/// Why an admin request failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AdminError {
    /// No connection could be made.
    #[error("connect to {addr}: {source}")]
    Connect {
        /// The address, as given.
        addr: String,
        /// The last error.
        source: io::Error,
    },
    /// The handshake failed (a controller that closes the connection
    /// during it is most likely using another key file).
    #[error("handshake with the controller: {0}")]
    Handshake(HandshakeError),
    /// The connection failed or timed out.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The controller's answer does not decode or authenticate.
    #[error(transparent)]
    Frame(FrameError),
    /// The controller's answer is not what the protocol allows here.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The controller refused the request (a change that does not parse
    /// or apply, as `line N: reason`); nothing was applied and the client
    /// may send another request.
    #[error("the controller refused the changes: {0}")]
    Refused(String),
    /// The controller closed the connection with this error.
    #[error("controller error {code:?}: {text}")]
    Closed {
        /// Its code.
        code: ErrorCode,
        /// Its text.
        text: String,
    },
}

impl From<ReadError> for AdminError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io(e) => AdminError::Io(e),
            ReadError::Frame(e) => AdminError::Frame(e),
        }
    }
}

/// What a Push applied (the controller's Report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PushReport {
    /// Changes applied (all of the push).
    pub changes: u64,
    /// Deltas sent to every forwarder for them.
    pub deltas: u64,
    /// Data-plane slot writes shipped.
    pub slot_writes: u64,
    /// Changes that rebuilt the structure.
    pub rebuilds: u64,
    /// Action-table entries added.
    pub new_actions: u64,
    /// The controller's FIB version after the push (changes applied since
    /// it started).
    pub version: u64,
    /// The Othello generation after the push.
    pub generation: u64,
    /// Forwarders the deltas were queued to.
    pub followers: u64,
    /// Names in the FIB after the push.
    pub names: u64,
}

impl PushReport {
    fn from_values(v: &[(String, u64)]) -> Result<PushReport, AdminError> {
        let get = |name: &str| {
            v.iter()
                .find(|(k, _)| k == name)
                .map(|&(_, x)| x)
                .ok_or_else(|| AdminError::Protocol(format!("push report without '{name}'")))
        };
        Ok(PushReport {
            changes: get("changes")?,
            deltas: get("deltas")?,
            slot_writes: get("slot_writes")?,
            rebuilds: get("rebuilds")?,
            new_actions: get("new_actions")?,
            version: get("version")?,
            generation: get("generation")?,
            followers: get("followers")?,
            names: get("names")?,
        })
    }
}

/// A connection to a controller's admin channel. One request at a time;
/// after [`AdminError::Refused`] it may be used again, after any other
/// error it should be dropped.
#[derive(Debug)]
pub struct AdminClient {
    stream: TcpStream,
    keys: SessionKeys,
    /// Sequence number of the last frame sent.
    seq: u64,
    /// Sequence number of the next frame expected.
    expect: u64,
}

impl AdminClient {
    /// Connect to the controller at `addr` with the shared secret `key`
    /// (the controller's `--key-file`) and introduce this client as an
    /// admin client. `timeout` bounds the connect, every write and the
    /// wait for every answer (a large push is applied before the answer).
    pub fn connect(
        addr: impl ToSocketAddrs + std::fmt::Display,
        key: &AuthKey,
        timeout: Duration,
    ) -> Result<AdminClient, AdminError> {
        let connect_err = |source| AdminError::Connect {
            addr: addr.to_string(),
            source,
        };
        let timeout = timeout.max(Duration::from_millis(1));
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        let mut stream = None;
        for a in addr.to_socket_addrs().map_err(connect_err)? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = stream.ok_or_else(|| connect_err(last))?;
        let _ = stream.set_nodelay(true);
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let keys = handshake::connect(&mut &stream, &mut &stream, key, &fresh_nonce()).map_err(
            |e| match e {
                HandshakeError::Io(io)
                    if matches!(
                        io.kind(),
                        io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::BrokenPipe
                    ) =>
                {
                    AdminError::Handshake(HandshakeError::Protocol(format!(
                        "the controller closed the connection ({io}; another key file, or \
                         its connection limit reached?)"
                    )))
                }
                HandshakeError::Frame(FrameError::BadMac) => {
                    AdminError::Handshake(HandshakeError::Protocol(
                        "the controller's Nonce fails the MAC (another key file?)".into(),
                    ))
                }
                e => AdminError::Handshake(e),
            },
        )?;
        let mut c = AdminClient {
            stream,
            keys,
            seq: 0,
            expect: 1,
        };
        let hello = Message::Hello(Hello {
            forwarder_id: format!("admin-{}", std::process::id()),
            column: 0,
            last_seq: 0,
            last_generation: 0,
            features: ROLE_ADMIN,
        });
        c.send(&hello)?;
        Ok(c)
    }

    fn send(&mut self, m: &Message) -> Result<(), AdminError> {
        self.seq += 1;
        let b = encode_parts(
            &self.keys.send,
            m.ty(),
            self.keys.session,
            self.seq,
            0,
            &m.encode(),
        );
        write_all(&mut &self.stream, &b)?;
        Ok(())
    }

    fn request(&mut self, m: &Message) -> Result<Vec<(String, u64)>, AdminError> {
        self.send(m)?;
        let f = read_frame(&mut &self.stream, &self.keys.recv, MAX_REPORT_PAYLOAD)?;
        if f.session != self.keys.session || f.seq != self.expect {
            return Err(AdminError::Protocol(format!(
                "frame of session {:#x} sequence {} where sequence {} was next",
                f.session, f.seq, self.expect
            )));
        }
        self.expect += 1;
        match Message::decode(f.ty, &f.payload) {
            Ok(Message::Report { values }) => Ok(values),
            Ok(Message::Error {
                code: ErrorCode::Refused,
                text,
            }) => Err(AdminError::Refused(text)),
            Ok(Message::Error { code, text }) => Err(AdminError::Closed { code, text }),
            Ok(Message::Snapshot { .. } | Message::SnapshotPart { .. }) => {
                Err(AdminError::Protocol(
                    "the controller sent a snapshot: it predates the admin channel".into(),
                ))
            }
            Ok(m) => Err(AdminError::Protocol(format!(
                "unexpected {:?} from the controller",
                m.ty()
            ))),
            Err(e) => Err(AdminError::Protocol(e.to_string())),
        }
    }

    /// Apply the changes of `changes` (the text of a changes file: `+
    /// NAME ACTION`, `- NAME`, `= NAME ACTION` lines) on the controller,
    /// all or nothing, and return what was applied.
    pub fn push(&mut self, changes: &str) -> Result<PushReport, AdminError> {
        let v = self.request(&Message::Push {
            changes: changes.to_string(),
        })?;
        PushReport::from_values(&v)
    }

    /// The controller's counters and its FIB's version, generation and
    /// size, by name, in the controller's order.
    pub fn stats(&mut self) -> Result<Vec<(String, u64)>, AdminError> {
        self.request(&Message::StatsRequest)
    }
}

impl Drop for AdminClient {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}
