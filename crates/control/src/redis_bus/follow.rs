//! The forwarder side of the Redis bus: load the latest snapshot, follow
//! the delta stream with blocking reads, apply each delta in place to the
//! lock-free [`nexthop_othello::Query`] readers use (a snapshot swaps in a
//! new [`Table`]).
//!
//! Every entry is checked before it is applied: its tag (a forged,
//! altered or truncated entry is refused: counted, logged, skipped), its
//! epoch (another snapshot lineage: resync from the snapshot) and its
//! versions (one that applies to an older version is a replay: refused; one
//! that applies to a newer version means entries are missing, a gap or a
//! trimmed stream: resync from the snapshot). While Redis is unreachable
//! the table stays as it was (forwarding goes on with the last good FIB)
//! and the follower reconnects with backoff, then reads on from the last
//! entry it saw. With nothing to read for
//! [`RedisFollowerConfig::block`] it checks the manifest, so a snapshot
//! published after a trim, a controller handover or a Redis restart that
//! lost the stream is picked up.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use nexthop_othello::fib::ActionTable;
use nexthop_othello::{Delta, Query};

use super::{
    connect, read_part, stream_entries, BusError, Entry, Keys, Manifest, RecordError, RecordKey,
    Which,
};
use crate::follower::Table;
use crate::frame::{AuthKey, MsgType};
use crate::message::{parse_snapshot_body, Message};

/// Redis follower settings.
#[derive(Clone, Debug)]
pub struct RedisFollowerConfig {
    /// Redis URL (`redis://HOST:PORT/DB`, `unix:///PATH`).
    pub url: String,
    /// The FIB's name in Redis.
    pub fib: String,
    /// The value column (stream) to follow: 0 for a Concise FIB, the
    /// switch's column of a network FIB.
    pub column: u32,
    /// This forwarder's name (logs).
    pub forwarder_id: String,
    /// Longest blocking read (default 1 s); then the manifest is checked.
    pub block: Duration,
    /// Connect, read and write timeout (default 5 s; longer than `block`).
    pub timeout: Duration,
    /// First reconnect delay; doubles per failure up to `backoff_max`.
    pub backoff_min: Duration,
    /// Longest reconnect delay.
    pub backoff_max: Duration,
    /// Largest snapshot body loaded (default 64 GiB).
    pub max_snapshot: u64,
    /// Emit `tracing` events.
    pub log: bool,
}

impl RedisFollowerConfig {
    /// Defaults for following FIB `fib` on the Redis at `url`.
    pub fn new(url: impl Into<String>, fib: impl Into<String>, id: impl Into<String>) -> Self {
        RedisFollowerConfig {
            url: url.into(),
            fib: fib.into(),
            column: 0,
            forwarder_id: id.into(),
            block: Duration::from_secs(1),
            timeout: Duration::from_secs(5),
            backoff_min: Duration::from_millis(20),
            backoff_max: Duration::from_secs(2),
            max_snapshot: 64 << 30,
            log: true,
        }
    }
}

/// A copy of the follower's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedisFollowerStats {
    /// Connections to Redis made.
    pub connects: u64,
    /// Redis errors (unreachable, connection lost, timeouts).
    pub redis_errors: u64,
    /// Snapshots installed.
    pub snapshots: u64,
    /// Stream entries applied.
    pub deltas: u64,
    /// Resyncs from the snapshot (gap, trimmed stream, new epoch, delta
    /// that did not apply).
    pub resyncs: u64,
    /// Records refused because their tag did not verify.
    pub bad_mac: u64,
    /// Records refused as malformed (authentic but not well formed,
    /// another column, a snapshot that does not match its manifest).
    pub malformed: u64,
    /// Entries refused because they apply to an older version (replays).
    pub replays: u64,
    /// Entries that showed a gap (entries missing before them).
    pub gaps: u64,
    /// Deltas that did not apply to the table.
    pub apply_errors: u64,
    /// FIB version of the table (of a network FIB: the version of the
    /// column's last change).
    pub version: u64,
    /// Snapshot lineage of the table.
    pub epoch: u64,
}

impl From<RedisFollowerStats> for crate::FollowerStats {
    /// The TCP follower's counters, as far as they apply: refusals by
    /// reason (a bad tag, malformed, a replay, a gap as out of order, a
    /// delta that did not apply), Redis connections as connects, the
    /// version as `last_seq`.
    fn from(s: RedisFollowerStats) -> Self {
        use crate::RejectReason as R;
        let mut rejects = [0u64; 8];
        for (i, r) in R::ALL.iter().enumerate() {
            rejects[i] = match r {
                R::BadMac => s.bad_mac,
                R::Malformed => s.malformed,
                R::Replay => s.replays,
                R::OutOfOrder => s.gaps,
                R::Apply => s.apply_errors,
                _ => 0,
            };
        }
        crate::FollowerStats {
            connects: s.connects,
            snapshots: s.snapshots,
            deltas: s.deltas,
            resyncs: s.resyncs,
            rejects,
            last_seq: s.version,
            ..Default::default()
        }
    }
}

