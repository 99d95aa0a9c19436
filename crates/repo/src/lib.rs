//! NDN Repo storage on Redis.
//!
//! Data packets are stored as received (their wire bytes). The key layout
//! (see the crate README) gives O(1) exact lookups and O(log n) prefix
//! lookups, with no in-memory index on the Repo side: what Redis holds is
//! what the Repo serves, across restarts of either process.
//!
//! - `{ns}:d:<name>` (string): the Data packet's wire bytes, where `<name>` is
//!   the Name's TLV-VALUE (the concatenated component TLVs);
//! - `{ns}:i` (sorted set, every score 0): one member `<name>` per stored
//!   packet, so `ZRANGEBYLEX` walks the names under a prefix in TLV byte order;
//! - `{ns}:t` (hash): `<name>` -> the insert time (Unix milliseconds, decimal),
//!   the arrival time that MustBeFresh is judged against;
//! - `{ns}:p` (set): the Name TLV-VALUEs of the prefixes inserts registered
//!   (RegisterPrefix), registered again when the Repo restarts.
//!
//! An object (all segments of one put) is written in one `MULTI`/`EXEC`
//! transaction, so readers see all of it or none of it. Redis refuses a
//! transaction that would exceed `maxmemory` as a whole (`EXECABORT`/`OOM`),
//! so a full Redis leaves nothing partial behind: [`RepoError::Full`].

use std::time::{SystemTime, UNIX_EPOCH};

pub mod command;

use nexthop_wire::ndn::{Data, DataView, NameComponent};
use nexthop_wire::Name;

/// Default key namespace.
pub const DEFAULT_NAMESPACE: &str = "ndnrepo";
/// Default largest object [`Store::put_object`] accepts (sum of wire sizes).
pub const DEFAULT_MAX_OBJECT_BYTES: usize = 64 << 20;
/// Segment payload size of [`segment_object`] unless told otherwise.
pub const DEFAULT_SEGMENT_SIZE: usize = 8000;
/// Names read per `ZRANGEBYLEX` call while looking for a fresh match.
const SCAN_BATCH: isize = 64;
/// Packets per `MSET` (and `HSET`, `ZADD`) in a write.
const WRITE_BATCH: usize = 1024;
/// Names read per `MGET` by [`Store::find_many`].
pub const MGET_BATCH: usize = 512;

/// Why a Repo operation failed; [`RepoError::status`] gives its status code.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// Redis could not be reached (the next call reconnects).
    #[error("redis unavailable: {0}")]
    Unavailable(String),
    /// The TLS handshake with Redis failed: its certificate is not vouched
    /// for by the trusted CA (or names another host), or it refused ours.
    /// Retried like [`RepoError::Unavailable`], but only a configuration
    /// change fixes it.
    #[error("TLS to redis refused: {0} (check --redis-ca and the host name in the certificate)")]
    Tls(String),
    /// Redis refused the write because `maxmemory` is reached; nothing of
    /// the object was stored.
    #[error("redis is full (maxmemory): {0}")]
    Full(String),
    /// The object is larger than the configured limit.
    #[error("object of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A Data packet's name is not under the object's prefix.
    #[error("{name} is outside the prefix {prefix}")]
    OutOfPrefix {
        /// The packet's name.
        name: String,
        /// The prefix.
        prefix: String,
    },
    /// A packet or request that does not decode.
    #[error("malformed: {0}")]
    Malformed(String),
    /// The stored object misses segments.
    #[error("incomplete object {0}")]
    Incomplete(String),
    /// Any other error Redis answered.
    #[error("redis: {0}")]
    Redis(String),
}

impl RepoError {
    /// Status code in ndn-python-repo's scheme: 400 for a bad request
    /// (malformed, out of prefix, too large), 404 for a missing/incomplete
    /// object, 503 when Redis is down, 507 when it is full, 500 otherwise.
    pub fn status(&self) -> u64 {
        match self {
            RepoError::Malformed(_)
            | RepoError::OutOfPrefix { .. }
            | RepoError::TooLarge { .. } => 400,
            RepoError::Incomplete(_) => 404,
            RepoError::Unavailable(_) | RepoError::Tls(_) => 503,
            RepoError::Full(_) => 507,
            RepoError::Redis(_) => 500,
        }
    }

