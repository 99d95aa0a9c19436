//! Redis as the FIB state bus: a controller publishes each FIB's snapshot
//! and ordered delta log to Redis ([`RedisController`]), forwarders load the
//! snapshot and follow the log with blocking reads ([`RedisFollower`]).
//!
//! Redis is not trusted: every stored record (a snapshot manifest, a
//! stream entry) carries an HMAC-SHA256 tag keyed by a key derived
//! (HKDF-SHA256) from the shared secret ([`AuthKey`]) and the FIB's name,
//! so a record of another FIB or a forged, truncated or altered one is
//! refused; each entry names the version it applies to and the version it
//! produces, so a replayed entry is refused and a missing one is a gap
//! (resync from the snapshot). Snapshot bodies are checked against the
//! SHA-256 digests in their authenticated manifest.
//!
//! Key layout (`P` = `nexthop:fib:NAME`), documented in `docs/control.md`:
//!
//! * `P:lease`: the active controller's id (`SET NX PX`, renewed);
//! * `P:head`: `EPOCH VERSION STREAM-ID` of the last record published
//!   (the fencing check of every publish);
//! * `P:log:COLUMN`: the delta stream of a value column, one field `e` per
//!   entry (a Concise FIB has column 0 only; a network FIB,
//!   [`NetworkFib`](nexthop_othello::fib_net::NetworkFib), a column per
//!   switch, and an entry only where a change touched the column);
//! * `P:ctl`: a network FIB's change log (every batch's route changes, what
//!   a controller rebuilds from; a Concise FIB's are in `P:log:0`);
//! * `P:snap`: the snapshot manifest;
//! * `P:snap:EPOCH:VERSION:d:I` / `...:dC:I` / `...:c:I`: chunks of column
//!   0's data-plane body, of column C's (C >= 1) (what forwarders load) and
//!   of the control body (what a controller rebuilds from).

mod busfib;
mod follow;
mod publish;

pub use busfib::BusFib;
pub use follow::{RedisFollower, RedisFollowerConfig, RedisFollowerStats};
pub use publish::{AcquireError, BusReport, RedisController, RedisControllerConfig};

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::frame::AuthKey;

type HmacSha256 = Hmac<Sha256>;

const TAG_LEN: usize = 32;
const ENTRY_MAGIC: &[u8; 4] = b"NHBE";
const MANIFEST_MAGIC: &[u8; 4] = b"NHBM";
/// Longest FIB name.
pub const MAX_NAME: usize = 128;
/// Most value columns of a FIB on the bus (the Othello limit).
pub const MAX_COLUMNS: usize = 4096;
/// The `column` of a change-log entry (`P:ctl`) of a network FIB.
pub(crate) const CTL_COLUMN: u32 = u32::MAX;

