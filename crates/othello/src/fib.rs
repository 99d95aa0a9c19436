//! The Concise flat-name FIB: an [`Othello`] whose `l`-bit values are ids
//! into a small table of forwarding [`Action`]s.
//!
//! Concise (Yu et al., "Concise: a Forwarding Information Base with
//! Compact Representation", section IV) stores no names in the data plane:
//! a lookup hashes the name once, reads two slots and gets an action id; the
//! action table (a few dozen entries) turns the id into a port, a port set,
//! `drop` or `controller`. The control plane ([`ConciseFib`]) keeps the
//! names, the action table and the Othello graph; the data plane is any
//! [`Query`] / [`QueryView`](crate::QueryView) built from
//! [`Othello::snapshot`] plus the action table.
//!
//! This module is pure logic: text parsers for routes and change files,
//! name parsing for every supported key type, and the combined structure.
//! Reading and writing files is left to callers (the `nexthop` CLI).
//!
//! # Text formats
//!
//! ```text
//! # routes file: NAME ACTION per line; blank lines and # comments ignored
//! aa:bb:cc:dd:ee:01 3
//! aa:bb:cc:dd:ee:02 1+3        # a port set
//! aa:bb:cc:dd:ee:03 drop
//! aa:bb:cc:dd:ee:04 controller
//!
//! # changes file
//! + aa:bb:cc:dd:ee:05 2         # add
//! - aa:bb:cc:dd:ee:01           # delete
//! = aa:bb:cc:dd:ee:02 4         # change the action
//! ```
//!
//! A `#` starts a comment where it begins a whitespace-separated token, so
//! `str` names may contain `#` after their first byte.
//!
//! # Invariants
//!
//! * Action ids are dense (`0..table.len()`), never reused or removed, and
//!   every id fits in `l` value bits: the table holds at most `2^l` actions.
//! * Every value stored in the Othello is an id present in the table
//!   ([`ConciseFib::load_control`] checks this for loaded files).
//! * [`ConciseFib::apply_changes`] validates a whole batch against the
//!   current state before applying any of it.

use hashbrown::{HashMap, HashSet};
use std::fmt::{self, Debug, Display};
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use nexthop_wire::{MacAddr, ParseMacError};
use thiserror::Error;

use crate::config::Config;
use crate::control::{BatchOp, Change, Othello};
use crate::error::{FormatError, UpdateError};
use crate::persist::StoredKey;
use crate::query::Query;

// ---------------------------------------------------------------------------
// Actions

/// What the forwarder does with a packet whose name matched.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Forward out of one port.
    Port(u16),
    /// Forward out of several ports (sorted, deduplicated, at least two).
    PortSet(Vec<u16>),
    /// Discard the packet.
    Drop,
    /// Punt the packet to the controller.
    Controller,
}

impl Action {
    /// A port set from any list of ports: sorted and deduplicated; a single
    /// distinct port gives [`Action::Port`]. `None` for an empty list.
    pub fn port_set(ports: impl IntoIterator<Item = u16>) -> Option<Action> {
        let mut v: Vec<u16> = ports.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        match v.len() {
            0 => None,
            1 => Some(Action::Port(v[0])),
            _ => Some(Action::PortSet(v)),
        }
    }
}

/// Why an action token could not be parsed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActionParseError {
    /// The token is empty.
    #[error("empty action")]
    Empty,
    /// A port is not a number in 0..=65535.
    #[error(
        "invalid action '{input}': '{port}' is not a port number (0..=65535); \
         expected a port, a port set like 1+3, 'drop' or 'controller'"
    )]
    BadPort {
        /// The whole action token.
        input: String,
        /// The offending part.
        port: String,
    },
    /// A port set with an empty member (`1++3`, `+1`, `1+`).
    #[error("invalid action '{input}': empty member in port set")]
    EmptyMember {
        /// The whole action token.
        input: String,
    },
}

impl FromStr for Action {
    type Err = ActionParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(ActionParseError::Empty);
        }
        if s.eq_ignore_ascii_case("drop") {
            return Ok(Action::Drop);
        }
        if s.eq_ignore_ascii_case("controller") {
            return Ok(Action::Controller);
        }
        let mut ports = Vec::new();
        for part in s.split('+') {
            if part.is_empty() {
                return Err(ActionParseError::EmptyMember {
                    input: s.to_string(),
                });
            }
            // u16::from_str accepts a leading '+', which split already consumed.
            let p = part
                .parse::<u16>()
                .ok()
                .filter(|_| part.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| ActionParseError::BadPort {
                    input: s.to_string(),
                    port: part.to_string(),
                })?;
            ports.push(p);
        }
        Action::port_set(ports).ok_or(ActionParseError::Empty)
    }
}

impl Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Port(p) => write!(f, "{p}"),
            Action::PortSet(ps) => {
                for (i, p) in ps.iter().enumerate() {
                    if i > 0 {
                        f.write_str("+")?;
                    }
                    write!(f, "{p}")?;
                }
                Ok(())
            }
            Action::Drop => f.write_str("drop"),
            Action::Controller => f.write_str("controller"),
        }
    }
}

// ---------------------------------------------------------------------------
// Errors

/// A problem on one line of a text file. Displays as `line N: reason`;
/// callers prefix the file name.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl LineError {
    pub(crate) fn new(line: usize, reason: impl Into<String>) -> Self {
        LineError {
            line,
            reason: reason.into(),
        }
    }
}