    fn from_redis(e: redis::RedisError) -> Self {
        let text = e.to_string();
        if is_tls_refusal(&text) {
            RepoError::Tls(text)
        } else if lost_connection(&e) || matches!(e.code(), Some("LOADING" | "TRYAGAIN")) {
            // LOADING: a restarted Redis still replaying its AOF or
            // snapshot; it answers once loaded.
            RepoError::Unavailable(text)
        } else if e.code() == Some("OOM") || text.contains("OOM") {
            RepoError::Full(text)
        } else {
            RepoError::Redis(text)
        }
    }
}

/// Whether a Redis client error means the connection is gone (to be opened
/// again by the next call).
fn lost_connection(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

/// Whether a Redis client error is a failed TLS handshake (rustls' words
/// for a certificate it does not trust, or an alert from the server).
fn is_tls_refusal(text: &str) -> bool {
    [
        "invalid peer certificate",
        "received fatal alert",
        "peer is incompatible",
        "InvalidCertificate",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// Normalise a Redis location: a bare path (`/run/redis.sock`) becomes a
/// `unix://` URL; `unix://`, `redis+unix://` and `redis://[:PASSWORD@]HOST:PORT[/DB]`
/// (TCP with AUTH) pass through.
pub fn redis_url(location: &str) -> String {
    if location.starts_with('/') {
        format!("unix://{location}")
    } else {
        location.to_string()
    }
}

/// TLS settings for a `rediss://HOST:PORT[/DB]` location (Redis started with
/// `--tls-port`). Without a CA the system's root certificates are trusted
/// (`/etc/ssl/certs`, through `rustls-native-certs`); the server's
/// certificate must name HOST (DNS name or IP address).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tls {
    /// PEM CA certificates to trust instead of the system's roots (for a
    /// self-signed or private CA).
    pub ca_pem: Option<Vec<u8>>,
    /// A PEM client certificate chain and its PEM private key, for a Redis
    /// that asks clients for one (`--tls-auth-clients yes`).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

impl Tls {
    /// Whether anything is set (a CA or a client certificate).
    pub fn is_set(&self) -> bool {
        self.ca_pem.is_some() || self.client.is_some()
    }
}

/// The Repo's store: one Redis connection, re-opened after a failure.
pub struct Store {
    client: redis::Client,
    conn: Option<redis::Connection>,
    ns: String,
    max_object_bytes: usize,
    /// Whether a connection was ever open (so that opening one again is a
    /// reconnection).
    was_connected: bool,
    reconnects: u64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("namespace", &self.ns)
            .field("connected", &self.conn.is_some())
            .field("max_object_bytes", &self.max_object_bytes)
            .field("reconnects", &self.reconnects)
            .finish()
    }
}

impl Store {
    /// A store on `location` (see [`redis_url`]) in the default namespace.
    /// Connecting is lazy: an unreachable Redis fails the first operation
    /// with [`RepoError::Unavailable`], not this call.
    pub fn open(location: &str) -> Result<Self, RepoError> {
        Self::with_namespace(location, DEFAULT_NAMESPACE)
    }

    /// A store whose keys start with `ns:`.
    pub fn with_namespace(location: &str, ns: &str) -> Result<Self, RepoError> {
        Self::with_tls(location, ns, &Tls::default())
    }

    /// A store on `location` with TLS settings: `tls` (when set) needs a
    /// `rediss://` location; a `rediss://` location without them trusts
    /// the system's root certificates. A CA or client certificate that does
    /// not parse is [`RepoError::Malformed`]; a server certificate the CA
    /// does not vouch for fails the first operation with
    /// [`RepoError::Tls`].
    pub fn with_tls(location: &str, ns: &str, tls: &Tls) -> Result<Self, RepoError> {
        let url = redis_url(location);
        let bad =
            |e: redis::RedisError| RepoError::Malformed(format!("redis URL {location:?}: {e}"));
        let client = if tls.is_set() {
            if !url.starts_with("rediss://") {
                return Err(RepoError::Malformed(format!(
                    "redis URL {location:?}: a CA or client certificate needs a rediss://HOST:PORT URL"
                )));
            }
            if let Some(ca) = &tls.ca_pem {
                use rustls::pki_types::{pem::PemObject, CertificateDer};
                let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(ca).collect();
                match certs {
                    Ok(c) if !c.is_empty() => {}
                    Ok(_) => {
                        return Err(RepoError::Malformed(
                            "the Redis CA file holds no PEM certificate".into(),
                        ))
                    }
                    Err(e) => {
                        return Err(RepoError::Malformed(format!(
                            "the Redis CA file does not parse as PEM certificates: {e}"
                        )))
                    }
                }
            }
            let certs = redis::TlsCertificates {
                client_tls: tls
                    .client
                    .as_ref()
                    .map(|(cert, key)| redis::ClientTlsConfig {
                        client_cert: cert.clone(),
                        client_key: key.clone(),
                    }),
                root_cert: tls.ca_pem.clone(),
            };
            redis::Client::build_with_tls(url.as_str(), certs).map_err(bad)?
        } else {
            redis::Client::open(url.as_str()).map_err(bad)?
        };
        Ok(Store {
            client,
            conn: None,
            ns: ns.to_string(),
            max_object_bytes: DEFAULT_MAX_OBJECT_BYTES,
            was_connected: false,
            reconnects: 0,
        })
    }

    /// How many times a connection was opened again after one was lost.
    pub fn reconnects(&self) -> u64 {
        self.reconnects
    }

    /// Set the largest object [`Store::put_object`] accepts.
    pub fn set_max_object_bytes(&mut self, max: usize) {
        self.max_object_bytes = max;
    }

    fn data_key(&self, name: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.ns.len() + 3 + name.len());
        k.extend_from_slice(self.ns.as_bytes());
        k.extend_from_slice(b":d:");
        k.extend_from_slice(name);
        k
    }

    fn index_key(&self) -> String {
        format!("{}:i", self.ns)
    }

    fn time_key(&self) -> String {
        format!("{}:t", self.ns)
    }

    fn prefix_key(&self) -> String {
        format!("{}:p", self.ns)
    }

    /// Remember `prefix` as registered by an insert (RegisterPrefix), so a
    /// restarted Repo registers it again.
    pub fn add_prefix(&mut self, prefix: &Name) -> Result<(), RepoError> {
        let k = self.prefix_key();
        self.with_conn(|c, _| redis::cmd("SADD").arg(&k).arg(prefix.value()).query(c))
    }

    /// Forget a prefix remembered by [`Store::add_prefix`].
    pub fn remove_prefix(&mut self, prefix: &Name) -> Result<(), RepoError> {
        let k = self.prefix_key();
        self.with_conn(|c, _| redis::cmd("SREM").arg(&k).arg(prefix.value()).query(c))
    }

    /// The prefixes remembered by [`Store::add_prefix`], in byte order.
    pub fn prefixes(&mut self) -> Result<Vec<Name>, RepoError> {
        let k = self.prefix_key();
        let mut v: Vec<Vec<u8>> = self.with_conn(|c, _| redis::cmd("SMEMBERS").arg(&k).query(c))?;
        v.sort();
        v.iter()
            .map(|m| Name::from_value(m).map_err(|e| RepoError::Malformed(e.to_string())))
            .collect()
    }

    /// Run `f` on the connection, opening it first if needed; a failed
    /// connection is dropped so that the next call reconnects. When a
    /// connection kept from earlier turns out to be gone (Redis restarted
    /// since), `f` runs once more on a fresh one, so the first operation
    /// after a restart does not fail for nothing; every operation of the
    /// store is idempotent (the same keys set, deleted or read again).
    fn with_conn<T>(
        &mut self,
        mut f: impl FnMut(&mut redis::Connection, &Self) -> redis::RedisResult<T>,
    ) -> Result<T, RepoError> {
        let kept = self.conn.is_some();
        match self.try_conn(&mut f) {
            Err(RepoError::Unavailable(_)) if kept && self.conn.is_none() => self.try_conn(&mut f),
            r => r,
        }
    }

    fn try_conn<T>(
        &mut self,
        f: &mut impl FnMut(&mut redis::Connection, &Self) -> redis::RedisResult<T>,
    ) -> Result<T, RepoError> {
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => {
                let c = self
                    .client
                    .get_connection()
                    .map_err(RepoError::from_redis)?;
                if self.was_connected {
                    self.reconnects += 1;
                }
                self.was_connected = true;
                c
            }
        };
        let r = f(&mut conn, self);
        match r {
            Ok(v) => {
                self.conn = Some(conn);
                Ok(v)
            }
            Err(e) => {
                let lost = lost_connection(&e);
                let err = RepoError::from_redis(e);
                if !lost && !matches!(err, RepoError::Tls(_)) {
                    self.conn = Some(conn);
                }
                Err(err)
            }
        }
    }

    /// Check that Redis answers.
    pub fn ping(&mut self) -> Result<(), RepoError> {
        self.with_conn(|c, _| redis::cmd("PING").query::<String>(c).map(|_| ()))
    }

    /// Store one Data packet (its wire bytes), replacing one of the same name.
    pub fn put(&mut self, wire: &[u8]) -> Result<Name, RepoError> {
        let data = Data::decode(wire).map_err(|e| RepoError::Malformed(e.to_string()))?;
        self.write_all(&[(data.name.value(), wire)])?;
        Ok(data.name)
    }

    /// Store every packet of one object atomically: each must decode and be
    /// under `prefix`, and their total size must be within the limit; Redis
    /// then holds all of them or none.
    pub fn put_object(&mut self, prefix: &Name, packets: &[Vec<u8>]) -> Result<usize, RepoError> {
        let size: usize = packets.iter().map(Vec::len).sum();
        if size > self.max_object_bytes {
            return Err(RepoError::TooLarge {
                size,
                max: self.max_object_bytes,
            });
        }
        // A view over each packet (no copy of its fields): the name's
        // TLV-VALUE starts with the prefix's exactly when the name is under
        // it (components are whole TLVs).
        let mut items = Vec::with_capacity(packets.len());
        for p in packets {
            let d = DataView::parse(p).map_err(|e| RepoError::Malformed(e.to_string()))?;
            let name = d.name.value();
            if !name.starts_with(prefix.value()) {
                return Err(RepoError::OutOfPrefix {
                    name: Name::from_value(name).map_or_else(|e| e.to_string(), |n| n.to_string()),
                    prefix: prefix.to_string(),
                });
            }
            items.push((name, p.as_slice()));
        }
        self.write_all(&items)?;
        Ok(items.len())
    }

    fn write_all(&mut self, items: &[(&[u8], &[u8])]) -> Result<(), RepoError> {
        let now = now_ms().to_string();
        self.with_conn(|c, s| {
            let mut p = redis::pipe();
            p.atomic();
            // Variadic MSET / HSET / ZADD of WRITE_BATCH packets each: few
            // commands (and replies) per object, one transaction.
            for chunk in items.chunks(WRITE_BATCH) {
                let mut set = redis::cmd("MSET");
                let mut hset = redis::cmd("HSET");
                hset.arg(s.time_key());
                let mut zadd = redis::cmd("ZADD");
                zadd.arg(s.index_key());
                for (name, wire) in chunk {
                    set.arg(s.data_key(name)).arg(*wire);
                    hset.arg(*name).arg(&now);
                    zadd.arg(0).arg(*name);
                }
                p.add_command(set)
                    .ignore()
                    .add_command(hset)
                    .ignore()
                    .add_command(zadd)
                    .ignore();
            }
            p.query::<()>(c)
        })
    }

    /// The Data packet stored under exactly `name`.
    pub fn get(&mut self, name: &Name) -> Result<Option<Vec<u8>>, RepoError> {
        let key = self.data_key(name.value());
        self.with_conn(|c, _| redis::cmd("GET").arg(&key).query(c))
    }

    /// Answer an Interest for `name`: without CanBePrefix the exact name;
    /// with it, the first stored name under `name` in TLV byte order (the
    /// exact name itself when stored, then shorter names before longer
    /// ones in each branch). With MustBeFresh only a packet whose
    /// FreshnessPeriod, counted from its insert time, has not run out.
    pub fn find(
        &mut self,
        name: &Name,
        can_be_prefix: bool,
        must_be_fresh: bool,
    ) -> Result<Option<Vec<u8>>, RepoError> {
        let now = now_ms();
        if !can_be_prefix {
            let Some(w) = self.get(name)? else {
                return Ok(None);
            };
            if must_be_fresh && !self.fresh(name.value(), &w, now)? {
                return Ok(None);
            }
            return Ok(Some(w));
        }
        let mut min = lex_incl(name.value());
        loop {
            let batch: Vec<Vec<u8>> = {
                let (ik, max) = (self.index_key(), lex_prefix_end(name.value()));
                let m = min.clone();
                self.with_conn(|c, _| {
                    redis::cmd("ZRANGEBYLEX")
                        .arg(&ik)
                        .arg(&m)
                        .arg(&max)
                        .arg("LIMIT")
                        .arg(0)
                        .arg(SCAN_BATCH)
                        .query(c)
                })?
            };
            for member in &batch {
                let key = self.data_key(member);
                let w: Option<Vec<u8>> =
                    self.with_conn(|c, _| redis::cmd("GET").arg(&key).query(c))?;
                let Some(w) = w else { continue };
                if !must_be_fresh || self.fresh(member, &w, now)? {
                    return Ok(Some(w));
                }
            }
            match batch.last() {
                Some(last) if batch.len() as isize == SCAN_BATCH => {
                    let mut m = b"(".to_vec();
                    m.extend_from_slice(last);
                    min = m;
                }
                _ => return Ok(None),
            }
        }
    }

    /// Answer many Interests at once (`(name, can_be_prefix,
    /// must_be_fresh)` each, results in the same order) with the rules of
    /// [`Store::find`], in few round trips: the exact names with one `MGET`
    /// per [`MGET_BATCH`] names and the insert times MustBeFresh needs with
    /// one `HMGET`; CanBePrefix Interests one by one.
    pub fn find_many(
        &mut self,
        reqs: &[(&Name, bool, bool)],
    ) -> Result<Vec<Option<Vec<u8>>>, RepoError> {
        let now = now_ms();
        let mut out: Vec<Option<Vec<u8>>> = vec![None; reqs.len()];
        let exact: Vec<usize> = (0..reqs.len()).filter(|&i| !reqs[i].1).collect();
        for chunk in exact.chunks(MGET_BATCH) {
            let keys: Vec<Vec<u8>> = chunk
                .iter()
                .map(|&i| self.data_key(reqs[i].0.value()))
                .collect();
            let got: Vec<Option<Vec<u8>>> =
                self.with_conn(|c, _| redis::cmd("MGET").arg(&keys).query(c))?;
            // MustBeFresh: the packets with a FreshnessPeriod need their
            // insert times; the others are never fresh.
            let mut need: Vec<(usize, u64)> = Vec::new();
            for (&i, w) in chunk.iter().zip(got) {
                let Some(w) = w else { continue };
                if reqs[i].2 {
                    let fp = Data::decode(&w)
                        .ok()
                        .and_then(|d| d.meta_info.freshness_period_ms)
                        .unwrap_or(0);
                    if fp > 0 {
                        need.push((i, fp));
                        out[i] = Some(w);
                    }
                } else {
                    out[i] = Some(w);
                }
            }
            if need.is_empty() {
                continue;
            }
            let tk = self.time_key();
            let names: Vec<&[u8]> = need.iter().map(|&(i, _)| reqs[i].0.value()).collect();
            let times: Vec<Option<u64>> =
                self.with_conn(|c, _| redis::cmd("HMGET").arg(&tk).arg(&names).query(c))?;
            for (&(i, fp), t) in need.iter().zip(times) {
                if t.is_none_or(|t| t.saturating_add(fp) <= now) {
                    out[i] = None;
                }
            }
        }
        for (i, (name, cbp, mbf)) in reqs.iter().enumerate() {
            if *cbp {
                out[i] = self.find(name, true, *mbf)?;
            }
        }
        Ok(out)
    }

    fn fresh(&mut self, name: &[u8], wire: &[u8], now: u64) -> Result<bool, RepoError> {
        let fp = match Data::decode(wire) {
            Ok(d) => d.meta_info.freshness_period_ms.unwrap_or(0),
            Err(_) => return Ok(false),
        };
        if fp == 0 {
            return Ok(false);
        }
        let tk = self.time_key();
        let t: Option<u64> =
            self.with_conn(|c, _| redis::cmd("HGET").arg(&tk).arg(name).query(c))?;
        Ok(t.is_some_and(|t| t.saturating_add(fp) > now))
    }

    /// The stored names under `prefix`, in TLV byte order.
    pub fn list(&mut self, prefix: &Name) -> Result<Vec<Name>, RepoError> {
        let members = self.members(prefix)?;
        members
            .iter()
            .map(|m| Name::from_value(m).map_err(|e| RepoError::Malformed(e.to_string())))
            .collect()
    }

    fn members(&mut self, prefix: &Name) -> Result<Vec<Vec<u8>>, RepoError> {
        let (ik, min, max) = (
            self.index_key(),
            lex_incl(prefix.value()),
            lex_prefix_end(prefix.value()),
        );
        self.with_conn(|c, _| {
            redis::cmd("ZRANGEBYLEX")
                .arg(&ik)
                .arg(&min)
                .arg(&max)
                .query(c)
        })
    }

    /// Delete every packet under `prefix` in one transaction; returns how
    /// many were deleted.
    pub fn delete(&mut self, prefix: &Name) -> Result<usize, RepoError> {
        let members = self.members(prefix)?;
        self.remove(&members)?;
        Ok(members.len())
    }

    /// Delete the segments `prefix/seg=start ..= end` up to the first one
    /// not stored (ndn-python-repo's delete command), in one transaction;
    /// returns how many were deleted.
    pub fn delete_segments(
        &mut self,
        prefix: &Name,
        start: u64,
        end: u64,
    ) -> Result<usize, RepoError> {
        let mut members = Vec::new();
        let mut next = start;
        'scan: while next <= end {
            let last = end.min(next.saturating_add(255));
            let names: Vec<Vec<u8>> = (next..=last)
                .map(|i| segment_name(prefix, i).value().to_vec())
                .collect();
            let keys: Vec<Vec<u8>> = names.iter().map(|n| self.data_key(n)).collect();
            let present: Vec<bool> = self.with_conn(|c, _| {
                let mut p = redis::pipe();
                for k in &keys {
                    p.cmd("EXISTS").arg(k.as_slice());
                }
                p.query(c)
            })?;
            for (name, here) in names.into_iter().zip(present) {
                if !here {
                    break 'scan;
                }
                members.push(name);
            }
            if last == u64::MAX {
                break;
            }
            next = last + 1;
        }
        self.remove(&members)?;
        Ok(members.len())
    }

    /// Remove the packets named `members` (Name TLV-VALUEs) in one transaction.
    fn remove(&mut self, members: &[Vec<u8>]) -> Result<(), RepoError> {
        if members.is_empty() {
            return Ok(());
        }
        self.with_conn(|c, s| {
            let mut p = redis::pipe();
            p.atomic();
            let mut del = redis::cmd("DEL");
            let mut zrem = redis::cmd("ZREM");
            zrem.arg(s.index_key());
            let mut hdel = redis::cmd("HDEL");
            hdel.arg(s.time_key());
            for m in members {
                del.arg(s.data_key(m));
                zrem.arg(m.as_slice());
                hdel.arg(m.as_slice());
            }
            p.add_command(del)
                .ignore()
                .add_command(zrem)
                .ignore()
                .add_command(hdel)
                .ignore();
            p.query::<()>(c)
        })
    }

    /// Whether the object under `prefix` is stored whole: its segments
    /// `prefix/seg=0 ..= final` are all present (final from FinalBlockId).
    /// Returns the number of segments.
    pub fn check_object(&mut self, prefix: &Name) -> Result<Option<u64>, RepoError> {
        match self.get_object(prefix) {
            Ok(Some(segs)) => Ok(Some(segs.len() as u64)),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The segments `prefix/seg=0 ..= final` of a stored object, as Data
    /// wire bytes in segment order; `None` when nothing is stored under it.
    pub fn get_object(&mut self, prefix: &Name) -> Result<Option<Vec<Vec<u8>>>, RepoError> {
        let first = segment_name(prefix, 0);
        let Some(w0) = self.get(&first)? else {
            return Ok(None);
        };
        let d0 = Data::decode(&w0).map_err(|e| RepoError::Malformed(e.to_string()))?;
        let last = d0
            .meta_info
            .final_block_id
            .as_ref()
            .and_then(|c| c.as_ref_segment())
            .ok_or_else(|| RepoError::Incomplete(format!("{first} has no segment FinalBlockId")))?;
        let mut out = vec![w0];
        let mut next = 1u64;
        while next <= last {
            let end = last.min(next + 255);
            let keys: Vec<Vec<u8>> = (next..=end)
                .map(|i| self.data_key(segment_name(prefix, i).value()))
                .collect();
            let got: Vec<Option<Vec<u8>>> =
                self.with_conn(|c, _| redis::cmd("MGET").arg(&keys).query(c))?;
            for (i, g) in (next..=end).zip(got) {
                match g {
                    Some(w) => out.push(w),
                    None => {
                        return Err(RepoError::Incomplete(format!(
                            "{prefix}: segment {i} missing"
                        )))
                    }
                }
            }
            next = end + 1;
        }
        Ok(Some(out))
    }
}

/// Extension to read a segment number from an owned component.
trait SegmentOf {
    fn as_ref_segment(&self) -> Option<u64>;
}

impl SegmentOf for NameComponent {
    fn as_ref_segment(&self) -> Option<u64> {
        if self.typ() != NameComponent::segment(0).typ() {
            return None;
        }
        let v = self.value();
        if v.len() > 8 {
            return None;
        }
        Some(v.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b)))
    }
}