#[derive(Default)]
struct Counters {
    connects: AtomicU64,
    redis_errors: AtomicU64,
    snapshots: AtomicU64,
    deltas: AtomicU64,
    resyncs: AtomicU64,
    bad_mac: AtomicU64,
    malformed: AtomicU64,
    replays: AtomicU64,
    gaps: AtomicU64,
    apply_errors: AtomicU64,
    version: AtomicU64,
    epoch: AtomicU64,
}

struct Shared {
    cfg: RedisFollowerConfig,
    keys: Keys,
    rk: RecordKey,
    table: ArcSwapOption<Table>,
    c: Counters,
    stop: AtomicBool,
}

impl Shared {
    fn info(&self, msg: fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::info!(target: "nexthop_control::redis", "follower {}: {msg}", self.cfg.forwarder_id);
        }
    }

    fn warn(&self, msg: fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::warn!(target: "nexthop_control::redis", "follower {}: {msg}", self.cfg.forwarder_id);
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn refuse(&self, id: &str, e: &RecordError) {
        match e {
            RecordError::BadMac => self.c.bad_mac.fetch_add(1, Ordering::Relaxed),
            RecordError::Malformed(_) => self.c.malformed.fetch_add(1, Ordering::Relaxed),
        };
        self.warn(format_args!("entry {id} refused: {e}"));
    }
}

/// A forwarder following one FIB through Redis (a background thread).
/// Dropping it stops the thread.
pub struct RedisFollower {
    sh: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for RedisFollower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFollower")
            .field("fib", &self.sh.cfg.fib)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl RedisFollower {
    /// Start following (connects in the background).
    pub fn start(key: &AuthKey, cfg: RedisFollowerConfig) -> Result<RedisFollower, BusError> {
        let keys = Keys::new(&cfg.fib)?;
        let rk = RecordKey::new(key, &cfg.fib);
        let sh = Arc::new(Shared {
            cfg,
            keys,
            rk,
            table: ArcSwapOption::empty(),
            c: Counters::default(),
            stop: AtomicBool::new(false),
        });
        let s = sh.clone();
        let thread = std::thread::Builder::new()
            .name("redis-follower".into())
            .spawn(move || run(&s))
            .map_err(|e| BusError::State(format!("spawn: {e}")))?;
        Ok(RedisFollower {
            sh,
            thread: Some(thread),
        })
    }

    /// The current table (`None` before the first snapshot).
    pub fn table(&self) -> Option<Arc<Table>> {
        self.sh.table.load_full()
    }

    /// The counters.
    pub fn stats(&self) -> RedisFollowerStats {
        let c = &self.sh.c;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RedisFollowerStats {
            connects: l(&c.connects),
            redis_errors: l(&c.redis_errors),
            snapshots: l(&c.snapshots),
            deltas: l(&c.deltas),
            resyncs: l(&c.resyncs),
            bad_mac: l(&c.bad_mac),
            malformed: l(&c.malformed),
            replays: l(&c.replays),
            gaps: l(&c.gaps),
            apply_errors: l(&c.apply_errors),
            version: l(&c.version),
            epoch: l(&c.epoch),
        }
    }

    /// Wait until `pred(stats)` holds or `timeout` passes; whether it held.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&RedisFollowerStats) -> bool) -> bool {
        crate::poll_until(timeout, Duration::from_millis(1), || pred(&self.stats()))
    }

    /// Stop the thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.sh.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RedisFollower {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.halt();
        }
    }
}

fn sleep_unless_stopped(sh: &Shared, d: Duration) {
    let end = Instant::now() + d;
    while !sh.stopped() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5).min(d));
    }
}

/// Where the follower is.
struct Pos {
    epoch: u64,
    version: u64,
    /// Last stream id read (`None`: a snapshot is needed first).
    id: Option<String>,
    /// Reading again from an older snapshot's position: entries already
    /// applied are skipped without counting them as replays.
    rewound: bool,
    /// The entry id of the last gap (a gap found twice at one entry waits
    /// for a newer snapshot instead of spinning).
    last_gap: Option<String>,
}

