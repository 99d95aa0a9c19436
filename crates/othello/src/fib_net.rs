//! The network-wide Concise FIB (Concise, section 5.1, "network-wide
//! shared bipartite graph"): one Othello graph for every switch of a
//! network, with a value column per switch. A name's edge, its slots and
//! the graph's shape are computed once; column `c` holds the action id of
//! the name at switch `c`, and switch `c`'s data plane is
//! [`Othello::export`]`(c)` plus the shared action table.
//!
//! A change is taken once: an add places the name's edge once and writes
//! every column; a change of a name's actions alters only the columns
//! whose action differs, so the delta of an untouched switch is empty; a
//! delete removes the edge once. [`NetworkFib::apply_changes`] returns the
//! writes of a whole batch per column ([`Change::writes`]).
//!
//! # Text formats
//!
//! ```text
//! # routes: NAME and one ACTION per column (switch 0, 1, ...)
//! aa:bb:cc:dd:ee:01 1 2 2 drop
//! # changes
//! + aa:bb:cc:dd:ee:05 2 2 1 1   # add, with every column's action
//! - aa:bb:cc:dd:ee:01           # delete
//! = aa:bb:cc:dd:ee:02 1 3 2 4   # set every column's action
//! ```
//!
//! With one column these are the [`crate::fib`] formats.
//!
//! # Invariants
//!
//! The [`crate::fib`] ones, for every column: action ids are dense and
//! never removed, every stored id of every column is in the table, and a
//! batch is validated whole before any of it is applied.

use hashbrown::{HashMap, HashSet};
use std::fmt::{self, Debug, Write as _};

use crate::config::Config;
use crate::control::{Change, Othello};
use crate::error::UpdateError;
use crate::fib::{
    action_at, fields_of, name_at, parse_change_lines, Action, ActionTable, ChangeLine, FibError,
    LineError, MergedApply, NameKey,
};
use crate::query::Query;

/// One line of a network changes file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkChange<K> {
    /// `+ NAME ACTION...`: add an absent name with one action per column.
    Add(K, Vec<Action>),
    /// `- NAME`: delete a present name (from every column).
    Delete(K),
    /// `= NAME ACTION...`: set every column's action of a present name;
    /// only the columns whose action differs change.
    Set(K, Vec<Action>),
}

impl<K: NameKey> NetworkChange<K> {
    /// The name the change is about.
    pub fn name(&self) -> &K {
        match self {
            NetworkChange::Add(k, _) | NetworkChange::Delete(k) | NetworkChange::Set(k, _) => k,
        }
    }

    /// The change as a line of a changes file (with its newline).
    pub fn to_line(&self) -> String {
        let (op, k, acts) = match self {
            NetworkChange::Add(k, a) => ("+", k, Some(a)),
            NetworkChange::Delete(k) => ("-", k, None),
            NetworkChange::Set(k, a) => ("=", k, Some(a)),
        };
        let mut s = format!("{op} {}", k.fmt_name());
        for a in acts.into_iter().flatten() {
            let _ = write!(s, " {a}");
        }
        s.push('\n');
        s
    }
}

/// The number of columns of a network routes file: the fields of its
/// first route less the name (`None` for a file without routes).
pub fn route_columns(text: &str) -> Option<usize> {
    fields_of(text).next().map(|(_, f)| f.len() - 1)
}

fn actions_at(line: usize, toks: &[&str], columns: usize) -> Result<Vec<Action>, LineError> {
    if toks.len() != columns {
        return Err(LineError::new(
            line,
            format!(
                "expected {columns} actions (one per column), got {}",
                toks.len()
            ),
        ));
    }
    toks.iter().map(|t| action_at(line, t)).collect()
}

/// Parse a network routes file: `NAME ACTION...` per line, `columns`
/// actions on each.
pub fn parse_network_routes<K: NameKey>(
    text: &str,
    columns: usize,
) -> Result<Vec<(usize, K, Vec<Action>)>, LineError> {
    let mut out = Vec::new();
    for (line, fields) in fields_of(text) {
        out.push((
            line,
            name_at(line, fields[0])?,
            actions_at(line, &fields[1..], columns)?,
        ));
    }
    Ok(out)
}