/// Why a FIB operation was refused. Nothing was changed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FibError {
    /// `error` happened for the route or change on input line `line`.
    #[error("line {line}: {error}")]
    AtLine {
        /// 1-based line number in the routes or changes file.
        line: usize,
        /// What went wrong there.
        error: Box<FibError>,
    },
    /// A routes file names the same key twice.
    #[error("duplicate name {name} (first defined on line {first_line})")]
    DuplicateName {
        /// The name, as written in files.
        name: String,
        /// The line of its first definition.
        first_line: usize,
    },
    /// An add for a name that is present.
    #[error("cannot add {0}: name already present (use '=' to change its action)")]
    NameExists(String),
    /// A delete or change for a name that is absent.
    #[error("name {0} not found")]
    NameNotFound(String),
    /// More distinct actions than `l` value bits can number.
    #[error(
        "action table full: 2^{l} actions for l = {l}, rebuild with more --value-bits",
        l = log2_ceil(*max_ids)
    )]
    ActionTableFull {
        /// The number of ids `l` bits allow.
        max_ids: u64,
    },
    /// A loaded control state maps a name to an id the table lacks.
    #[error("control state maps a name to action id {id}, but the action table has {len} actions")]
    UnknownActionId {
        /// The id found.
        id: u64,
        /// Actions in the table.
        len: usize,
    },
    /// The action table text is malformed.
    #[error("action table: {0}")]
    Actions(#[from] LineError),
    /// The Othello refused the operation.
    #[error(transparent)]
    Update(#[from] UpdateError),
    /// A control-state file could not be decoded.
    #[error(transparent)]
    Format(#[from] FormatError),
}

impl FibError {
    pub(crate) fn at(line: usize, error: FibError) -> FibError {
        FibError::AtLine {
            line,
            error: Box::new(error),
        }
    }
}

fn log2_ceil(x: u64) -> u32 {
    if x <= 1 {
        0
    } else {
        64 - (x - 1).leading_zeros()
    }
}

// ---------------------------------------------------------------------------
// Action table

/// Interns actions to dense ids `0, 1, 2, ...` in order of first use.
///
/// Ids of single ports, `drop` and `controller` (every route change's
/// action, in practice) are found without hashing: a port-indexed array and
/// two fields. Port sets go through a hash map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActionTable {
    actions: Vec<Action>,
    /// Id of `Port(p)` at index `p` ([`NO_ID`] where not interned); as long
    /// as the largest interned port plus one.
    ports: Vec<u64>,
    drop: Option<u64>,
    controller: Option<u64>,
    sets: HashMap<Action, u64>,
}

/// [`ActionTable`]'s mark of a port without an id.
const NO_ID: u64 = u64::MAX;

impl ActionTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of ids `value_bits` bits can number (`2^l`, saturating).
    pub fn max_ids_for(value_bits: u8) -> u64 {
        1u64.checked_shl(value_bits as u32).unwrap_or(u64::MAX)
    }

    /// Number of actions.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// The id of `action`, if interned.
    pub fn id_of(&self, action: &Action) -> Option<u64> {
        match action {
            Action::Port(p) => self
                .ports
                .get(*p as usize)
                .copied()
                .filter(|&id| id != NO_ID),
            Action::Drop => self.drop,
            Action::Controller => self.controller,
            Action::PortSet(_) => self.sets.get(action).copied(),
        }
    }

    /// The action with id `id`.
    pub fn get(&self, id: u64) -> Option<&Action> {
        usize::try_from(id).ok().and_then(|i| self.actions.get(i))
    }

    /// The id of `action`, adding it if new. Fails when the table already
    /// holds `max_ids` actions.
    pub fn intern(&mut self, action: &Action, max_ids: u64) -> Result<u64, FibError> {
        if let Some(id) = self.id_of(action) {
            return Ok(id);
        }
        let id = self.actions.len() as u64;
        if id >= max_ids {
            return Err(FibError::ActionTableFull { max_ids });
        }
        self.actions.push(action.clone());
        match action {
            Action::Port(p) => {
                let p = *p as usize;
                if self.ports.len() <= p {
                    self.ports.resize(p + 1, NO_ID);
                }
                self.ports[p] = id;
            }
            Action::Drop => self.drop = Some(id),
            Action::Controller => self.controller = Some(id),
            Action::PortSet(_) => {
                self.sets.insert(action.clone(), id);
            }
        }
        Ok(id)
    }

    /// `(id, action)` in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Action)> + '_ {
        self.actions.iter().enumerate().map(|(i, a)| (i as u64, a))
    }

    /// One `ID ACTION` line per action, in id order.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (id, a) in self.iter() {
            s.push_str(&format!("{id} {a}\n"));
        }
        s
    }

    /// Parse [`Self::to_text`] output. Ids must run `0, 1, 2, ...`; blank
    /// lines and `#` comments are ignored.
    pub fn from_text(text: &str) -> Result<Self, LineError> {
        let mut t = ActionTable::new();
        for (line, fields) in fields_of(text) {
            let [id, action] = fields[..] else {
                return Err(LineError::new(
                    line,
                    format!("expected 2 fields (ID ACTION), got {}", fields.len()),
                ));
            };
            let id: u64 = id
                .parse()
                .map_err(|_| LineError::new(line, format!("invalid action id '{id}'")))?;
            if id != t.len() as u64 {
                return Err(LineError::new(
                    line,
                    format!("action id {id} out of sequence (expected {})", t.len()),
                ));
            }
            let action: Action = action
                .parse()
                .map_err(|e| LineError::new(line, format!("{e}")))?;
            if let Some(prev) = t.id_of(&action) {
                return Err(LineError::new(
                    line,
                    format!("action {action} already has id {prev}"),
                ));
            }
            t.intern(&action, u64::MAX)
                .map_err(|e| LineError::new(line, e.to_string()))?;
        }
        Ok(t)
    }
}

// ---------------------------------------------------------------------------
// Names

/// A key type usable as a FIB name: stored by the Othello, parsed from and
/// written to text files.
pub trait NameKey: StoredKey + Eq + Hash + Clone + Debug {
    /// Parse one name token (no surrounding whitespace).
    fn parse_name(s: &str) -> Result<Self, String>;
    /// The canonical text form of the name.
    fn fmt_name(&self) -> String;
}