/// `prefix` with a segment component `i` appended.
pub fn segment_name(prefix: &Name, i: u64) -> Name {
    let mut n = prefix.clone();
    n.push(&NameComponent::segment(i));
    n
}

/// Cut `content` into Data packets `prefix/seg=i` of `segment_size` bytes
/// (at least one packet, so an empty file is one empty segment), each with
/// FinalBlockId and FreshnessPeriod `freshness_ms` (0: absent) and signed
/// with DigestSha256.
pub fn segment_object(
    prefix: &Name,
    content: &[u8],
    segment_size: usize,
    freshness_ms: u64,
) -> Vec<Vec<u8>> {
    let size = segment_size.max(1);
    let n = content.len().div_ceil(size).max(1) as u64;
    (0..n)
        .map(|i| {
            let start = (i as usize) * size;
            let end = (start + size).min(content.len());
            let mut d = Data::new(
                segment_name(prefix, i),
                content[start.min(end)..end].to_vec(),
            );
            d.meta_info.final_block_id = Some(NameComponent::segment(n - 1));
            if freshness_ms > 0 {
                d.meta_info.freshness_period_ms = Some(freshness_ms);
            }
            d.sign_digest_sha256();
            d.to_wire()
        })
        .collect()
}

/// The content of an object's segments, concatenated in order.
pub fn reassemble(segments: &[Vec<u8>]) -> Result<Vec<u8>, RepoError> {
    let mut out = Vec::new();
    for s in segments {
        let d = Data::decode(s).map_err(|e| RepoError::Malformed(e.to_string()))?;
        out.extend_from_slice(d.content.as_deref().unwrap_or_default());
    }
    Ok(out)
}