/// Parse a network changes file: `+ NAME ACTION...`, `- NAME` or
/// `= NAME ACTION...` per line, `columns` actions after a `+` or `=`.
pub fn parse_network_changes<K: NameKey>(
    text: &str,
    columns: usize,
) -> Result<Vec<(usize, NetworkChange<K>)>, LineError> {
    Ok(parse_change_lines(text, columns, |line, acts| {
        acts.iter().map(|t| action_at(line, t)).collect()
    })?
    .into_iter()
    .map(|(line, c)| {
        let c = match c {
            ChangeLine::Add(k, a) => NetworkChange::Add(k, a),
            ChangeLine::Delete(k) => NetworkChange::Delete(k),
            ChangeLine::Set(k, a) => NetworkChange::Set(k, a),
        };
        (line, c)
    })
    .collect())
}

/// A network-wide Concise FIB: names mapped to one action id per column
/// (switch) by one shared [`Othello`], plus one action table. The
/// control-plane object; switch `c`'s data plane is [`Self::export`]`(c)`
/// and [`Self::action_table`].
pub struct NetworkFib<K> {
    othello: Othello<K>,
    actions: ActionTable,
}

impl<K> Debug for NetworkFib<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkFib")
            .field("othello", &self.othello)
            .field("actions", &self.actions.len())
            .finish()
    }
}

/// The writes of `b` after those of `a` (a rebuild absorbs everything:
/// its delta is a snapshot taken after the batch).
fn merge(a: &mut Change, b: Change) {
    match (&mut *a, b) {
        (Change::Writes(x), Change::Writes(y)) => {
            for (xs, ys) in x.iter_mut().zip(y) {
                xs.extend(ys);
            }
        }
        (_, _) => *a = Change::Rebuilt,
    }
}