/// Why a Redis bus operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BusError {
    /// Redis could not be reached or answered with an error.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The FIB name is empty, too long or has characters other than
    /// letters, digits, `.`, `_` and `-`.
    #[error("FIB name {0:?}: expected 1 to 128 letters, digits, '.', '_' or '-'")]
    Name(String),
    /// Another controller holds the lease, or this one lost it: nothing
    /// was published.
    #[error("not the active controller (the lease is held by {holder:?})")]
    LeaseLost {
        /// Who holds it now (empty: nobody).
        holder: String,
    },
    /// The head in Redis is not the one this controller published last (a
    /// stale controller, fenced off): nothing was published.
    #[error("fenced: Redis head is {found:?}, this controller expected {expected:?}")]
    Fenced {
        /// The head this controller expected.
        expected: String,
        /// The head found.
        found: String,
    },
    /// What Redis holds for this FIB does not verify or does not apply.
    #[error("stored state: {0}")]
    State(String),
    /// The FIB refused the changes.
    #[error(transparent)]
    Fib(#[from] nexthop_othello::fib::FibError),
    /// A snapshot's buffer could not be allocated: nothing was published.
    #[error(transparent)]
    OutOfMemory(#[from] nexthop_othello::AllocError),
    /// A change could not be applied and the controller's state may no
    /// longer match Redis: drop it and acquire again.
    #[error("the controller must be acquired again (an earlier publish failed)")]
    Poisoned,
    /// Stopped while waiting for the lease.
    #[error("stopped")]
    Stopped,
}

/// Redis key names of one FIB.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(name: &str) -> Result<Keys, BusError> {
        let ok = !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return Err(BusError::Name(name.into()));
        }
        Ok(Keys {
            prefix: format!("nexthop:fib:{name}"),
        })
    }
    pub(crate) fn lease(&self) -> String {
        format!("{}:lease", self.prefix)
    }
    pub(crate) fn head(&self) -> String {
        format!("{}:head", self.prefix)
    }
    pub(crate) fn manifest(&self) -> String {
        format!("{}:snap", self.prefix)
    }
    pub(crate) fn stream(&self, column: u32) -> String {
        format!("{}:log:{column}", self.prefix)
    }
    /// The stream a controller rebuilds from: `P:log:0` for one column,
    /// `P:ctl` for several.
    pub(crate) fn ctl(&self, columns: usize) -> String {
        if columns == 1 {
            self.stream(0)
        } else {
            format!("{}:ctl", self.prefix)
        }
    }
    pub(crate) fn chunk(&self, epoch: u64, version: u64, part: Which, i: u32) -> String {
        let p = match part {
            Which::Control => "c".to_owned(),
            Which::Data(0) => "d".to_owned(),
            Which::Data(c) => format!("d{c}"),
        };
        format!("{}:snap:{epoch:016x}:{version}:{p}:{i}", self.prefix)
    }
}

/// A snapshot body: a column's data plane, or the control state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    Data(u32),
    Control,
}

/// The MAC key of one FIB's records.
#[derive(Clone)]
pub(crate) struct RecordKey([u8; 32]);

impl RecordKey {
    pub(crate) fn new(key: &AuthKey, name: &str) -> RecordKey {
        let hk = Hkdf::<Sha256>::new(Some(b"nexthop redis bus v1"), key.secret());
        let mut k = [0u8; 32];
        // 32 bytes is always a valid HKDF-SHA256 output length.
        hk.expand(name.as_bytes(), &mut k)
            .expect("32-byte HKDF output");
        RecordKey(k)
    }

    fn mac(&self) -> HmacSha256 {
        <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    /// `body` followed by its tag.
    fn seal(&self, mut body: Vec<u8>) -> Vec<u8> {
        let mut m = self.mac();
        m.update(&body);
        body.extend_from_slice(&m.finalize().into_bytes());
        body
    }

    /// The body of a sealed record whose tag verifies.
    fn open<'a>(&self, rec: &'a [u8]) -> Result<&'a [u8], RecordError> {
        if rec.len() < TAG_LEN {
            return Err(RecordError::Malformed("shorter than its tag".into()));
        }
        let (body, tag) = rec.split_at(rec.len() - TAG_LEN);
        let mut m = self.mac();
        m.update(body);
        m.verify_slice(tag).map_err(|_| RecordError::BadMac)?;
        Ok(body)
    }
}

/// Why a stored record was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub(crate) enum RecordError {
    #[error("tag does not verify (forged, altered, truncated or of another FIB or key)")]
    BadMac,
    #[error("malformed: {0}")]
    Malformed(String),
}

/// Reads little-endian fields off a byte slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.0.len() < n {
            return Err(RecordError::Malformed("truncated".into()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u64(&mut self) -> Result<u64, RecordError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    fn u32(&mut self) -> Result<u32, RecordError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }
    fn bytes(&mut self) -> Result<&'a [u8], RecordError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// One delta-stream entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The snapshot lineage it belongs to.
    pub(crate) epoch: u64,
    /// FIB version it applies to.
    pub(crate) from: u64,
    /// FIB version it produces (`from` + changes).
    pub(crate) to: u64,
    pub(crate) column: u32,
    /// A Delta message payload ([`crate::message::delta_payload`]).
    pub(crate) payload: Vec<u8>,
    /// The route changes, one per line (`+ NAME ACTION`, `- NAME`,
    /// `= NAME ACTION`), for a controller rebuilding its state.
    pub(crate) changes: String,
}

