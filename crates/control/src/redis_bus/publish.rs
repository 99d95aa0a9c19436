//! The controller side of the Redis bus: hold the lease, publish
//! snapshots and deltas, rebuild from Redis on start.
//!
//! A change is committed when its entry is in the stream: every publish
//! is one Lua script that checks, atomically, that this controller still
//! holds the lease and that the head is the one it published last (the
//! fencing check), then appends the entry and moves the head. A controller
//! killed mid-publish leaves either the whole entry or nothing; a stale
//! controller (its lease expired, another took over) publishes nothing.
//! After any failed publish the controller is poisoned (its FIB may hold a
//! change Redis lacks): drop it and [`RedisController::acquire`] again,
//! which rebuilds from Redis.
//!
//! A network FIB ([`NetworkFib`](nexthop_othello::fib_net::NetworkFib), a
//! value column per switch over one shared graph) is published the same
//! way: each batch is applied once; one script appends its route changes
//! to the change log (`P:ctl`) and, to the stream of each column the batch
//! touched, that column's delta, atomically; a snapshot holds every
//! column's data-plane body. A column's entries chain by the column's
//! version (the version its previous entry produced), so a follower of one
//! column sees no gap where a batch left its column alone.

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nexthop_othello::fib::{ConciseFib, LinedChange, NameKey, RouteChange};

use super::{
    connect, fresh_epoch, parse_id, read_part, stream_entries, value_bytes, BusError, BusFib,
    ColumnSnap, Entry, Keys, Manifest, Part, RecordKey, Which, CTL_COLUMN,
};
use crate::frame::AuthKey;
use crate::message::{delta_payload, parse_snapshot_body, try_snapshot_body};

/// Append entries if this controller holds the lease and the head is the
/// one it expects. KEYS: lease, head, streams (the change log first).
/// ARGV: holder, expected head, new head without its stream id, one entry
/// per stream. Returns the new ids, space-separated; the head ends with
/// the first.
const PUBLISH: &str = r"
local l = redis.call('GET', KEYS[1])
if l ~= ARGV[1] then return {-1, l or ''} end
local h = redis.call('GET', KEYS[2]) or ''
if h ~= ARGV[2] then return {-2, h} end
local ids = {}
for i = 3, #KEYS do ids[#ids + 1] = redis.call('XADD', KEYS[i], '*', 'e', ARGV[i + 1]) end
redis.call('SET', KEYS[2], ARGV[3] .. ' ' .. ids[1])
return {1, table.concat(ids, ' ')}
";

/// Commit a snapshot whose chunks are written. KEYS: lease, head,
/// manifest, S streams, chunk keys... ARGV: holder, expected head,
/// manifest, new head, S, then per stream the MINID to trim it to ('' for
/// none).
const COMMIT: &str = r"
local l = redis.call('GET', KEYS[1])
if l ~= ARGV[1] then return {-1, l or ''} end
local h = redis.call('GET', KEYS[2]) or ''
if h ~= ARGV[2] then return {-2, h} end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SET', KEYS[2], ARGV[4])
local ns = tonumber(ARGV[5])
for i = 4 + ns, #KEYS do redis.call('PERSIST', KEYS[i]) end
for i = 1, ns do
  if ARGV[5 + i] ~= '' then redis.call('XTRIM', KEYS[3 + i], 'MINID', ARGV[5 + i]) end
end
return {1, ''}
";