impl NameKey for [u8; 6] {
    fn parse_name(s: &str) -> Result<Self, String> {
        s.parse::<MacAddr>()
            .map(<[u8; 6]>::from)
            .map_err(|_| ParseMacError::EXPECTED.to_string())
    }
    fn fmt_name(&self) -> String {
        MacAddr(*self).to_string()
    }
}

impl NameKey for Ipv4Addr {
    fn parse_name(s: &str) -> Result<Self, String> {
        s.parse()
            .map_err(|_| "expected an IPv4 address like 192.0.2.1".to_string())
    }
    fn fmt_name(&self) -> String {
        self.to_string()
    }
}

impl NameKey for Ipv6Addr {
    fn parse_name(s: &str) -> Result<Self, String> {
        s.parse()
            .map_err(|_| "expected an IPv6 address like 2001:db8::1".to_string())
    }
    fn fmt_name(&self) -> String {
        self.to_string()
    }
}

impl NameKey for u64 {
    fn parse_name(s: &str) -> Result<Self, String> {
        let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
            Some(hex) if hex.bytes().all(|b| b.is_ascii_hexdigit()) => u64::from_str_radix(hex, 16),
            Some(_) => return Err("invalid hexadecimal digits".to_string()),
            None if s.bytes().all(|b| b.is_ascii_digit()) => s.parse(),
            None => return Err("expected a decimal or 0x-hexadecimal integer".to_string()),
        };
        r.map_err(|e| format!("expected an integer in 0..=2^64-1 ({e})"))
    }
    fn fmt_name(&self) -> String {
        self.to_string()
    }
}

impl NameKey for Vec<u8> {
    fn parse_name(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("empty name".to_string());
        }
        if s.chars().any(char::is_whitespace) {
            return Err("names cannot contain whitespace".to_string());
        }
        if s.starts_with('#') {
            return Err("names cannot start with '#' (it starts a comment)".to_string());
        }
        Ok(s.as_bytes().to_vec())
    }
    fn fmt_name(&self) -> String {
        String::from_utf8_lossy(self).into_owned()
    }
}

/// The key types a FIB can be built over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    /// 48-bit MAC addresses (`[u8; 6]`).
    Mac,
    /// IPv4 addresses.
    Ipv4,
    /// IPv6 addresses.
    Ipv6,
    /// 64-bit integers.
    U64,
    /// Arbitrary byte strings without whitespace (`Vec<u8>`).
    Str,
}

impl KeyType {
    /// Every key type, in documentation order.
    pub const ALL: [KeyType; 5] = [
        KeyType::Mac,
        KeyType::Ipv4,
        KeyType::Ipv6,
        KeyType::U64,
        KeyType::Str,
    ];

    /// The name used on command lines and in manifests.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Mac => "mac",
            KeyType::Ipv4 => "ipv4",
            KeyType::Ipv6 => "ipv6",
            KeyType::U64 => "u64",
            KeyType::Str => "str",
        }
    }
}

/// An unknown key type name.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("unknown key type '{0}' (expected mac, ipv4, ipv6, u64 or str)")]
pub struct KeyTypeParseError(pub String);

impl FromStr for KeyType {
    type Err = KeyTypeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyType::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| KeyTypeParseError(s.to_string()))
    }
}

impl Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

// ---------------------------------------------------------------------------
// Line parsers (fib/text.rs)

mod text;

pub(crate) use text::{action_at, fields_of, name_at, parse_change_lines, ChangeLine};
pub use text::{numbered, parse_changes, parse_routes, LinedChange, RouteChange};

// ---------------------------------------------------------------------------
// The FIB

/// A Concise FIB: names mapped to action ids by an [`Othello`], plus the
/// action table. This is the control-plane object; the data plane is a
/// snapshot of [`Self::othello`] (column 0) and [`Self::action_table`].
pub struct ConciseFib<K> {
    othello: Othello<K>,
    actions: ActionTable,
}

impl<K> Debug for ConciseFib<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConciseFib")
            .field("othello", &self.othello)
            .field("actions", &self.actions.len())
            .finish()
    }
}

impl<K: NameKey> ConciseFib<K> {
    /// Build from parsed routes (`(line, name, action)`). A duplicate name
    /// is an error naming it and both lines.
    pub fn build(cfg: Config, routes: &[(usize, K, Action)]) -> Result<Self, FibError> {
        Self::build_with_capacity(cfg, 0, routes)
    }

    /// Like [`Self::build`], with arrays sized for at least `capacity`
    /// names, so that adds up to that many cause no grow rebuild.
    pub fn build_with_capacity(
        cfg: Config,
        capacity: usize,
        routes: &[(usize, K, Action)],
    ) -> Result<Self, FibError> {
        cfg.validate().map_err(UpdateError::from)?;
        let max = ActionTable::max_ids_for(cfg.value_bits);
        let mut actions = ActionTable::new();
        let mut ids = Vec::with_capacity(routes.len());
        for (line, _, a) in routes {
            ids.push(actions.intern(a, max).map_err(|e| FibError::at(*line, e))?);
        }
        let pairs = routes
            .iter()
            .zip(&ids)
            .map(|((_, k, _), &id)| (k.clone(), id));
        let othello = match Othello::build_with_capacity(cfg, capacity, pairs) {
            Ok(o) => o,
            Err(UpdateError::DuplicateKey(d)) => {
                return Err(first_duplicate(routes).unwrap_or(UpdateError::DuplicateKey(d).into()))
            }
            Err(e) => return Err(e.into()),
        };
        Ok(ConciseFib { othello, actions })
    }

    /// The Othello (values are action ids).
    pub fn othello(&self) -> &Othello<K> {
        &self.othello
    }