impl Entry {
    pub(crate) fn seal(&self, k: &RecordKey) -> Vec<u8> {
        let mut b = Vec::with_capacity(48 + self.payload.len() + self.changes.len());
        b.extend_from_slice(ENTRY_MAGIC);
        for v in [self.epoch, self.from, self.to] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.column.to_le_bytes());
        put_bytes(&mut b, &self.payload);
        put_bytes(&mut b, self.changes.as_bytes());
        k.seal(b)
    }

    pub(crate) fn open(rec: &[u8], k: &RecordKey) -> Result<Entry, RecordError> {
        let body = k.open(rec)?;
        let mut c = Cursor(body);
        if c.take(4)? != ENTRY_MAGIC {
            return Err(RecordError::Malformed("not a delta entry".into()));
        }
        let (epoch, from, to) = (c.u64()?, c.u64()?, c.u64()?);
        let column = c.u32()?;
        let payload = c.bytes()?.to_vec();
        let changes = std::str::from_utf8(c.bytes()?)
            .map_err(|_| RecordError::Malformed("changes are not UTF-8".into()))?
            .to_owned();
        if !c.0.is_empty() || to <= from {
            return Err(RecordError::Malformed(format!(
                "versions {from} -> {to} or trailing bytes"
            )));
        }
        Ok(Entry {
            epoch,
            from,
            to,
            column,
            payload,
            changes,
        })
    }
}

/// A snapshot's manifest: where its chunks are and what they hash to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) epoch: u64,
    pub(crate) version: u64,
    /// The id of the last change-log entry ([`Keys::ctl`]) the snapshot
    /// contains (`0-0`: none): a controller rebuilds from the entries
    /// after it.
    pub(crate) stream_id: String,
    /// Chunk count, length and SHA-256 of the control body.
    pub(crate) control: Part,
    /// Per value column: where its follower starts.
    pub(crate) columns: Vec<ColumnSnap>,
}

/// One column of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ColumnSnap {
    /// The id of the last entry of the column's stream the snapshot
    /// contains: its followers read after it.
    pub(crate) stream_id: String,
    /// The column's version: the `to` of its last entry (the next entry
    /// of the column applies to it).
    pub(crate) version: u64,
    /// Chunk count, length and SHA-256 of the column's data-plane body.
    pub(crate) data: Part,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Part {
    pub(crate) chunks: u32,
    pub(crate) len: u64,
    pub(crate) sha: [u8; 32],
}

impl Part {
    pub(crate) fn of(body: &[u8], chunk: usize) -> Part {
        Part {
            chunks: body.len().div_ceil(chunk.max(1)).max(1) as u32,
            len: body.len() as u64,
            sha: Sha256::digest(body).into(),
        }
    }

    fn put(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.chunks.to_le_bytes());
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(&self.sha);
    }

    fn get(c: &mut Cursor<'_>) -> Result<Part, RecordError> {
        let chunks = c.u32()?;
        let len = c.u64()?;
        let mut sha = [0u8; 32];
        sha.copy_from_slice(c.take(32)?);
        Ok(Part { chunks, len, sha })
    }

    /// Whether `body` is the body this part describes.
    pub(crate) fn matches(&self, body: &[u8]) -> bool {
        body.len() as u64 == self.len && Sha256::digest(body).as_slice() == self.sha
    }
}

impl Manifest {
    pub(crate) fn seal(&self, k: &RecordKey) -> Vec<u8> {
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(MANIFEST_MAGIC);
        b.extend_from_slice(&self.epoch.to_le_bytes());
        b.extend_from_slice(&self.version.to_le_bytes());
        put_bytes(&mut b, self.stream_id.as_bytes());
        self.control.put(&mut b);
        b.extend_from_slice(&(self.columns.len() as u32).to_le_bytes());
        for c in &self.columns {
            put_bytes(&mut b, c.stream_id.as_bytes());
            b.extend_from_slice(&c.version.to_le_bytes());
            c.data.put(&mut b);
        }
        k.seal(b)
    }