/// Renew the lease if held. KEYS: lease. ARGV: holder, ms.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// Release the lease if held. KEYS: lease. ARGV: holder.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Redis controller settings.
#[derive(Clone, Debug)]
pub struct RedisControllerConfig {
    /// Redis URL (`redis://HOST:PORT/DB`, `unix:///PATH`).
    pub url: String,
    /// The FIB's name in Redis (1 to 128 letters, digits, `.`, `_`, `-`).
    pub fib: String,
    /// This controller's id in the lease (default: random).
    pub holder: String,
    /// Lease time (default 3 s): renew it ([`RedisController::renew`])
    /// well within it; a standby takes over at most this long after the
    /// last renewal.
    pub lease: Duration,
    /// How often a standby tries to take the lease (default 200 ms).
    pub poll: Duration,
    /// Largest snapshot chunk stored under one key (default 4 MiB).
    pub chunk_bytes: usize,
    /// A fresh snapshot is published (and the stream trimmed) after this
    /// many changes (default 100 000; 0: only on start).
    pub snapshot_every: u64,
    /// Route changes per stream entry (default 256; see
    /// [`crate::ControllerConfig::changes_per_delta`]).
    pub changes_per_delta: usize,
    /// Connect, read and write timeout (default 5 s).
    pub timeout: Duration,
    /// Emit `tracing` events.
    pub log: bool,
}

impl RedisControllerConfig {
    /// Defaults for FIB `fib` on the Redis at `url`.
    pub fn new(url: impl Into<String>, fib: impl Into<String>) -> Self {
        RedisControllerConfig {
            url: url.into(),
            fib: fib.into(),
            holder: format!("ctl-{:016x}", fresh_epoch()),
            lease: Duration::from_secs(3),
            poll: Duration::from_millis(200),
            chunk_bytes: 4 << 20,
            snapshot_every: 100_000,
            changes_per_delta: 256,
            timeout: Duration::from_secs(5),
            log: true,
        }
    }
}

/// What one [`RedisController::apply_changes`] call published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BusReport {
    /// Changes applied and published.
    pub changes: usize,
    /// Stream entries appended (a network FIB's: change-log entries plus
    /// column entries).
    pub entries: usize,
    /// FIB version after the call.
    pub version: u64,
    /// A fresh snapshot was published after the entries.
    pub snapshot: bool,
}

/// Why [`RedisController::acquire`] failed, with the FIB it was given (or
/// had rebuilt) and its version, for the next try.
pub struct AcquireError<K, F = ConciseFib<K>> {
    /// What failed.
    pub error: BusError,
    /// The state to try again with (`None` only when stopped or the name
    /// is invalid before anything was taken).
    pub state: Option<Box<(F, u64)>>,
    _k: PhantomData<fn() -> K>,
}

impl<K, F> std::fmt::Debug for AcquireError<K, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcquireError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<K, F> std::fmt::Display for AcquireError<K, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<K, F> std::error::Error for AcquireError<K, F> {}

/// Where one value column's entries are.
#[derive(Clone, Debug)]
struct ColPos {
    /// The version its last entry (or the snapshot) produced.
    version: u64,
    /// Actions of the table its followers have.
    actions: usize,
}

/// The active controller of one FIB in Redis (holds its lease): a Concise
/// FIB (the default) or a
/// [`NetworkFib`](nexthop_othello::fib_net::NetworkFib).
pub struct RedisController<K: NameKey, F: BusFib<K> = ConciseFib<K>> {
    cfg: RedisControllerConfig,
    keys: Keys,
    rk: RecordKey,
    con: redis::Connection,
    fib: F,
    epoch: u64,
    version: u64,
    /// Id of the last change-log entry published (`0-0`: none).
    last_id: String,
    /// Per value column, its stream's position.
    cols: Vec<ColPos>,
    /// The head this controller wrote last.
    head: String,
    /// Stream ids (per [`Self::streams`]) and chunk keys of the current
    /// snapshot.
    snap: Option<(Vec<String>, Vec<String>)>,
    since_snapshot: u64,
    poisoned: bool,
    /// Entries refused while rebuilding (bad tag, malformed, replayed).
    refused: u64,
    _k: PhantomData<fn() -> K>,
}

impl<K: NameKey, F: BusFib<K>> std::fmt::Debug for RedisController<K, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisController")
            .field("fib", &self.cfg.fib)
            .field("holder", &self.cfg.holder)
            .field("epoch", &self.epoch)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