    /// The action table.
    pub fn action_table(&self) -> &ActionTable {
        &self.actions
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.othello.len()
    }

    /// Whether the FIB has no names.
    pub fn is_empty(&self) -> bool {
        self.othello.is_empty()
    }

    /// The action of `name` (control-plane lookup, exact).
    pub fn get(&self, name: &K) -> Option<&Action> {
        self.actions.get(self.othello.get(name)?)
    }

    fn max_ids(&self) -> u64 {
        ActionTable::max_ids_for(self.othello.config().value_bits)
    }

    /// Add `name` with `action`.
    pub fn insert(&mut self, name: K, action: &Action) -> Result<Change, FibError> {
        if self.othello.contains(&name) {
            return Err(FibError::NameExists(name.fmt_name()));
        }
        let id = self.actions.intern(action, self.max_ids())?;
        Ok(self.othello.insert(name, id)?)
    }

    /// Delete `name`.
    pub fn remove(&mut self, name: &K) -> Result<Change, FibError> {
        if !self.othello.contains(name) {
            return Err(FibError::NameNotFound(name.fmt_name()));
        }
        Ok(self.othello.remove(name)?)
    }

    /// Change the action of `name`.
    pub fn change(&mut self, name: &K, action: &Action) -> Result<Change, FibError> {
        if !self.othello.contains(name) {
            return Err(FibError::NameNotFound(name.fmt_name()));
        }
        let id = self.actions.intern(action, self.max_ids())?;
        Ok(self.othello.alter(name, id)?)
    }