    /// Column `c`, or why the FIB has none.
    pub(crate) fn column(&self, c: u32) -> Result<&ColumnSnap, RecordError> {
        self.columns.get(c as usize).ok_or_else(|| {
            RecordError::Malformed(format!(
                "column {c}: the FIB has {} columns",
                self.columns.len()
            ))
        })
    }

    pub(crate) fn open(rec: &[u8], k: &RecordKey) -> Result<Manifest, RecordError> {
        let body = k.open(rec)?;
        let mut c = Cursor(body);
        if c.take(4)? != MANIFEST_MAGIC {
            return Err(RecordError::Malformed("not a snapshot manifest".into()));
        }
        let epoch = c.u64()?;
        let version = c.u64()?;
        let stream_id = read_stream_id(&mut c)?;
        let control = Part::get(&mut c)?;
        let n = c.u32()? as usize;
        if n == 0 || n > MAX_COLUMNS {
            return Err(RecordError::Malformed(format!("{n} columns")));
        }
        // Grows as columns are read (each is at least 56 bytes): `n` is
        // not trusted for an allocation.
        let mut columns = Vec::new();
        for _ in 0..n {
            let stream_id = read_stream_id(&mut c)?;
            let version = c.u64()?;
            let data = Part::get(&mut c)?;
            columns.push(ColumnSnap {
                stream_id,
                version,
                data,
            });
        }
        if !c.0.is_empty() {
            return Err(RecordError::Malformed("trailing bytes".into()));
        }
        Ok(Manifest {
            epoch,
            version,
            stream_id,
            control,
            columns,
        })
    }
}

fn read_stream_id(c: &mut Cursor<'_>) -> Result<String, RecordError> {
    Ok(std::str::from_utf8(c.bytes()?)
        .ok()
        .filter(|s| parse_id(s).is_some())
        .ok_or_else(|| RecordError::Malformed("stream id".into()))?
        .to_owned())
}