fn run(sh: &Shared) {
    let mut backoff = sh.cfg.backoff_min;
    let mut pos = Pos {
        epoch: 0,
        version: 0,
        id: None,
        rewound: false,
        last_gap: None,
    };
    while !sh.stopped() {
        match connect(&sh.cfg.url, sh.cfg.timeout) {
            Ok(mut con) => {
                sh.c.connects.fetch_add(1, Ordering::Relaxed);
                match session(sh, &mut con, &mut pos) {
                    Ok(()) => break,
                    Err(e) => {
                        sh.c.redis_errors.fetch_add(1, Ordering::Relaxed);
                        sh.warn(format_args!("{e}; keeping the current table, reconnecting"));
                        backoff = sh.cfg.backoff_min;
                    }
                }
            }
            Err(e) => {
                sh.c.redis_errors.fetch_add(1, Ordering::Relaxed);
                sh.warn(format_args!("connect: {e}"));
            }
        }
        sleep_unless_stopped(sh, backoff);
        backoff = (backoff * 2).min(sh.cfg.backoff_max);
    }
}

/// Follow until stopped (`Ok`) or a Redis error (`Err`).
fn session(sh: &Shared, con: &mut redis::Connection, pos: &mut Pos) -> Result<(), BusError> {
    let stream = sh.keys.stream(sh.cfg.column);
    let block = sh.cfg.block.as_millis().max(1) as u64;
    while !sh.stopped() {
        let Some(id) = pos.id.clone() else {
            if !load_snapshot(sh, con, pos)? {
                sleep_unless_stopped(sh, sh.cfg.block);
            }
            continue;
        };
        let reply: redis::Value = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(1024)
            .arg("BLOCK")
            .arg(block)
            .arg("STREAMS")
            .arg(&stream)
            .arg(&id)
            .query(con)?;
        let entries = match &reply {
            redis::Value::Nil => Vec::new(),
            redis::Value::Array(streams) => match streams.first() {
                Some(redis::Value::Array(kv)) if kv.len() == 2 => {
                    stream_entries(&kv[1]).unwrap_or_default()
                }
                _ => Vec::new(),
            },
            redis::Value::Map(m) => m
                .first()
                .and_then(|(_, v)| stream_entries(v))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if entries.is_empty() {
            check_manifest(sh, con, pos)?;
            continue;
        }
        for (id, rec) in entries {
            if !entry(sh, pos, &id, &rec) {
                break;
            }
        }
    }
    Ok(())
}

/// A newer snapshot (or one of another epoch) than the table's: resync.
fn check_manifest(sh: &Shared, con: &mut redis::Connection, pos: &mut Pos) -> Result<(), BusError> {
    let rec: Option<Vec<u8>> = redis::cmd("GET").arg(sh.keys.manifest()).query(con)?;
    let Some(rec) = rec else {
        return Ok(());
    };
    if let Ok(m) = Manifest::open(&rec, &sh.rk) {
        let version = m.column(sh.cfg.column).map_or(m.version, |c| c.version);
        if m.epoch != pos.epoch || version > pos.version {
            sh.c.resyncs.fetch_add(1, Ordering::Relaxed);
            sh.info(format_args!(
                "snapshot at version {version} (epoch {:x}) differs from the table's {} (epoch \
                 {:x}): resync",
                m.epoch, pos.version, pos.epoch
            ));
            pos.id = None;
        }
    }
    Ok(())
}

/// Handle one stream entry; `false` stops the batch (resync needed).
fn entry(sh: &Shared, pos: &mut Pos, id: &str, rec: &[u8]) -> bool {
    pos.id = Some(id.to_owned());
    let e = match Entry::open(rec, &sh.rk) {
        Ok(e) => e,
        Err(err) => {
            sh.refuse(id, &err);
            return true;
        }
    };
    if e.column != sh.cfg.column {
        sh.refuse(
            id,
            &RecordError::Malformed(format!(
                "column {}, this stream is {}",
                e.column, sh.cfg.column
            )),
        );
        return true;
    }
    if e.epoch == pos.epoch && e.from < pos.version {
        if !(pos.rewound && e.to <= pos.version) {
            sh.c.replays.fetch_add(1, Ordering::Relaxed);
            sh.warn(format_args!(
                "entry {id} refused: replay (versions {}..{}, the table is at {})",
                e.from, e.to, pos.version
            ));
        }
        return true;
    }
    if e.epoch != pos.epoch || e.from > pos.version {
        if e.epoch == pos.epoch {
            sh.c.gaps.fetch_add(1, Ordering::Relaxed);
        }
        sh.c.resyncs.fetch_add(1, Ordering::Relaxed);
        sh.warn(format_args!(
            "entry {id} applies to version {} (epoch {:x}), the table is at {} (epoch {:x}): \
             resync from the snapshot",
            e.from, e.epoch, pos.version, pos.epoch
        ));
        if pos.last_gap.as_deref() == Some(id) {
            // The snapshot did not close it: wait for a newer one.
            sleep_unless_stopped(sh, sh.cfg.block);
        }
        pos.last_gap = Some(id.to_owned());
        pos.id = None;
        return false;
    }
    match apply(sh, &e.payload) {
        Ok(()) => {
            pos.version = e.to;
            pos.rewound = false;
            sh.c.deltas.fetch_add(1, Ordering::Relaxed);
            sh.c.version.store(e.to, Ordering::Relaxed);
            true
        }
        Err(why) => {
            sh.c.apply_errors.fetch_add(1, Ordering::Relaxed);
            sh.c.resyncs.fetch_add(1, Ordering::Relaxed);
            sh.warn(format_args!("entry {id} did not apply: {why}; resync"));
            pos.id = None;
            false
        }
    }
}

/// Install the latest snapshot; `false` when Redis holds none (or none
/// that verifies).
fn load_snapshot(
    sh: &Shared,
    con: &mut redis::Connection,
    pos: &mut Pos,
) -> Result<bool, BusError> {
    let rec: Option<Vec<u8>> = redis::cmd("GET").arg(sh.keys.manifest()).query(con)?;
    let Some(rec) = rec else {
        return Ok(false);
    };
    let m = match Manifest::open(&rec, &sh.rk) {
        Ok(m) => m,
        Err(e) => {
            sh.refuse("snapshot manifest", &e);
            return Ok(false);
        }
    };
    let (stream_id, version) = match m.column(sh.cfg.column) {
        Ok(c) => (c.stream_id.clone(), c.version),
        Err(e) => {
            sh.refuse("snapshot manifest", &e);
            return Ok(false);
        }
    };
    let have = sh.table.load().is_some();
    if have && m.epoch == pos.epoch && version <= pos.version {
        // Same lineage, not newer: read on from its position, the entries
        // the table already has are skipped.
        pos.id = Some(stream_id);
        pos.rewound = true;
        return Ok(true);
    }
    let which = Which::Data(sh.cfg.column);
    let body = match read_part(con, &sh.keys, &m, which, sh.cfg.max_snapshot) {
        Ok(b) => b,
        Err(BusError::Redis(e)) => return Err(e.into()),
        Err(e) => {
            sh.c.malformed.fetch_add(1, Ordering::Relaxed);
            sh.warn(format_args!("{e}"));
            return Ok(false);
        }
    };
    let installed = parse_snapshot_body(&body)
        .map_err(|e| e.to_string())
        .and_then(|(snap, actions)| {
            let query = Query::from_snapshot(snap).map_err(|e| format!("snapshot: {e}"))?;
            let actions = ActionTable::from_text(actions).map_err(|e| format!("actions: {e}"))?;
            Ok(Table {
                query: Arc::new(query),
                actions: Arc::new(actions),
            })
        });
    match installed {
        Ok(t) => {
            sh.table.store(Some(Arc::new(t)));
            pos.epoch = m.epoch;
            pos.version = version;
            pos.id = Some(stream_id);
            pos.rewound = false;
            sh.c.snapshots.fetch_add(1, Ordering::Relaxed);
            sh.c.version.store(version, Ordering::Relaxed);
            sh.c.epoch.store(m.epoch, Ordering::Relaxed);
            sh.info(format_args!(
                "installed snapshot of column {}: version {version} (epoch {:x}), {} bytes",
                sh.cfg.column,
                m.epoch,
                body.len()
            ));
            Ok(true)
        }
        Err(e) => {
            sh.c.malformed.fetch_add(1, Ordering::Relaxed);
            sh.warn(format_args!("snapshot refused: {e}"));
            Ok(false)
        }
    }
}

/// Apply one Delta payload to the table (new action ids first, then the
/// slot writes in place; a rebuild delta swaps in a new table).
fn apply(sh: &Shared, payload: &[u8]) -> Result<(), String> {
    let Message::Delta { delta, new_actions } =
        Message::decode(MsgType::Delta, payload).map_err(|e| e.to_string())?
    else {
        return Err("not a delta".into());
    };
    let Some(cur) = sh.table.load_full() else {
        return Err("delta before any snapshot".into());
    };
    let actions = if new_actions.trim().is_empty() {
        None
    } else {
        let mut text = cur.actions.to_text();
        text.push_str(&new_actions);
        Some(ActionTable::from_text(&text).map_err(|e| format!("new action entries: {e}"))?)
    };
    match &delta {
        Delta::Snapshot(bytes) => {
            let query = Query::from_snapshot(bytes).map_err(|e| format!("snapshot: {e}"))?;
            sh.table.store(Some(Arc::new(Table {
                query: Arc::new(query),
                actions: Arc::new(actions.unwrap_or_else(|| (*cur.actions).clone())),
            })));
        }
        Delta::Ops { .. } => {
            if let Some(t) = actions {
                sh.table.store(Some(Arc::new(Table {
                    query: cur.query.clone(),
                    actions: Arc::new(t),
                })));
            }
            if let Err(e) = cur.query.apply(&delta) {
                sh.table.store(Some(cur));
                return Err(format!("delta: {e}"));
            }
        }
    }
    Ok(())
}
