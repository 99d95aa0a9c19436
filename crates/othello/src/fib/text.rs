//! The text layer of the flat-name FIB: routes and changes files (formats
//! in the [`fib`](super) module docs), parsed line by line with errors that
//! name the line.

use super::{Action, ActionParseError, LineError, NameKey};

/// Non-empty lines as `(line number, fields)`, cut at a `#` token. A
/// UTF-8 byte-order mark at the start is skipped, as by every nexthop text
/// parser.
pub(crate) fn fields_of(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> + '_ {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines().enumerate().filter_map(|(i, l)| {
        let fields: Vec<&str> = l
            .split_whitespace()
            .take_while(|t| !t.starts_with('#'))
            .collect();
        (!fields.is_empty()).then_some((i + 1, fields))
    })
}

pub(crate) fn name_at<K: NameKey>(line: usize, tok: &str) -> Result<K, LineError> {
    K::parse_name(tok).map_err(|r| LineError::new(line, format!("invalid name '{tok}': {r}")))
}

pub(crate) fn action_at(line: usize, tok: &str) -> Result<Action, LineError> {
    tok.parse()
        .map_err(|e: ActionParseError| LineError::new(line, e.to_string()))
}

/// Parse a routes file: `NAME ACTION` per line.
pub fn parse_routes<K: NameKey>(text: &str) -> Result<Vec<(usize, K, Action)>, LineError> {
    let mut out = Vec::new();
    for (line, fields) in fields_of(text) {
        let [name, action] = fields[..] else {
            return Err(LineError::new(
                line,
                format!("expected 2 fields (NAME ACTION), got {}", fields.len()),
            ));
        };
        out.push((line, name_at(line, name)?, action_at(line, action)?));
    }
    Ok(out)
}

/// A route change with the line of its source (a changes file, or the
/// position in a call), as the batch calls take them: owned
/// `(line, change)` pairs, or borrowed `(line, &change)` pairs so a caller
/// holding plain changes need not clone them. Errors name the line.
pub trait LinedChange<K> {
    /// The line errors name.
    fn line(&self) -> usize;
    /// The change.
    fn change(&self) -> &RouteChange<K>;
}

impl<K> LinedChange<K> for (usize, RouteChange<K>) {
    fn line(&self) -> usize {
        self.0
    }
    fn change(&self) -> &RouteChange<K> {
        &self.1
    }
}

impl<K> LinedChange<K> for (usize, &RouteChange<K>) {
    fn line(&self) -> usize {
        self.0
    }
    fn change(&self) -> &RouteChange<K> {
        self.1
    }
}

/// `changes` numbered 1, 2, ... by reference (errors name the number; no
/// change is cloned, which for port sets would allocate).
pub fn numbered<K>(changes: &[RouteChange<K>]) -> Vec<(usize, &RouteChange<K>)> {
    changes
        .iter()
        .enumerate()
        .map(|(i, c)| (i + 1, c))
        .collect()
}

/// One line of a changes file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteChange<K> {
    /// `+ NAME ACTION`: add a name that is absent.
    Add(K, Action),
    /// `- NAME`: delete a name that is present.
    Delete(K),
    /// `= NAME ACTION`: change the action of a name that is present.
    Set(K, Action),
}

impl<K> RouteChange<K> {
    /// The name the change is about.
    pub fn name(&self) -> &K {
        match self {
            RouteChange::Add(k, _) | RouteChange::Delete(k) | RouteChange::Set(k, _) => k,
        }
    }
}

/// Parse a changes file: `+ NAME ACTION`, `- NAME` or `= NAME ACTION` per line.
pub fn parse_changes<K: NameKey>(text: &str) -> Result<Vec<(usize, RouteChange<K>)>, LineError> {
    Ok(
        parse_change_lines(text, 1, |line, acts| action_at(line, acts[0]))?
            .into_iter()
            .map(|(line, c)| {
                let c = match c {
                    ChangeLine::Add(k, a) => RouteChange::Add(k, a),
                    ChangeLine::Delete(k) => RouteChange::Delete(k),
                    ChangeLine::Set(k, a) => RouteChange::Set(k, a),
                };
                (line, c)
            })
            .collect(),
    )
}

/// One line of a changes file, its action part `A` parsed by the caller:
/// one action ([`RouteChange`]) or one per column (a network FIB's).
pub(crate) enum ChangeLine<K, A> {
    Add(K, A),
    Delete(K),
    Set(K, A),
}

/// Numbered [`ChangeLine`]s.
pub(crate) type ChangeLines<K, A> = Vec<(usize, ChangeLine<K, A>)>;

/// Parse a changes file whose `+` and `=` lines carry `arity` action
/// tokens: `+ NAME ACTION..`, `- NAME`, `= NAME ACTION..` per line.
/// `actions(line, tokens)` parses a line's `arity` action tokens. The error
/// texts name the arity (`'+' takes NAME ACTION` for one action, `'+'
/// takes NAME and N actions` for N).
pub(crate) fn parse_change_lines<K: NameKey, A>(
    text: &str,
    arity: usize,
    actions: impl Fn(usize, &[&str]) -> Result<A, LineError>,
) -> Result<ChangeLines<K, A>, LineError> {
    let (takes, act) = if arity == 1 {
        ("NAME ACTION".to_string(), "ACTION")
    } else {
        (format!("NAME and {arity} actions"), "ACTION...")
    };
    let mut out = Vec::new();
    for (line, fields) in fields_of(text) {
        let change = match fields[..] {
            [op @ ("+" | "="), name, ref acts @ ..] if acts.len() == arity => {
                let (name, acts) = (name_at(line, name)?, actions(line, acts)?);
                if op == "+" {
                    ChangeLine::Add(name, acts)
                } else {
                    ChangeLine::Set(name, acts)
                }
            }
            ["-", name] => ChangeLine::Delete(name_at(line, name)?),
            [op @ ("+" | "="), ..] => {
                return Err(LineError::new(
                    line,
                    format!(
                        "'{op}' takes {takes}, got {} fields after it",
                        fields.len() - 1
                    ),
                ))
            }
            ["-", ..] => {
                return Err(LineError::new(
                    line,
                    format!(
                        "'-' takes only NAME, got {} fields after it",
                        fields.len() - 1
                    ),
                ))
            }
            [op, ..] => {
                return Err(LineError::new(
                    line,
                    format!(
                        "unknown change '{op}': expected '+ NAME {act}', '- NAME' or '= NAME {act}'"
                    ),
                ))
            }
            [] => continue,
        };
        out.push((line, change));
    }
    Ok(out)
}