fn script_reply(v: &redis::Value) -> Option<(i64, String)> {
    let redis::Value::Array(a) = v else {
        return None;
    };
    let [code, text] = a.as_slice() else {
        return None;
    };
    let redis::Value::Int(code) = code else {
        return None;
    };
    let text =
        value_bytes(text).map_or_else(String::new, |b| String::from_utf8_lossy(b).into_owned());
    Some((*code, text))
}

impl<K: NameKey, F: BusFib<K>> RedisController<K, F> {
    /// Wait for the lease (a standby polls every [`RedisControllerConfig::poll`]
    /// until `stop`), then rebuild the FIB from Redis: the latest snapshot's
    /// control state plus the changes of every stream entry after it. When
    /// Redis holds nothing for this FIB, or an older version than
    /// `fallback_version` (Redis restarted and lost data), `fallback` is the
    /// state. Publishes a fresh snapshot (a new epoch) before returning.
    /// On failure the error carries the state back.
    pub fn acquire(
        key: &AuthKey,
        cfg: RedisControllerConfig,
        fallback: F,
        fallback_version: u64,
        stop: &AtomicBool,
    ) -> Result<Self, AcquireError<K, F>> {
        let back = |error, fib, v| AcquireError {
            error,
            state: Some(Box::new((fib, v))),
            _k: PhantomData,
        };
        let keys = match Keys::new(&cfg.fib) {
            Ok(k) => k,
            Err(e) => return Err(back(e, fallback, fallback_version)),
        };
        let rk = RecordKey::new(key, &cfg.fib);
        let mut con = loop {
            if stop.load(Ordering::SeqCst) {
                return Err(back(BusError::Stopped, fallback, fallback_version));
            }
            match Self::try_lease(&cfg, &keys) {
                Ok(Some(con)) => break con,
                Ok(None) => {}
                Err(e) => {
                    if cfg.log {
                        tracing::warn!(target: "nexthop_control::redis", "lease: {e}");
                    }
                }
            }
            std::thread::sleep(cfg.poll.max(Duration::from_millis(1)));
        };
        let head: Option<String> = match redis::cmd("GET").arg(keys.head()).query(&mut con) {
            Ok(h) => h,
            Err(e) => return Err(back(e.into(), fallback, fallback_version)),
        };
        let cols = vec![
            ColPos {
                version: fallback_version,
                actions: 0,
            };
            fallback.columns()
        ];
        let mut c = RedisController {
            fib: fallback,
            epoch: 0,
            version: fallback_version,
            last_id: "0-0".into(),
            cols,
            _k: PhantomData,
            head: head.clone().unwrap_or_default(),
            snap: None,
            since_snapshot: 0,
            poisoned: false,
            refused: 0,
            cfg,
            keys,
            rk,
            con,
        };
        let r = c
            .keeping_lease(|c| c.rebuild(fallback_version))
            .and_then(|()| {
                c.info(format_args!(
                    "active for FIB {} at version {} (holder {})",
                    c.cfg.fib, c.version, c.cfg.holder
                ));
                c.publish_snapshot()
            });
        match r {
            Ok(()) => Ok(c),
            Err(e) => Err(back(e, c.fib, c.version)),
        }
    }

    /// A connection holding the lease, or `None` if another holds it.
    fn try_lease(
        cfg: &RedisControllerConfig,
        keys: &Keys,
    ) -> Result<Option<redis::Connection>, BusError> {
        let mut con = connect(&cfg.url, cfg.timeout)?;
        let ms = cfg.lease.as_millis().max(1) as u64;
        let set: Option<String> = redis::cmd("SET")
            .arg(keys.lease())
            .arg(&cfg.holder)
            .arg("NX")
            .arg("PX")
            .arg(ms)
            .query(&mut con)?;
        if set.is_some() {
            return Ok(Some(con));
        }
        let renewed: i64 = redis::cmd("EVAL")
            .arg(RENEW)
            .arg(1)
            .arg(keys.lease())
            .arg(&cfg.holder)
            .arg(ms)
            .query(&mut con)?;
        Ok((renewed == 1).then_some(con))
    }