/// A stream id `MS-SEQ` as a pair (ordering).
pub(crate) fn parse_id(s: &str) -> Option<(u64, u64)> {
    let (a, b) = s.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A random epoch (never 0).
pub(crate) fn fresh_epoch() -> u64 {
    use rand::RngCore;
    rand::rngs::OsRng.next_u64() | 1
}

/// A redis value as bytes (bulk or simple string).
pub(crate) fn value_bytes(v: &redis::Value) -> Option<&[u8]> {
    match v {
        redis::Value::BulkString(b) => Some(b),
        redis::Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// Stream entries of an XRANGE reply, or of one stream of an XREAD reply:
/// `(id, value of field "e")`; an entry without that field gives an empty
/// value (refused as malformed by [`Entry::open`]). Shapes other than
/// the documented one give `None`.
pub(crate) fn stream_entries(v: &redis::Value) -> Option<Vec<(String, Vec<u8>)>> {
    let redis::Value::Array(items) = v else {
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let redis::Value::Array(pair) = it else {
            return None;
        };
        let [id, fields] = pair.as_slice() else {
            return None;
        };
        let id = std::str::from_utf8(value_bytes(id)?).ok()?.to_owned();
        parse_id(&id)?;
        let e = match fields {
            redis::Value::Array(f) => f
                .chunks(2)
                .find(|kv| kv.len() == 2 && value_bytes(&kv[0]) == Some(b"e"))
                .and_then(|kv| value_bytes(&kv[1]))
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
            redis::Value::Map(m) => m
                .iter()
                .find(|(k, _)| value_bytes(k) == Some(b"e"))
                .and_then(|(_, v)| value_bytes(v))
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        out.push((id, e));
    }
    Some(out)
}

/// Read a whole snapshot part (its chunks, checked against the manifest).
pub(crate) fn read_part(
    con: &mut redis::Connection,
    keys: &Keys,
    m: &Manifest,
    which: Which,
    max: u64,
) -> Result<Vec<u8>, BusError> {
    let part = match which {
        Which::Control => &m.control,
        Which::Data(c) => {
            &m.column(c)
                .map_err(|e| BusError::State(e.to_string()))?
                .data
        }
    };
    if part.len > max {
        return Err(BusError::State(format!(
            "snapshot body of {} bytes is over the limit of {max}",
            part.len
        )));
    }
    let mut body = Vec::new();
    for i in 0..part.chunks {
        let c: Option<Vec<u8>> = redis::cmd("GET")
            .arg(keys.chunk(m.epoch, m.version, which, i))
            .query(con)?;
        let c = c.ok_or_else(|| {
            BusError::State(format!(
                "snapshot chunk {i} of version {} is missing (superseded?)",
                m.version
            ))
        })?;
        if body.len() as u64 + c.len() as u64 > part.len {
            return Err(BusError::State(
                "snapshot chunks longer than announced".into(),
            ));
        }
        body.extend_from_slice(&c);
    }
    if !part.matches(&body) {
        return Err(BusError::State(format!(
            "snapshot body of version {} does not match its manifest",
            m.version
        )));
    }
    Ok(body)
}

/// Open a connection with read and write timeouts.
pub(crate) fn connect(
    url: &str,
    timeout: std::time::Duration,
) -> Result<redis::Connection, BusError> {
    let client = redis::Client::open(url)?;
    let con = client.get_connection_with_timeout(timeout)?;
    con.set_write_timeout(Some(timeout))?;
    con.set_read_timeout(Some(timeout))?;
    Ok(con)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> RecordKey {
        RecordKey::new(&AuthKey::new(b"0123456789abcdef-secret").unwrap(), "f")
    }

    #[test]
    fn entry_round_trip_and_refusals() {
        let k = key();
        let e = Entry {
            epoch: 7,
            from: 3,
            to: 5,
            column: 0,
            payload: vec![1, 2, 3],
            changes: "+ a 1\n- b\n".into(),
        };
        let rec = e.seal(&k);
        assert_eq!(Entry::open(&rec, &k).unwrap(), e);
        for cut in 0..rec.len() {
            assert!(Entry::open(&rec[..cut], &k).is_err());
        }
        let mut bad = rec.clone();
        bad[10] ^= 1;
        assert_eq!(Entry::open(&bad, &k), Err(RecordError::BadMac));
        let other = RecordKey::new(&AuthKey::new(b"0123456789abcdef-secret").unwrap(), "g");
        assert_eq!(Entry::open(&rec, &other), Err(RecordError::BadMac));
    }

    #[test]
    fn manifest_round_trip() {
        let k = key();
        let col = |id: &str, v, body: &[u8]| ColumnSnap {
            stream_id: id.into(),
            version: v,
            data: Part::of(body, 2),
        };
        let m = Manifest {
            epoch: 1,
            version: 9,
            stream_id: "12-0".into(),
            control: Part::of(b"", 2),
            columns: vec![col("12-0", 9, b"abc"), col("3-1", 4, b"x")],
        };
        assert_eq!(m.columns[0].data.chunks, 2);
        let rec = m.seal(&k);
        assert_eq!(Manifest::open(&rec, &k).unwrap(), m);
        assert!(m.column(1).is_ok() && m.column(2).is_err());
        assert!(Manifest::open(b"short", &k).is_err());
        for cut in 0..rec.len() {
            assert!(Manifest::open(&rec[..cut], &k).is_err());
        }
        let none = Manifest {
            columns: Vec::new(),
            ..m
        };
        assert!(Manifest::open(&none.seal(&k), &k).is_err());
    }

    #[test]
    fn names() {
        let k = Keys::new("core-1.v4_x").unwrap();
        assert_eq!(k.ctl(1), "nexthop:fib:core-1.v4_x:log:0");
        assert_eq!(k.ctl(4), "nexthop:fib:core-1.v4_x:ctl");
        assert_eq!(
            k.chunk(1, 2, Which::Data(0), 3),
            "nexthop:fib:core-1.v4_x:snap:0000000000000001:2:d:3"
        );
        assert!(k.chunk(1, 2, Which::Data(5), 3).ends_with(":2:d5:3"));
        assert!(k.chunk(1, 2, Which::Control, 0).ends_with(":2:c:0"));
        for bad in ["", "a:b", "a b", &"x".repeat(129)] {
            assert!(Keys::new(bad).is_err());
        }
    }
}