impl<K: NameKey> NetworkFib<K> {
    /// Build from parsed routes (`(line, name, one action per column)`);
    /// `cfg.columns` is the number of columns. A duplicate name is an
    /// error naming it.
    pub fn build(cfg: Config, routes: &[(usize, K, Vec<Action>)]) -> Result<Self, FibError> {
        cfg.validate().map_err(UpdateError::from)?;
        let max = ActionTable::max_ids_for(cfg.value_bits);
        let mut actions = ActionTable::new();
        let mut rows = Vec::with_capacity(routes.len());
        let mut seen: HashMap<&K, usize> = HashMap::with_capacity(routes.len());
        for (line, k, acts) in routes {
            if let Some(&first_line) = seen.get(k) {
                return Err(FibError::at(
                    *line,
                    FibError::DuplicateName {
                        name: k.fmt_name(),
                        first_line,
                    },
                ));
            }
            seen.insert(k, *line);
            if acts.len() != cfg.columns {
                return Err(FibError::at(
                    *line,
                    UpdateError::Columns {
                        expected: cfg.columns,
                        got: acts.len(),
                    }
                    .into(),
                ));
            }
            let ids = acts
                .iter()
                .map(|a| actions.intern(a, max))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| FibError::at(*line, e))?;
            rows.push((k.clone(), ids));
        }
        let othello = Othello::build_columns(cfg, rows)?;
        Ok(NetworkFib { othello, actions })
    }

    /// Number of columns (switches).
    pub fn columns(&self) -> usize {
        self.othello.config().columns
    }

    /// The shared Othello (values are action ids, a column per switch).
    pub fn othello(&self) -> &Othello<K> {
        &self.othello
    }

    /// The action table (shared by every column).
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

    /// The action of `name` at switch `column` (control-plane lookup).
    pub fn get_column(&self, name: &K, column: usize) -> Option<&Action> {
        self.actions.get(self.othello.get_column(name, column)?)
    }

    /// The actions of `name`, one per column.
    pub fn get(&self, name: &K) -> Option<Vec<&Action>> {
        (0..self.columns())
            .map(|c| self.get_column(name, c))
            .collect()
    }

    /// Switch `column`'s data-plane structure.
    ///
    /// # Panics
    /// If `column >= self.columns()`.
    pub fn export(&self, column: usize) -> Query {
        self.othello.export(column)
    }

    /// Look `name` up in a data-plane structure of one column.
    pub fn lookup_action(&self, query: &Query, name: &K) -> Option<&Action> {
        self.actions.get(query.lookup(name)?)
    }

    fn max_ids(&self) -> u64 {
        ActionTable::max_ids_for(self.othello.config().value_bits)
    }

    /// Check a batch against the current state, in order, without changing
    /// anything: presence, the number of actions, room in the action table.
    pub fn validate_changes(&self, changes: &[(usize, &NetworkChange<K>)]) -> Result<(), FibError> {
        let mut present: HashMap<&K, bool> = HashMap::with_capacity(changes.len());
        let mut new_actions: HashSet<&Action> = HashSet::new();
        let max = self.max_ids();
        let cols = self.columns();
        for &(line, ch) in changes {
            let name = ch.name();
            let slot = present
                .entry(name)
                .or_insert_with(|| self.othello.contains(name));
            let (err, now, acts) = match ch {
                NetworkChange::Add(k, a) => (
                    slot.then(|| FibError::NameExists(k.fmt_name())),
                    true,
                    Some(a),
                ),
                NetworkChange::Delete(k) => (
                    (!*slot).then(|| FibError::NameNotFound(k.fmt_name())),
                    false,
                    None,
                ),
                NetworkChange::Set(k, a) => (
                    (!*slot).then(|| FibError::NameNotFound(k.fmt_name())),
                    true,
                    Some(a),
                ),
            };
            if let Some(e) = err {
                return Err(FibError::at(line, e));
            }
            *slot = now;
            let Some(acts) = acts else { continue };
            if acts.len() != cols {
                return Err(FibError::at(
                    line,
                    UpdateError::Columns {
                        expected: cols,
                        got: acts.len(),
                    }
                    .into(),
                ));
            }
            for a in acts {
                if self.actions.id_of(a).is_none()
                    && new_actions.insert(a)
                    && self.actions.len() as u64 + new_actions.len() as u64 > max
                {
                    return Err(FibError::at(
                        line,
                        FibError::ActionTableFull { max_ids: max },
                    ));
                }
            }
        }
        Ok(())
    }

    /// Apply a batch, all or nothing at validation, as one data-plane
    /// change: the writes of every change in order, per column (a column no
    /// change touched has none), or a rebuild. Only an Othello failure to
    /// find a working seed can stop the batch after validation; the
    /// outcome then holds the writes of the changes before it (applied)
    /// and the error at the failing change's line.
    pub fn apply_changes(&mut self, changes: &[(usize, &NetworkChange<K>)]) -> MergedApply {
        let cols = self.columns();
        let mut acc = Change::Writes(vec![Vec::new(); cols]);
        if let Err(e) = self.validate_changes(changes) {
            return MergedApply {
                change: acc,
                applied: 0,
                error: Some(e),
            };
        }
        for (i, &(line, ch)) in changes.iter().enumerate() {
            match self.apply_one(ch) {
                Ok(c) => merge(&mut acc, c),
                Err(e) => {
                    return MergedApply {
                        change: acc,
                        applied: i,
                        error: Some(FibError::at(line, e)),
                    }
                }
            }
        }
        MergedApply {
            change: acc,
            applied: changes.len(),
            error: None,
        }
    }

    fn ids(&mut self, acts: &[Action]) -> Result<Vec<u64>, FibError> {
        let max = self.max_ids();
        acts.iter().map(|a| self.actions.intern(a, max)).collect()
    }

    fn apply_one(&mut self, ch: &NetworkChange<K>) -> Result<Change, FibError> {
        Ok(match ch {
            NetworkChange::Add(k, acts) => {
                let ids = self.ids(acts)?;
                self.othello.insert_columns(k.clone(), &ids)?
            }
            NetworkChange::Delete(k) => self.othello.remove(k)?,
            NetworkChange::Set(k, acts) => {
                let ids = self.ids(acts)?;
                let mut acc = Change::Writes(vec![Vec::new(); self.columns()]);
                for (c, &id) in ids.iter().enumerate() {
                    if self.othello.get_column(k, c) != Some(id) {
                        let w = self.othello.alter_column(k, c, id)?;
                        merge(&mut acc, w);
                    }
                }
                acc
            }
        })
    }

    /// The control state ([`Othello::save`], every column); the action
    /// table is saved separately with [`ActionTable::to_text`].
    pub fn try_save_control(&self) -> Result<Vec<u8>, crate::AllocError> {
        self.othello.try_save()
    }

    /// Load what [`Self::try_save_control`] and [`ActionTable::to_text`]
    /// wrote. Every stored action id of every column must be in the table.
    pub fn load_control(bytes: &[u8], actions_text: &str) -> Result<Self, FibError> {
        let othello = Othello::<K>::load(bytes)?;
        let actions = ActionTable::from_text(actions_text)?;
        let max = ActionTable::max_ids_for(othello.config().value_bits);
        if actions.len() as u64 > max {
            return Err(FibError::ActionTableFull { max_ids: max });
        }
        for (_, ids) in othello.iter_columns() {
            if let Some(&id) = ids.iter().find(|&&id| actions.get(id).is_none()) {
                return Err(FibError::UnknownActionId {
                    id,
                    len: actions.len(),
                });
            }
        }
        Ok(NetworkFib { othello, actions })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn mac(i: u32) -> [u8; 6] {
        let b = i.to_be_bytes();
        [2, 0, b[0], b[1], b[2], b[3]]
    }

    fn port(p: u16) -> Action {
        Action::Port(p)
    }

    fn cfg(columns: usize) -> Config {
        Config {
            columns,
            ..Config::with_value_bits(8)
        }
    }

    fn routes(n: u32, cols: usize) -> Vec<(usize, [u8; 6], Vec<Action>)> {
        (0..n)
            .map(|i| {
                let acts = (0..cols).map(|c| port((i as u16 + c as u16) % 5)).collect();
                (i as usize + 1, mac(i), acts)
            })
            .collect()
    }

    fn numbered<K>(ch: &[NetworkChange<K>]) -> Vec<(usize, &NetworkChange<K>)> {
        ch.iter().enumerate().map(|(i, c)| (i + 1, c)).collect()
    }

    /// Every column's export answers what the oracle holds.
    fn check(fib: &NetworkFib<[u8; 6]>, oracle: &HashMap<[u8; 6], Vec<Action>>) {
        fib.othello().check_invariants().unwrap();
        assert_eq!(fib.len(), oracle.len());
        for c in 0..fib.columns() {
            let q = fib.export(c);
            for (k, acts) in oracle {
                assert_eq!(fib.lookup_action(&q, k), Some(&acts[c]), "column {c}");
                assert_eq!(fib.get_column(k, c), Some(&acts[c]));
            }
        }
    }

    #[test]
    fn every_column_answers_its_own_actions_after_random_changes() {
        let cols = 4;
        let base = routes(300, cols);
        let mut fib = NetworkFib::build(cfg(cols), &base).unwrap();
        let mut oracle: HashMap<_, _> = base.iter().map(|(_, k, a)| (*k, a.clone())).collect();
        check(&fib, &oracle);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut next = 300;
        for _ in 0..20 {
            let mut batch = Vec::new();
            let mut touched = HashSet::new();
            for _ in 0..25 {
                let acts: Vec<Action> = (0..cols).map(|_| port(rng.gen_range(0..6))).collect();
                let pick = mac(rng.gen_range(0..next));
                if !touched.insert(pick) {
                    continue;
                }
                let ch = match rng.gen_range(0..3) {
                    0 => {
                        next += 1;
                        NetworkChange::Add(mac(next - 1), acts)
                    }
                    1 if oracle.contains_key(&pick) => NetworkChange::Delete(pick),
                    _ if oracle.contains_key(&pick) => NetworkChange::Set(pick, acts),
                    _ => continue,
                };
                match &ch {
                    NetworkChange::Add(k, a) | NetworkChange::Set(k, a) => {
                        oracle.insert(*k, a.clone());
                    }
                    NetworkChange::Delete(k) => {
                        oracle.remove(k);
                    }
                }
                batch.push(ch);
            }
            let r = fib.apply_changes(&numbered(&batch));
            assert!(r.error.is_none(), "{:?}", r.error);
            assert_eq!(r.applied, batch.len());
        }
        check(&fib, &oracle);
    }

    #[test]
    fn a_set_writes_only_the_columns_whose_action_changed() {
        let cols = 4;
        let base = routes(200, cols);
        let mut fib = NetworkFib::build(cfg(cols), &base).unwrap();
        let k = mac(17);
        let mut acts = fib
            .get(&k)
            .unwrap()
            .into_iter()
            .cloned()
            .collect::<Vec<_>>();
        acts[1] = port(40);
        acts[3] = port(41);
        let before: Vec<Vec<u8>> = (0..cols).map(|c| fib.othello().snapshot(c)).collect();
        let ch = [NetworkChange::Set(k, acts.clone())];
        let r = fib.apply_changes(&numbered(&ch));
        assert!(r.error.is_none());
        for (c, old) in before.iter().enumerate() {
            let touched = c == 1 || c == 3;
            assert_eq!(!r.change.writes(c).is_empty(), touched, "column {c}");
            let q = Query::from_snapshot(old).unwrap();
            q.apply(&fib.othello().delta(&r.change, c)).unwrap();
            assert_eq!(q.to_snapshot(), fib.othello().snapshot(c), "column {c}");
        }
        assert_eq!(
            fib.get(&k).unwrap(),
            acts.iter().collect::<Vec<_>>(),
            "control-plane view"
        );
    }

    #[test]
    fn a_refused_batch_changes_nothing() {
        let mut fib = NetworkFib::build(cfg(2), &routes(50, 2)).unwrap();
        let snap = fib.othello().snapshot(1);
        let ch = [
            NetworkChange::Set(mac(1), vec![port(9), port(9)]),
            NetworkChange::Add(mac(2), vec![port(1), port(1)]),
        ];
        let r = fib.apply_changes(&numbered(&ch));
        assert_eq!(r.applied, 0);
        assert!(matches!(r.error, Some(FibError::AtLine { line: 2, .. })));
        let short = [NetworkChange::Set(mac(1), vec![port(9)])];
        assert!(fib.apply_changes(&numbered(&short)).error.is_some());
        assert_eq!(fib.othello().snapshot(1), snap);
        assert_eq!(fib.get_column(&mac(1), 0), Some(&port(1)));
    }

    #[test]
    fn texts_parse_with_a_column_count_and_print_back() {
        let routes =
            parse_network_routes::<[u8; 6]>("# r\n02:00:00:00:00:01 1 2 drop\n", 3).unwrap();
        assert_eq!(routes[0].2, vec![port(1), port(2), Action::Drop]);
        assert_eq!(
            route_columns("\n# x\n02:00:00:00:00:01 1 2 drop\n"),
            Some(3)
        );
        assert_eq!(route_columns("# nothing\n"), None);
        let e = parse_network_routes::<[u8; 6]>("02:00:00:00:00:01 1 2\n", 3).unwrap_err();
        assert_eq!(e.line, 1);
        let text = "+ 02:00:00:00:00:05 1 1+2 3\n- 02:00:00:00:00:01\n= 02:00:00:00:00:02 4 4 4\n";
        let ch = parse_network_changes::<[u8; 6]>(text, 3).unwrap();
        assert_eq!(ch.len(), 3);
        let printed: String = ch.iter().map(|(_, c)| c.to_line()).collect();
        assert_eq!(printed, text);
        for bad in [
            "+ 02:00:00:00:00:05 1 2\n",
            "+ 02:00:00:00:00:05\n",
            "- 02:00:00:00:00:05 1\n",
            "* 02:00:00:00:00:05 1 2 3\n",
            "= zz 1 2 3\n",
        ] {
            assert!(parse_network_changes::<[u8; 6]>(bad, 3).is_err(), "{bad}");
        }
        for (bad, text) in [
            (
                "+ 02:00:00:00:00:05 1 2\n",
                "'+' takes NAME and 3 actions, got 3 fields after it",
            ),
            (
                "= 02:00:00:00:00:05\n",
                "'=' takes NAME and 3 actions, got 1 fields after it",
            ),
            (
                "- 02:00:00:00:00:05 1\n",
                "'-' takes only NAME, got 2 fields after it",
            ),
            (
                "* 02:00:00:00:00:05 1 2 3\n",
                "expected '+ NAME ACTION...', '- NAME' or '= NAME ACTION...'",
            ),
            ("+ 02:00:00:00:00:05 1 2 nowhere\n", "nowhere"),
        ] {
            let e = parse_network_changes::<[u8; 6]>(bad, 3).unwrap_err();
            assert!(e.reason.contains(text), "{bad:?}: {}", e.reason);
        }
    }

    #[test]
    fn control_state_round_trips_and_unknown_ids_are_refused() {
        let fib = NetworkFib::build(cfg(3), &routes(100, 3)).unwrap();
        let bytes = fib.try_save_control().unwrap();
        let text = fib.action_table().to_text();
        let back = NetworkFib::<[u8; 6]>::load_control(&bytes, &text).unwrap();
        assert_eq!(back.columns(), 3);
        for c in 0..3 {
            assert_eq!(back.othello().snapshot(c), fib.othello().snapshot(c));
        }
        let short: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert!(matches!(
            NetworkFib::<[u8; 6]>::load_control(&bytes, &short),
            Err(FibError::UnknownActionId { .. })
        ));
        assert!(matches!(
            crate::fib::ConciseFib::<[u8; 6]>::load_control(&bytes, &text),
            Err(FibError::Update(UpdateError::Columns {
                expected: 1,
                got: 3
            }))
        ));
        let dup = [(1, mac(1), vec![port(1); 3]), (2, mac(1), vec![port(2); 3])];
        assert!(matches!(
            NetworkFib::build(cfg(3), &dup),
            Err(FibError::AtLine { line: 2, .. })
        ));
    }
}