    /// Check a batch of changes against the current state, in order, without
    /// changing anything. Errors carry the change's line.
    pub fn validate_changes<C: LinedChange<K>>(&self, changes: &[C]) -> Result<(), FibError> {
        // Presence after the changes so far, for names the batch touched.
        let mut present: HashMap<&K, bool> = HashMap::with_capacity(changes.len());
        let mut new_actions: HashSet<&Action> = HashSet::new();
        let max = self.max_ids();
        // Presence before the batch, looked up with the misses overlapped.
        let before = self
            .othello
            .contains_many(changes.iter().map(|c| c.change().name()));
        for (c, &was) in changes.iter().zip(&before) {
            let (line, ch) = (c.line(), c.change());
            let name = ch.name();
            let slot = present.entry(name).or_insert(was);
            let here = *slot;
            let (err, now, action) = match ch {
                RouteChange::Add(k, a) => (
                    here.then(|| FibError::NameExists(k.fmt_name())),
                    true,
                    Some(a),
                ),
                RouteChange::Delete(k) => (
                    (!here).then(|| FibError::NameNotFound(k.fmt_name())),
                    false,
                    None,
                ),
                RouteChange::Set(k, a) => (
                    (!here).then(|| FibError::NameNotFound(k.fmt_name())),
                    true,
                    Some(a),
                ),
            };
            if let Some(e) = err {
                return Err(FibError::at(line, e));
            }
            *slot = now;
            if let Some(a) = action {
                if self.actions.id_of(a).is_none() && new_actions.insert(a) {
                    let total = self.actions.len() as u64 + new_actions.len() as u64;
                    if total > max {
                        return Err(FibError::at(
                            line,
                            FibError::ActionTableFull { max_ids: max },
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Apply a batch of changes, all or nothing: the whole batch is
    /// validated first (add of a present name, delete or change of an absent
    /// one, action table overflow), and nothing is applied if any change is
    /// refused. Returns the data-plane change of each.
    ///
    /// After validation only an Othello failure to find any working seed
    /// ([`UpdateError::NoSeedWorks`], practically impossible with a stash)
    /// can stop the batch; the changes before it are then applied.
    pub fn apply_changes<C: LinedChange<K>>(
        &mut self,
        changes: &[C],
    ) -> Result<Vec<Change>, FibError> {
        self.validate_changes(changes)?;
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            let (line, ch) = (c.line(), c.change());
            let r = match ch {
                RouteChange::Add(k, a) => self.insert(k.clone(), a),
                RouteChange::Delete(k) => self.remove(k),
                RouteChange::Set(k, a) => self.change(k, a),
            };
            out.push(r.map_err(|e| FibError::at(line, e))?);
        }
        Ok(out)
    }

    /// [`Self::apply_changes`] as one data-plane change: the batch is
    /// validated whole (nothing is applied if any change is refused), then
    /// run through [`Othello::apply_batch`] (keys hashed once, vertices
    /// prefetched ahead), and the slot writes of all its changes come back
    /// as one [`Change`], in order. One delta built from it brings a query
    /// structure from the state before the first change to the state after
    /// the last, with no intermediate state visible in between.
    ///
    /// Only an Othello failure to find any working seed can stop the batch
    /// after validation; the outcome then holds the change made by the
    /// changes before it (applied) and the error at the failing change's
    /// line.
    pub fn apply_changes_merged<C: LinedChange<K>>(&mut self, changes: &[C]) -> MergedApply {
        if let Err(e) = self.validate_changes(changes) {
            return MergedApply {
                change: Change::Writes(Vec::new()),
                applied: 0,
                error: Some(e),
            };
        }
        let max = self.max_ids();
        let mut ops = Vec::with_capacity(changes.len());
        for c in changes {
            let (line, ch) = (c.line(), c.change());
            let id = |actions: &mut ActionTable, a: &Action| {
                // Validation checked that the table has room for every new action.
                actions.intern(a, max).map_err(|e| FibError::at(line, e))
            };
            let op = match ch {
                RouteChange::Add(k, a) => {
                    id(&mut self.actions, a).map(|v| BatchOp::Insert(k.clone(), v))
                }
                RouteChange::Delete(k) => Ok(BatchOp::Remove(k.clone())),
                RouteChange::Set(k, a) => {
                    id(&mut self.actions, a).map(|v| BatchOp::Alter(k.clone(), v))
                }
            };
            match op {
                Ok(op) => ops.push(op),
                Err(e) => {
                    return MergedApply {
                        change: Change::Writes(Vec::new()),
                        applied: 0,
                        error: Some(e),
                    }
                }
            }
        }
        match self.othello.apply_batch(ops) {
            Ok(change) => MergedApply {
                change,
                applied: changes.len(),
                error: None,
            },
            Err(e) => MergedApply {
                change: e.applied,
                applied: e.index,
                error: Some(FibError::at(
                    changes[e.index].line(),
                    FibError::Update(e.error),
                )),
            },
        }
    }

    /// Look `name` up in a data-plane structure built from this FIB. `None`
    /// when the check field rejects the name or the id is not in the table.
    pub fn lookup_action(&self, query: &Query, name: &K) -> Option<&Action> {
        self.actions.get(query.lookup(name)?)
    }

    /// The control state ([`Othello::save`]); the action table is saved
    /// separately with [`ActionTable::to_text`].
    pub fn save_control(&self) -> Vec<u8> {
        self.othello.save()
    }

    /// [`Self::save_control`], or [`crate::AllocError`] where its buffer
    /// cannot be allocated.
    pub fn try_save_control(&self) -> Result<Vec<u8>, crate::AllocError> {
        self.othello.try_save()
    }

    /// Load what [`Self::save_control`] and [`ActionTable::to_text`] wrote.
    /// Every stored action id must be in the table; a state of more than
    /// one column ([`crate::fib_net::NetworkFib`]) is refused.
    pub fn load_control(bytes: &[u8], actions_text: &str) -> Result<Self, FibError> {
        let othello = Othello::<K>::load(bytes)?;
        if othello.config().columns != 1 {
            // A network FIB's state (`crate::fib_net`): not one column.
            return Err(UpdateError::Columns {
                expected: 1,
                got: othello.config().columns,
            }
            .into());
        }
        let actions = ActionTable::from_text(actions_text)?;
        if let Some((_, id)) = othello.iter().find(|&(_, id)| actions.get(id).is_none()) {
            return Err(FibError::UnknownActionId {
                id,
                len: actions.len(),
            });
        }
        if actions.len() as u64 > ActionTable::max_ids_for(othello.config().value_bits) {
            return Err(FibError::ActionTableFull {
                max_ids: ActionTable::max_ids_for(othello.config().value_bits),
            });
        }
        Ok(ConciseFib { othello, actions })
    }
}

/// What [`ConciseFib::apply_changes_merged`] did.
#[derive(Debug)]
pub struct MergedApply {
    /// The data-plane writes of the applied changes, in order (or a
    /// rebuild if any of them rebuilt the structure).
    pub change: Change,
    /// How many changes, from the first, were applied.
    pub applied: usize,
    /// Why the batch stopped (`None`: all applied). A validation error
    /// means nothing was applied.
    pub error: Option<FibError>,
}

/// The second occurrence of the first duplicated name, with both lines.
fn first_duplicate<K: NameKey>(routes: &[(usize, K, Action)]) -> Option<FibError> {
    let mut seen: HashMap<&K, usize> = HashMap::with_capacity(routes.len());
    for (line, k, _) in routes {
        if let Some(&first_line) = seen.get(k) {
            return Some(FibError::at(
                *line,
                FibError::DuplicateName {
                    name: k.fmt_name(),
                    first_line,
                },
            ));
        }
        seen.insert(k, *line);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(last: u8) -> [u8; 6] {
        [0x02, 0, 0, 0, 0, last]
    }

    fn routes(n: u8) -> Vec<(usize, [u8; 6], Action)> {
        (0..n)
            .map(|i| (i as usize + 1, mac(i), Action::Port(i as u16 % 4)))
            .collect()
    }

    #[test]
    fn actions_parse_and_print_canonically() {
        for (text, want, canon) in [
            ("3", Action::Port(3), "3"),
            ("3+1", Action::PortSet(vec![1, 3]), "1+3"),
            ("1+3+1+3", Action::PortSet(vec![1, 3]), "1+3"),
            ("1+1", Action::Port(1), "1"),
            ("drop", Action::Drop, "drop"),
            ("controller", Action::Controller, "controller"),
            ("65535", Action::Port(65535), "65535"),
        ] {
            let a: Action = text.parse().unwrap();
            assert_eq!(a, want, "{text}");
            assert_eq!(a.to_string(), canon);
        }
    }

    #[test]
    fn malformed_actions_are_rejected_with_reason() {
        assert_eq!("".parse::<Action>(), Err(ActionParseError::Empty));
        for bad in ["65536", "x", "-1", "+1", "1+", "1++2", "1+drop", "port3"] {
            let e = bad.parse::<Action>().unwrap_err();
            assert!(e.to_string().contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn action_table_interns_dense_ids_and_round_trips_text() {
        let mut t = ActionTable::new();
        assert_eq!(t.intern(&Action::Drop, 4).unwrap(), 0);
        assert_eq!(t.intern(&Action::Port(7), 4).unwrap(), 1);
        assert_eq!(t.intern(&Action::Drop, 4).unwrap(), 0);
        assert_eq!(t.id_of(&Action::Port(7)), Some(1));
        assert_eq!(t.get(1), Some(&Action::Port(7)));
        assert_eq!(t.get(2), None);
        let text = t.to_text();
        assert_eq!(text, "0 drop\n1 7\n");
        assert_eq!(ActionTable::from_text(&text).unwrap(), t);
    }

    /// Every kind of action gets its id back, ports absent below the
    /// largest interned one read as absent, and `id_of` agrees with the id
    /// order for every action, also after a text round trip.
    #[test]
    fn action_table_finds_every_kind_of_action() {
        let all = [
            Action::Port(5),
            Action::PortSet(vec![1, 3]),
            Action::Controller,
            Action::Port(0),
            Action::Port(65535),
            Action::Drop,
            Action::PortSet(vec![2, 5, 9]),
        ];
        let mut t = ActionTable::new();
        for (i, a) in all.iter().enumerate() {
            assert_eq!(t.id_of(a), None, "{a} before interning");
            assert_eq!(t.intern(a, u64::MAX).unwrap(), i as u64);
            assert_eq!(t.intern(a, u64::MAX).unwrap(), i as u64, "{a} again");
        }
        for a in [
            Action::Port(1),
            Action::Port(4),
            Action::Port(6),
            Action::Port(65534),
            Action::PortSet(vec![1, 5]),
        ] {
            assert_eq!(t.id_of(&a), None, "{a} was never interned");
        }
        let back = ActionTable::from_text(&t.to_text()).unwrap();
        assert_eq!(back, t);
        for table in [&t, &back] {
            for (id, a) in table.iter() {
                assert_eq!(table.id_of(a), Some(id), "{a}");
            }
        }
        let mut small = ActionTable::new();
        small.intern(&Action::Drop, 2).unwrap();
        small.intern(&Action::Port(3), 2).unwrap();
        assert!(small.intern(&Action::Controller, 2).is_err());
        assert_eq!(
            small.id_of(&Action::Controller),
            None,
            "a refused action stays out"
        );
    }

    #[test]
    fn action_table_full_names_value_bits() {
        let mut t = ActionTable::new();
        let max = ActionTable::max_ids_for(1);
        t.intern(&Action::Port(1), max).unwrap();
        t.intern(&Action::Port(2), max).unwrap();
        let e = t.intern(&Action::Port(3), max).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("action table full: 2^1 actions for l = 1"),
            "{msg}"
        );
        assert!(msg.contains("--value-bits"), "{msg}");
    }

    #[test]
    fn action_table_text_errors_carry_line_numbers() {
        let e = ActionTable::from_text("0 drop\n\n2 3\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = ActionTable::from_text("0 drop\n1 drop\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = ActionTable::from_text("0 bogus\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.to_string().starts_with("line 1: "));
    }

    #[test]
    fn names_parse_in_every_form_and_print_canonically() {
        assert_eq!(
            <[u8; 6]>::parse_name("AA:bb:0c:dd:ee:ff").unwrap(),
            [0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0xff]
        );
        assert_eq!(
            <[u8; 6]>::parse_name("aa-bb-0c-dd-ee-ff")
                .unwrap()
                .fmt_name(),
            "aa:bb:0c:dd:ee:ff"
        );
        for bad in [
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb-cc:dd:ee:ff",
            "a:bb:cc:dd:ee:ff0",
            "zz:bb:cc:dd:ee:ff",
            "",
        ] {
            assert!(<[u8; 6]>::parse_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Ipv4Addr::parse_name("10.0.0.1").unwrap().fmt_name(),
            "10.0.0.1"
        );
        assert!(Ipv4Addr::parse_name("10.0.0.256").is_err());
        assert_eq!(
            Ipv6Addr::parse_name("2001:DB8:0::1").unwrap().fmt_name(),
            "2001:db8::1"
        );
        assert!(Ipv6Addr::parse_name("2001:db8:::1").is_err());
        assert_eq!(u64::parse_name("0x1f").unwrap(), 31);
        assert_eq!(u64::parse_name("18446744073709551615").unwrap(), u64::MAX);
        for bad in ["-1", "+1", "0x", "0xg", "18446744073709551616", "1e3"] {
            assert!(u64::parse_name(bad).is_err(), "{bad}");
        }
        assert_eq!(Vec::<u8>::parse_name("/a/b#c").unwrap(), b"/a/b#c".to_vec());
        assert!(Vec::<u8>::parse_name("").is_err());
        assert!(Vec::<u8>::parse_name("#x").is_err());
        assert!(Vec::<u8>::parse_name("a b").is_err());
    }

    #[test]
    fn key_types_round_trip_their_names() {
        for k in KeyType::ALL {
            assert_eq!(k.to_string().parse::<KeyType>().unwrap(), k);
        }
        assert!("mac48".parse::<KeyType>().is_err());
    }

    #[test]
    fn a_byte_order_mark_is_skipped_by_the_routes_and_changes_parsers() {
        let r = parse_routes::<u64>("\u{feff}1 2\n3 drop\n").unwrap();
        assert_eq!(r, vec![(1, 1, Action::Port(2)), (2, 3, Action::Drop)]);
        let c = parse_changes::<u64>("\u{feff}+ 1 2\n").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].0, 1);
        // Only at the start: elsewhere it is part of a field.
        assert!(parse_routes::<u64>("1 2\n\u{feff}3 4\n").is_err());
    }

    #[test]
    fn routes_parser_skips_comments_and_blank_lines() {
        let text = "# header\n\n10.0.0.1 3   # trailing\n  10.0.0.2\tdrop\n#10.0.0.3 4\n";
        let r = parse_routes::<Ipv4Addr>(text).unwrap();
        assert_eq!(
            r,
            vec![
                (3, Ipv4Addr::new(10, 0, 0, 1), Action::Port(3)),
                (4, Ipv4Addr::new(10, 0, 0, 2), Action::Drop)
            ]
        );
    }

    #[test]
    fn routes_parser_reports_the_bad_line() {
        let e = parse_routes::<u64>("1 2\n2 3\n3 4 5\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.reason.contains("expected 2 fields"), "{e}");
        let e = parse_routes::<u64>("1 2\nx 3\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.reason.contains("invalid name 'x'"), "{e}");
        let e = parse_routes::<u64>("1 nowhere\n").unwrap_err();
        assert!(e.reason.contains("nowhere"), "{e}");
    }

    #[test]
    fn changes_parser_reads_all_three_forms_and_rejects_others() {
        let c = parse_changes::<u64>("+ 1 2\n- 3 # gone\n\n= 4 drop\n").unwrap();
        assert_eq!(
            c,
            vec![
                (1, RouteChange::Add(1, Action::Port(2))),
                (2, RouteChange::Delete(3)),
                (4, RouteChange::Set(4, Action::Drop)),
            ]
        );
        for (bad, line) in [
            ("+ 1\n", 1),
            ("- 1 2\n", 1),
            ("\n* 1 2\n", 2),
            ("+1 2\n", 1),
            ("= 1 2 3\n", 1),
        ] {
            assert_eq!(parse_changes::<u64>(bad).unwrap_err().line, line, "{bad:?}");
        }
        // The texts of the one-action syntax (the network FIB's parser is
        // the same one with N actions).
        for (bad, text) in [
            ("+ 1\n", "'+' takes NAME ACTION, got 1 fields after it"),
            ("= 1 2 3\n", "'=' takes NAME ACTION, got 3 fields after it"),
            ("- 1 2\n", "'-' takes only NAME, got 2 fields after it"),
            (
                "* 1 2\n",
                "unknown change '*': expected '+ NAME ACTION', '- NAME' or '= NAME ACTION'",
            ),
            ("+ 1 nowhere\n", "nowhere"),
        ] {
            let e = parse_changes::<u64>(bad).unwrap_err();
            assert!(e.reason.contains(text), "{bad:?}: {}", e.reason);
        }
    }

    #[test]
    fn fib_maps_every_name_to_its_action() {
        let r = routes(200);
        let fib = ConciseFib::build(Config::default(), &r).unwrap();
        let q = fib.othello().export(0);
        for (_, k, a) in &r {
            assert_eq!(fib.get(k), Some(a));
            assert_eq!(fib.lookup_action(&q, k), Some(a));
        }
        assert_eq!(fib.action_table().len(), 4);
    }

    #[test]
    fn duplicate_name_error_names_it_and_both_lines() {
        let mut r = routes(50);
        r.push((99, mac(7), Action::Drop));
        let e = ConciseFib::build(Config::default(), &r).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("line 99"), "{msg}");
        assert!(msg.contains("02:00:00:00:00:07"), "{msg}");
        assert!(msg.contains("line 8"), "{msg}");
        // Same through the insert path of a pre-sized build.
        let e = ConciseFib::build_with_capacity(Config::default(), 1000, &r).unwrap_err();
        assert!(e.to_string().contains("line 99"), "{e}");
    }

    #[test]
    fn presized_build_does_not_rebuild_while_adding() {
        let r = routes(10);
        let mut fib = ConciseFib::build_with_capacity(Config::default(), 200, &r).unwrap();
        for i in 10..200u8 {
            let c = fib.insert(mac(i), &Action::Drop).unwrap();
            assert!(!c.is_rebuild());
        }
        assert_eq!(fib.othello().stats().counters.grow_rebuilds, 0);
    }

    #[test]
    fn too_many_actions_for_value_bits_is_reported_at_its_line() {
        let r: Vec<_> = (0..5u8)
            .map(|i| (i as usize + 1, mac(i), Action::Port(i as u16)))
            .collect();
        let e = ConciseFib::build(Config::with_value_bits(2), &r).unwrap_err();
        assert!(
            e.to_string().starts_with("line 5: action table full: 2^2"),
            "{e}"
        );
    }

    #[test]
    fn single_changes_update_and_refuse_bad_requests() {
        let mut fib = ConciseFib::build(Config::default(), &routes(20)).unwrap();
        fib.insert(mac(100), &Action::PortSet(vec![1, 2])).unwrap();
        assert_eq!(fib.get(&mac(100)), Some(&Action::PortSet(vec![1, 2])));
        assert!(matches!(
            fib.insert(mac(100), &Action::Drop),
            Err(FibError::NameExists(_))
        ));
        fib.change(&mac(100), &Action::Controller).unwrap();
        assert_eq!(fib.get(&mac(100)), Some(&Action::Controller));
        fib.remove(&mac(100)).unwrap();
        assert_eq!(fib.get(&mac(100)), None);
        assert!(matches!(
            fib.remove(&mac(100)),
            Err(FibError::NameNotFound(_))
        ));
        assert!(matches!(
            fib.change(&mac(100), &Action::Drop),
            Err(FibError::NameNotFound(_))
        ));
        fib.othello().check_invariants().unwrap();
    }

    #[test]
    fn batch_is_all_or_nothing() {
        let mut fib = ConciseFib::build(Config::default(), &routes(20)).unwrap();
        let before = fib.save_control();
        let batch = vec![
            (1, RouteChange::Add(mac(50), Action::Drop)),
            (2, RouteChange::Delete(mac(3))),
            (3, RouteChange::Delete(mac(3))),
        ];
        let e = fib.apply_changes(&batch).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 3: name 02:00:00:00:00:03 not found"),
            "{e}"
        );
        assert_eq!(fib.save_control(), before);
        let batch = vec![
            (1, RouteChange::Delete(mac(3))),
            (2, RouteChange::Add(mac(3), Action::Drop)),
            (5, RouteChange::Add(mac(4), Action::Drop)),
        ];
        let e = fib.apply_changes(&batch).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 5: cannot add 02:00:00:00:00:04"),
            "{e}"
        );
        assert_eq!(fib.save_control(), before);
    }

    #[test]
    fn batch_checks_action_table_overflow_before_applying() {
        let r: Vec<_> = (0..3u8)
            .map(|i| (i as usize + 1, mac(i), Action::Port(i as u16)))
            .collect();
        let mut fib = ConciseFib::build(Config::with_value_bits(2), &r).unwrap();
        let batch = vec![
            (1, RouteChange::Set(mac(0), Action::Drop)),
            (2, RouteChange::Set(mac(1), Action::Drop)),
            (3, RouteChange::Add(mac(9), Action::Controller)),
        ];
        let e = fib.apply_changes(&batch).unwrap_err();
        assert!(
            e.to_string().starts_with("line 3: action table full"),
            "{e}"
        );
        assert_eq!(fib.get(&mac(0)), Some(&Action::Port(0)));
        assert_eq!(fib.action_table().len(), 3);
    }

    #[test]
    fn batch_applies_against_a_hashmap_oracle() {
        let r = routes(100);
        let mut fib = ConciseFib::build(Config::default(), &r).unwrap();
        let mut oracle: HashMap<[u8; 6], Action> =
            r.iter().map(|(_, k, a)| (*k, a.clone())).collect();
        let mut batch = Vec::new();
        for i in 0..100u8 {
            let ch = match i % 3 {
                0 => RouteChange::Delete(mac(i)),
                1 => RouteChange::Set(mac(i), Action::PortSet(vec![1, i as u16 + 2])),
                _ => RouteChange::Add(mac(i.wrapping_add(100)), Action::Controller),
            };
            batch.push((i as usize + 1, ch));
        }
        let changes = fib.apply_changes(&batch).unwrap();
        assert_eq!(changes.len(), batch.len());
        for (_, ch) in &batch {
            match ch {
                RouteChange::Delete(k) => oracle.remove(k),
                RouteChange::Set(k, a) | RouteChange::Add(k, a) => oracle.insert(*k, a.clone()),
            };
        }
        assert_eq!(fib.len(), oracle.len());
        let q = fib.othello().export(0);
        for (k, a) in &oracle {
            assert_eq!(fib.lookup_action(&q, k), Some(a));
        }
    }

    /// The merged path reaches the same FIB as change-by-change application,
    /// and its one delta brings a query structure there.
    #[test]
    fn merged_batch_matches_single_changes_and_its_delta_applies() {
        let r = routes(200);
        let mut one = ConciseFib::build(Config::default(), &r).unwrap();
        let mut merged = ConciseFib::build(Config::default(), &r).unwrap();
        let q = merged.othello().export(0);
        let mut batch = Vec::new();
        for i in 0..200u8 {
            let ch = match i % 4 {
                0 => RouteChange::Delete(mac(i)),
                1 => RouteChange::Set(mac(i), Action::PortSet(vec![1, i as u16 % 9 + 2])),
                2 => RouteChange::Set(mac(i), Action::Drop),
                _ => RouteChange::Add([0x06, 0, 0, 0, 1, i], Action::Controller),
            };
            batch.push((i as usize + 1, ch));
        }
        // The same name changed twice within the batch.
        batch.push((201, RouteChange::Set(mac(1), Action::Port(7))));
        one.apply_changes(&batch).unwrap();
        let m = merged.apply_changes_merged(&batch);
        assert!(m.error.is_none(), "{:?}", m.error);
        assert_eq!(m.applied, batch.len());
        assert_eq!(merged.save_control(), one.save_control());
        assert_eq!(merged.action_table(), one.action_table());
        match merged.othello().delta(&m.change, 0) {
            d @ crate::Delta::Ops { .. } => q.apply(&d).unwrap(),
            crate::Delta::Snapshot(_) => panic!("no rebuild expected at this size"),
        }
        assert_eq!(q.to_snapshot(), merged.othello().snapshot(0));
        assert_eq!(merged.lookup_action(&q, &mac(1)), Some(&Action::Port(7)));

        // A refused change anywhere refuses the whole batch.
        let before = merged.save_control();
        let bad = vec![
            (1, RouteChange::Add(mac(250), Action::Drop)),
            (2, RouteChange::Delete(mac(0))),
        ];
        let m = merged.apply_changes_merged(&bad);
        assert_eq!(m.applied, 0);
        assert_eq!(m.change.writes(0), &[]);
        let e = m.error.expect("refused").to_string();
        assert!(
            e.starts_with("line 2: name 02:00:00:00:00:00 not found"),
            "{e}"
        );
        assert_eq!(merged.save_control(), before);
    }

    #[test]
    fn control_state_round_trips_with_its_action_table() {
        let mut fib = ConciseFib::build(Config::default(), &routes(30)).unwrap();
        fib.insert(mac(200), &Action::Drop).unwrap();
        let bytes = fib.save_control();
        let text = fib.action_table().to_text();
        let back = ConciseFib::<[u8; 6]>::load_control(&bytes, &text).unwrap();
        assert_eq!(back.get(&mac(200)), Some(&Action::Drop));
        assert_eq!(back.action_table(), fib.action_table());
        assert_eq!(back.save_control(), bytes);
    }

    #[test]
    fn load_refuses_ids_missing_from_the_action_table() {
        let fib = ConciseFib::build(Config::default(), &routes(30)).unwrap();
        let e = ConciseFib::<[u8; 6]>::load_control(&fib.save_control(), "0 0\n1 1\n").unwrap_err();
        assert!(matches!(e, FibError::UnknownActionId { len: 2, .. }), "{e}");
        let e = ConciseFib::<[u8; 6]>::load_control(&fib.save_control()[..40], "").unwrap_err();
        assert!(matches!(e, FibError::Format(_)), "{e}");
    }

    #[test]
    fn alien_names_miss_with_check_bits() {
        let cfg = Config {
            check_bits: 16,
            ..Config::default()
        };
        let fib = ConciseFib::build(cfg, &routes(100)).unwrap();
        let q = fib.othello().export(0);
        let misses = (0..100u8)
            .filter(|&i| fib.lookup_action(&q, &[0x04, 1, 2, 3, 4, i]).is_none())
            .count();
        assert!(misses >= 99, "{misses}");
    }
}