    fn info(&self, msg: std::fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::info!(target: "nexthop_control::redis", "{msg}");
        }
    }

    fn warn(&self, msg: std::fmt::Arguments<'_>) {
        if self.cfg.log {
            tracing::warn!(target: "nexthop_control::redis", "{msg}");
        }
    }

    /// Load the snapshot's control state and replay the stream after it.
    fn rebuild(&mut self, fallback_version: u64) -> Result<(), BusError> {
        let rec: Option<Vec<u8>> = redis::cmd("GET")
            .arg(self.keys.manifest())
            .query(&mut self.con)?;
        let Some(rec) = rec else {
            self.info(format_args!(
                "no snapshot in Redis for FIB {}: starting from the given FIB at version {}",
                self.cfg.fib, fallback_version
            ));
            return Ok(());
        };
        let m = Manifest::open(&rec, &self.rk)
            .map_err(|e| BusError::State(format!("snapshot manifest: {e}")))?;
        let body = read_part(&mut self.con, &self.keys, &m, Which::Control, u64::MAX)?;
        let (ctl, actions) =
            parse_snapshot_body(&body).map_err(|e| BusError::State(format!("control: {e}")))?;
        let mut fib = F::load_control(ctl, actions)?;
        let columns = self.fib.columns();
        if fib.columns() != columns || m.columns.len() != columns {
            return Err(BusError::State(format!(
                "Redis holds a FIB of {} columns, this controller's has {columns}",
                fib.columns()
            )));
        }
        let ctl_column = if columns == 1 { 0 } else { CTL_COLUMN };
        let mut version = m.version;
        let mut last = m.stream_id.clone();
        let stream = self.keys.ctl(columns);
        loop {
            let page: redis::Value = redis::cmd("XRANGE")
                .arg(&stream)
                .arg(format!("({last}"))
                .arg("+")
                .arg("COUNT")
                .arg(1024)
                .query(&mut self.con)?;
            let entries = stream_entries(&page)
                .ok_or_else(|| BusError::State("unexpected XRANGE reply".into()))?;
            if entries.is_empty() {
                break;
            }
            for (id, rec) in entries {
                last = id.clone();
                let e = match Entry::open(&rec, &self.rk) {
                    Ok(e) => e,
                    Err(err) => {
                        self.refused += 1;
                        self.warn(format_args!("stream entry {id} refused: {err}"));
                        continue;
                    }
                };
                if e.epoch != m.epoch || e.from < version || e.column != ctl_column {
                    self.refused += 1;
                    self.warn(format_args!(
                        "stream entry {id} refused: epoch {:x} versions {}..{} (at {version}, \
                         epoch {:x})",
                        e.epoch, e.from, e.to, m.epoch
                    ));
                    continue;
                }
                if e.from > version {
                    return Err(BusError::State(format!(
                        "stream entry {id} applies to version {}, the log reached {version}",
                        e.from
                    )));
                }
                let changes = F::parse_changes(&e.changes, columns)
                    .map_err(|err| BusError::State(format!("entry {id} changes: {err}")))?;
                if changes.len() as u64 != e.to - e.from {
                    return Err(BusError::State(format!(
                        "entry {id} holds {} changes for versions {}..{}",
                        changes.len(),
                        e.from,
                        e.to
                    )));
                }
                let lined: Vec<(usize, &F::Change)> =
                    changes.iter().map(|(l, c)| (*l, c)).collect();
                if let Some(err) = fib.apply_merged(&lined).error {
                    return Err(err.into());
                }
                version = e.to;
            }
        }
        self.last_id = last;
        if version < fallback_version {
            self.warn(format_args!(
                "Redis holds version {version} of FIB {}, older than this controller's {}: \
                 publishing this controller's state",
                self.cfg.fib, fallback_version
            ));
            return Ok(());
        }
        self.fib = fib;
        self.version = version;
        self.epoch = m.epoch;
        Ok(())
    }

    /// The FIB.
    pub fn fib(&self) -> &F {
        &self.fib
    }

    /// Changes published since the FIB's start.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The version of value column `column`: what its followers reach
    /// (the version its last entry produced, or the snapshot's). `None`
    /// past the FIB's columns.
    pub fn column_version(&self, column: usize) -> Option<u64> {
        self.cols.get(column).map(|c| c.version)
    }

    /// The current snapshot lineage.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This controller's id in the lease.
    pub fn holder(&self) -> &str {
        &self.cfg.holder
    }

    /// Stream entries refused while rebuilding.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The FIB and its version (for a later [`Self::acquire`] after this
    /// controller failed).
    pub fn into_state(self) -> (F, u64) {
        (self.fib, self.version)
    }

    fn check(&mut self, reply: &redis::Value, expected: &str) -> Result<String, BusError> {
        match script_reply(reply) {
            Some((1, text)) => Ok(text),
            Some((-1, holder)) => {
                self.poisoned = true;
                Err(BusError::LeaseLost { holder })
            }
            Some((_, found)) => {
                self.poisoned = true;
                Err(BusError::Fenced {
                    expected: expected.to_owned(),
                    found,
                })
            }
            None => {
                self.poisoned = true;
                Err(BusError::State("unexpected script reply".into()))
            }
        }
    }

    /// Renew the lease; `LeaseLost` if another controller holds it now.
    pub fn renew(&mut self) -> Result<(), BusError> {
        if self.poisoned {
            return Err(BusError::Poisoned);
        }
        let r: Result<i64, _> = redis::cmd("EVAL")
            .arg(RENEW)
            .arg(1)
            .arg(self.keys.lease())
            .arg(&self.cfg.holder)
            .arg(self.cfg.lease.as_millis().max(1) as u64)
            .query(&mut self.con);
        match r {
            Ok(1) => Ok(()),
            Ok(_) => {
                self.poisoned = true;
                let holder: Option<String> = redis::cmd("GET")
                    .arg(self.keys.lease())
                    .query(&mut self.con)
                    .unwrap_or(None);
                Err(BusError::LeaseLost {
                    holder: holder.unwrap_or_default(),
                })
            }
            Err(e) => {
                self.poisoned = true;
                Err(e.into())
            }
        }
    }

    /// Run `f` while a second connection renews the lease every quarter
    /// of the lease time: a snapshot or a rebuild of a large FIB takes
    /// longer than the lease, and a publish checks the lease when it
    /// commits. The renewal only extends a lease this controller holds; it
    /// stops when `f` returns or the lease is another's (then the commit
    /// fails with [`BusError::LeaseLost`]).
    fn keeping_lease<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let done = AtomicBool::new(false);
        let (url, timeout) = (self.cfg.url.clone(), self.cfg.timeout);
        let (lease_key, holder) = (self.keys.lease(), self.cfg.holder.clone());
        let lease = self.cfg.lease;
        let (log, fib) = (self.cfg.log, self.cfg.fib.clone());
        std::thread::scope(|s| {
            s.spawn(|| {
                let every = (lease / 4).max(Duration::from_millis(1));
                let mut con = None;
                let mut next = Instant::now() + every;
                while !done.load(Ordering::SeqCst) {
                    if Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(1).min(every));
                        continue;
                    }
                    next = Instant::now() + every;
                    if con.is_none() {
                        con = connect(&url, timeout).ok();
                    }
                    let Some(c) = con.as_mut() else { continue };
                    let r: Result<i64, _> = redis::cmd("EVAL")
                        .arg(RENEW)
                        .arg(1)
                        .arg(&lease_key)
                        .arg(&holder)
                        .arg(lease.as_millis().max(1) as u64)
                        .query(c);
                    match r {
                        Ok(1) => {}
                        Ok(_) => {
                            if log {
                                tracing::warn!(
                                    target: "nexthop_control::redis",
                                    "FIB {fib}: the lease was lost during a snapshot or rebuild"
                                );
                            }
                            return;
                        }
                        Err(_) => con = None,
                    }
                }
            });
            let r = f(self);
            done.store(true, Ordering::SeqCst);
            r
        })
    }

    /// Give the lease up (a standby takes over at its next poll).
    pub fn release(mut self) {
        let _: Result<i64, _> = redis::cmd("EVAL")
            .arg(RELEASE)
            .arg(1)
            .arg(self.keys.lease())
            .arg(&self.cfg.holder)
            .query(&mut self.con);
    }

    /// Publish a snapshot of the FIB as it is now, under a fresh epoch,
    /// and trim the stream to the previous snapshot's position.
    pub fn publish_snapshot(&mut self) -> Result<(), BusError> {
        if self.poisoned {
            return Err(BusError::Poisoned);
        }
        let r = self.keeping_lease(Self::snapshot_inner);
        if r.is_err() {
            self.poisoned = true;
        }
        r
    }

    /// The streams a snapshot trims: the change log, then (several
    /// columns) each column's.
    fn streams(&self) -> Vec<String> {
        let n = self.cols.len();
        let mut s = vec![self.keys.ctl(n)];
        if n > 1 {
            s.extend((0..n as u32).map(|c| self.keys.stream(c)));
        }
        s
    }

    /// The id of the last entry of each column stream (a network FIB's:
    /// after a rebuild this controller does not know them).
    fn column_heads(&mut self) -> Result<Vec<String>, BusError> {
        if self.cols.len() == 1 {
            return Ok(vec![self.last_id.clone()]);
        }
        let mut pipe = redis::pipe();
        for c in 0..self.cols.len() as u32 {
            pipe.cmd("XREVRANGE")
                .arg(self.keys.stream(c))
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1);
        }
        let replies: Vec<redis::Value> = pipe.query(&mut self.con)?;
        replies
            .iter()
            .map(|v| {
                let e = stream_entries(v)
                    .ok_or_else(|| BusError::State("unexpected XREVRANGE reply".into()))?;
                Ok(e.into_iter()
                    .next()
                    .map_or_else(|| "0-0".into(), |(id, _)| id))
            })
            .collect()
    }

    fn snapshot_inner(&mut self) -> Result<(), BusError> {
        let started = Instant::now();
        let epoch = fresh_epoch();
        let actions = self.fib.action_table().to_text();
        let control = try_snapshot_body(&self.fib.try_save_control()?, &actions)?;
        let chunk = self.cfg.chunk_bytes.max(1024);
        let heads = self.column_heads()?;
        let mut columns = Vec::with_capacity(self.cols.len());
        let mut chunk_keys = Vec::new();
        let mut data_bytes = 0;
        let mut put = |con: &mut redis::Connection, which, body: &[u8]| {
            let mut pipe = redis::pipe();
            let parts: Vec<&[u8]> = if body.is_empty() {
                vec![&[][..]]
            } else {
                body.chunks(chunk).collect()
            };
            for (i, part) in parts.into_iter().enumerate() {
                let k = self.keys.chunk(epoch, self.version, which, i as u32);
                // Expires unless the commit below makes it persistent: a
                // controller killed here leaves nothing behind for long.
                pipe.cmd("SET")
                    .arg(&k)
                    .arg(part)
                    .arg("PX")
                    .arg(600_000)
                    .ignore();
                chunk_keys.push(k);
            }
            pipe.query::<()>(con)
        };
        for (c, head) in heads.iter().enumerate() {
            // One column's body at a time: a network FIB's are not all held.
            let data = try_snapshot_body(&self.fib.othello().try_snapshot(c)?, &actions)?;
            put(&mut self.con, Which::Data(c as u32), &data)?;
            data_bytes += data.len();
            columns.push(ColumnSnap {
                stream_id: head.clone(),
                version: self.version,
                data: Part::of(&data, chunk),
            });
        }
        put(&mut self.con, Which::Control, &control)?;
        let m = Manifest {
            epoch,
            version: self.version,
            stream_id: self.last_id.clone(),
            control: Part::of(&control, chunk),
            columns,
        };
        let new_head = format!("{epoch:x} {} {}", self.version, self.last_id);
        let streams = self.streams();
        let mut ids = vec![self.last_id.clone()];
        if self.cols.len() > 1 {
            ids.extend(heads.iter().cloned());
        }
        let trim = self.snap.as_ref().map(|(ids, _)| ids.clone());
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(COMMIT)
            .arg(3 + streams.len() + chunk_keys.len())
            .arg(self.keys.lease())
            .arg(self.keys.head())
            .arg(self.keys.manifest());
        for k in streams.iter().chain(&chunk_keys) {
            cmd.arg(k);
        }
        cmd.arg(&self.cfg.holder)
            .arg(&self.head)
            .arg(m.seal(&self.rk))
            .arg(&new_head)
            .arg(streams.len());
        for i in 0..streams.len() {
            let id = trim
                .as_ref()
                .and_then(|t| t.get(i))
                .map_or("", |s| s.as_str());
            cmd.arg(if id == "0-0" { "" } else { id });
        }
        let reply: redis::Value = cmd.query(&mut self.con)?;
        let expected = self.head.clone();
        self.check(&reply, &expected)?;
        self.head = new_head;
        self.epoch = epoch;
        self.since_snapshot = 0;
        let table = self.fib.action_table().len();
        for c in &mut self.cols {
            *c = ColPos {
                version: self.version,
                actions: table,
            };
        }
        // The superseded snapshot's chunks stay a minute for followers
        // still reading them.
        if let Some((_, old)) = self.snap.take() {
            let mut pipe = redis::pipe();
            for k in old {
                pipe.cmd("PEXPIRE").arg(k).arg(60_000).ignore();
            }
            pipe.query::<()>(&mut self.con)?;
        }
        self.snap = Some((ids, chunk_keys));
        self.info(format_args!(
            "published snapshot of FIB {} at version {} (epoch {epoch:x}, {} columns, {} + {} \
             bytes) in {:?}",
            self.cfg.fib,
            self.version,
            self.cols.len(),
            data_bytes,
            control.len(),
            started.elapsed()
        ));
        Ok(())
    }

    /// Apply a batch and publish it, a stream entry (per touched column)
    /// per chunk of [`RedisControllerConfig::changes_per_delta`]; all or
    /// nothing at validation. An error after validation poisons the
    /// controller.
    pub fn apply_lined(&mut self, changes: &[(usize, &F::Change)]) -> Result<BusReport, BusError> {
        if self.poisoned {
            return Err(BusError::Poisoned);
        }
        self.fib.validate(changes)?;
        let per = self.cfg.changes_per_delta.max(1);
        let mut r = BusReport::default();
        for chunk in changes.chunks(per) {
            let m = self.fib.apply_merged(chunk);
            if m.applied > 0 {
                let mut text = String::new();
                for (_, c) in &chunk[..m.applied] {
                    F::write_change(c, &mut text);
                }
                let to = self.version + m.applied as u64;
                match self.publish(&m.change, to, text) {
                    Ok(n) => r.entries += n,
                    Err(err) => {
                        // The FIB holds the chunk (Redis may or may not): its
                        // version says so, for `into_state`.
                        self.poisoned = true;
                        self.version = to;
                        return Err(err);
                    }
                }
                r.changes += m.applied;
            }
            if let Some(err) = m.error {
                self.poisoned = true;
                return Err(err.into());
            }
        }
        if self.cfg.snapshot_every > 0 && self.since_snapshot >= self.cfg.snapshot_every {
            self.publish_snapshot()?;
            r.snapshot = true;
        }
        r.version = self.version;
        Ok(r)
    }

    /// The entries of one applied chunk, published at once: for one
    /// column, an entry with its delta and its changes; for several, a
    /// change-log entry and an entry per column the change touched.
    /// Returns the number of entries.
    fn publish(
        &mut self,
        change: &nexthop_othello::Change,
        to: u64,
        changes: String,
    ) -> Result<usize, BusError> {
        let n = self.cols.len();
        let table = self.fib.action_table();
        let column_entry = |c: usize, pos: &ColPos, changes: String| {
            let mut new_actions = String::new();
            for (id, a) in table.iter().skip(pos.actions) {
                let _ = writeln!(new_actions, "{id} {a}");
            }
            let delta = self.fib.othello().delta(change, c);
            Entry {
                epoch: self.epoch,
                from: pos.version,
                to,
                column: c as u32,
                payload: delta_payload(&delta.encode(), &new_actions),
                changes,
            }
        };
        let mut out: Vec<(String, Option<usize>, Entry)> = Vec::new();
        if n == 1 {
            out.push((
                self.keys.stream(0),
                Some(0),
                column_entry(0, &self.cols[0], changes),
            ));
        } else {
            out.push((
                self.keys.ctl(n),
                None,
                Entry {
                    epoch: self.epoch,
                    from: self.version,
                    to,
                    column: CTL_COLUMN,
                    payload: Vec::new(),
                    changes,
                },
            ));
            for (c, pos) in self.cols.iter().enumerate() {
                if change.is_rebuild() || !change.writes(c).is_empty() {
                    out.push((
                        self.keys.stream(c as u32),
                        Some(c),
                        column_entry(c, pos, String::new()),
                    ));
                }
            }
        }
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(PUBLISH)
            .arg(2 + out.len())
            .arg(self.keys.lease())
            .arg(self.keys.head());
        for (k, _, _) in &out {
            cmd.arg(k);
        }
        cmd.arg(&self.cfg.holder)
            .arg(&self.head)
            .arg(format!("{:x} {to}", self.epoch));
        for (_, _, e) in &out {
            cmd.arg(e.seal(&self.rk));
        }
        let reply: redis::Value = cmd.query(&mut self.con)?;
        let expected = self.head.clone();
        let ids = self.check(&reply, &expected)?;
        let ids: Vec<&str> = ids.split(' ').collect();
        if ids.len() != out.len() || ids.iter().any(|i| parse_id(i).is_none()) {
            self.poisoned = true;
            return Err(BusError::State("unexpected publish reply".into()));
        }
        let table = self.fib.action_table().len();
        for (_, col, _) in &out {
            if let Some(c) = *col {
                self.cols[c] = ColPos {
                    version: to,
                    actions: table,
                };
            }
        }
        self.head = format!("{:x} {to} {}", self.epoch, ids[0]);
        self.last_id = ids[0].to_owned();
        self.since_snapshot += to - self.version;
        self.version = to;
        Ok(out.len())
    }
}

impl<K: NameKey> RedisController<K, ConciseFib<K>> {
    /// Apply route changes and publish them, a stream entry per chunk of
    /// [`RedisControllerConfig::changes_per_delta`]; all or nothing at
    /// validation. An error after validation poisons the controller.
    pub fn apply_changes(&mut self, changes: &[RouteChange<K>]) -> Result<BusReport, BusError> {
        self.apply_numbered(&nexthop_othello::fib::numbered(changes))
    }

    /// [`Self::apply_changes`] with the line numbers of a changes file.
    pub fn apply_numbered<C: LinedChange<K>>(
        &mut self,
        changes: &[C],
    ) -> Result<BusReport, BusError> {
        let lined: Vec<(usize, &RouteChange<K>)> =
            changes.iter().map(|c| (c.line(), c.change())).collect();
        self.apply_lined(&lined)
    }
}
