//! What a [`RedisController`](super::RedisController) publishes: a
//! Concise FIB (one value column) or a network FIB (a column per switch,
//! one shared graph).

use std::fmt::Write as _;

use nexthop_othello::fib::{
    parse_changes, ActionTable, ConciseFib, FibError, LineError, MergedApply, NameKey, RouteChange,
};
use nexthop_othello::fib_net::{parse_network_changes, NetworkChange, NetworkFib};
use nexthop_othello::{AllocError, Othello};

/// A FIB the Redis bus carries: an Othello of action ids with one or more
/// value columns, its action table, its control state and its changes in
/// text (what stream entries carry for a controller rebuilding its state).
pub trait BusFib<K: NameKey>: Sized {
    /// One route change.
    type Change;
    /// Value columns (1 for a Concise FIB).
    fn columns(&self) -> usize;
    /// Number of names.
    fn len(&self) -> usize;
    /// Whether the FIB has no names.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The Othello (values are action ids).
    fn othello(&self) -> &Othello<K>;
    /// The action table.
    fn action_table(&self) -> &ActionTable;
    /// The control state (the action table is saved apart).
    fn try_save_control(&self) -> Result<Vec<u8>, AllocError>;
    /// Load what [`Self::try_save_control`] and the action table text wrote.
    fn load_control(bytes: &[u8], actions: &str) -> Result<Self, FibError>;
    /// Check a batch without changing anything.
    fn validate(&self, changes: &[(usize, &Self::Change)]) -> Result<(), FibError>;
    /// Apply a batch as one data-plane change (all or nothing at
    /// validation).
    fn apply_merged(&mut self, changes: &[(usize, &Self::Change)]) -> MergedApply;
    /// A change as a line of a changes file.
    fn write_change(c: &Self::Change, out: &mut String);
    /// Parse changes written by [`Self::write_change`] for a FIB of
    /// `columns` columns.
    fn parse_changes(text: &str, columns: usize) -> Result<Vec<(usize, Self::Change)>, LineError>;
}

impl<K: NameKey> BusFib<K> for ConciseFib<K> {
    type Change = RouteChange<K>;
    fn columns(&self) -> usize {
        1
    }
    fn len(&self) -> usize {
        ConciseFib::len(self)
    }
    fn othello(&self) -> &Othello<K> {
        ConciseFib::othello(self)
    }
    fn action_table(&self) -> &ActionTable {
        ConciseFib::action_table(self)
    }
    fn try_save_control(&self) -> Result<Vec<u8>, AllocError> {
        ConciseFib::try_save_control(self)
    }
    fn load_control(bytes: &[u8], actions: &str) -> Result<Self, FibError> {
        ConciseFib::load_control(bytes, actions)
    }
    fn validate(&self, changes: &[(usize, &Self::Change)]) -> Result<(), FibError> {
        self.validate_changes(changes)
    }
    fn apply_merged(&mut self, changes: &[(usize, &Self::Change)]) -> MergedApply {
        self.apply_changes_merged(changes)
    }
    fn write_change(c: &Self::Change, out: &mut String) {
        let _ = match c {
            RouteChange::Add(k, a) => writeln!(out, "+ {} {a}", k.fmt_name()),
            RouteChange::Delete(k) => writeln!(out, "- {}", k.fmt_name()),
            RouteChange::Set(k, a) => writeln!(out, "= {} {a}", k.fmt_name()),
        };
    }
    fn parse_changes(text: &str, _columns: usize) -> Result<Vec<(usize, Self::Change)>, LineError> {
        parse_changes(text)
    }
}

impl<K: NameKey> BusFib<K> for NetworkFib<K> {
    type Change = NetworkChange<K>;
    fn columns(&self) -> usize {
        NetworkFib::columns(self)
    }
    fn len(&self) -> usize {
        NetworkFib::len(self)
    }
    fn othello(&self) -> &Othello<K> {
        NetworkFib::othello(self)
    }
    fn action_table(&self) -> &ActionTable {
        NetworkFib::action_table(self)
    }
    fn try_save_control(&self) -> Result<Vec<u8>, AllocError> {
        NetworkFib::try_save_control(self)
    }
    fn load_control(bytes: &[u8], actions: &str) -> Result<Self, FibError> {
        NetworkFib::load_control(bytes, actions)
    }
    fn validate(&self, changes: &[(usize, &Self::Change)]) -> Result<(), FibError> {
        self.validate_changes(changes)
    }
    fn apply_merged(&mut self, changes: &[(usize, &Self::Change)]) -> MergedApply {
        self.apply_changes(changes)
    }
    fn write_change(c: &Self::Change, out: &mut String) {
        out.push_str(&c.to_line());
    }
    fn parse_changes(text: &str, columns: usize) -> Result<Vec<(usize, Self::Change)>, LineError> {
        parse_network_changes(text, columns)
    }
}