/// `[bytes`: an inclusive ZRANGEBYLEX bound.
fn lex_incl(v: &[u8]) -> Vec<u8> {
    let mut m = b"[".to_vec();
    m.extend_from_slice(v);
    m
}

/// The exclusive ZRANGEBYLEX upper bound of every string starting with `v`:
/// `(` and `v` with its last non-0xFF byte incremented (and what follows it
/// dropped); `+` when there is none (the empty prefix).
fn lex_prefix_end(v: &[u8]) -> Vec<u8> {
    let mut end = v.to_vec();
    while let Some(&b) = end.last() {
        if b == 0xFF {
            end.pop();
        } else {
            let l = end.len();
            end[l - 1] = b + 1;
            let mut m = b"(".to_vec();
            m.extend_from_slice(&end);
            return m;
        }
    }
    b"+".to_vec()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_bounds() {
        assert_eq!(lex_prefix_end(b"ab"), b"(ac".to_vec());
        assert_eq!(lex_prefix_end(&[1, 0xFF]), vec![b'(', 2]);
        assert_eq!(lex_prefix_end(&[0xFF]), b"+".to_vec());
        assert_eq!(lex_prefix_end(b""), b"+".to_vec());
    }

    #[test]
    fn segments_round_trip() {
        let p = Name::from_uri("/a/b").unwrap();
        let content: Vec<u8> = (0..20_001u32).map(|i| i as u8).collect();
        let segs = segment_object(&p, &content, 8000, 0);
        assert_eq!(segs.len(), 3);
        assert_eq!(reassemble(&segs).unwrap(), content);
        assert_eq!(segment_object(&p, b"", 8000, 0).len(), 1);
        assert!(reassemble(&[vec![1, 2, 3]]).is_err());
    }

    #[test]
    fn urls() {
        assert_eq!(redis_url("/tmp/r.sock"), "unix:///tmp/r.sock");
        assert_eq!(
            redis_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }
}
