//! The neighbour (adjacency) table of the IP pipeline: for each next hop
//! of an LPM table, the output port and the Ethernet addresses a frame
//! sent to it gets.
//!
//! Text format, one entry per line (`#` starts a comment, blank lines are
//! skipped, fields separated by spaces or tabs):
//!
//! ```text
//! # next-hop  port  dst-mac            src-mac
//! 1           1     02:00:00:00:01:01  02:00:00:00:00:01
//! 2           2     02:00:00:00:02:01  02:00:00:00:00:02
//! ```
//!
//! * `next-hop`: a next-hop value of the LPM table (decimal, `0` to
//!   `4294967294`); each at most once.
//! * `port`: the output port (`0` to `65535`).
//! * `dst-mac`: the neighbour's MAC address (the frame's new destination).
//! * `src-mac`: the output port's own MAC address (the frame's new source).
//!
//! Errors name the line: `neighbors.txt:3: duplicate next hop 1 (first on
//! line 2)`.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use nexthop_lpm::{NextHop, NO_ROUTE};
use nexthop_wire::MacAddr;
use thiserror::Error;

/// Where a frame for one next hop goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Neighbor {
    /// Output port.
    pub port: u16,
    /// New destination MAC (the neighbour's).
    pub dst_mac: [u8; 6],
    /// New source MAC (the output port's).
    pub src_mac: [u8; 6],
}

/// A neighbour table: next hop → [`Neighbor`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Neighbors {
    entries: HashMap<NextHop, Neighbor>,
}

/// What is wrong with one line of a neighbour file.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NeighborLineError {
    /// Not four fields.
    #[error("expected 4 fields (next-hop port dst-mac src-mac), got {0}")]
    FieldCount(usize),
    /// The next hop is not a number in range.
    #[error("next hop '{0}': expected a number from 0 to 4294967294")]
    NextHop(String),
    /// The port is not a number in range.
    #[error("port '{0}': expected a number from 0 to 65535")]
    Port(String),
    /// A MAC address that does not parse.
    #[error("{which} '{text}': expected six hex pairs like 02:00:00:00:00:01")]
    Mac {
        /// `dst-mac` or `src-mac`.
        which: &'static str,
        /// The rejected text.
        text: String,
    },
    /// The destination MAC is a multicast or broadcast address.
    #[error("dst-mac {0} is a group (multicast or broadcast) address; a neighbour is one host")]
    GroupDst(String),
    /// The source MAC is a multicast or broadcast address.
    #[error(
        "src-mac {0} is a group (multicast or broadcast) address; a port's address is unicast"
    )]
    GroupSrc(String),
    /// The next hop appeared on an earlier line.
    #[error("duplicate next hop {next_hop} (first on line {first})")]
    Duplicate {
        /// The next hop.
        next_hop: NextHop,
        /// Line of its first entry.
        first: usize,
    },
}

/// A neighbour file that cannot be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum NeighborsError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error("{path}: not UTF-8 text")]
    NotText {
        /// The file.
        path: String,
    },
    /// A line is wrong.
    #[error("{path}:{line}: {error}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        error: NeighborLineError,
    },
}

impl Neighbors {
    /// Parse a neighbour file's text; `path` only names it in errors. A
    /// UTF-8 byte-order mark at the start is skipped.
    ///
    /// # Errors
    /// [`NeighborsError::Line`] for the first bad line.
    pub fn parse(text: &str, path: &str) -> Result<Neighbors, NeighborsError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut entries: HashMap<NextHop, Neighbor> = HashMap::new();
        let mut first_line: HashMap<NextHop, usize> = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let body = raw.split('#').next().unwrap_or("");
            let fields: Vec<&str> = body.split_whitespace().collect();
            if fields.is_empty() {
                continue;
            }
            let err = |error| NeighborsError::Line {
                path: path.to_string(),
                line,
                error,
            };
            let (nh, n) = parse_fields(&fields).map_err(err)?;
            if let Some(&first) = first_line.get(&nh) {
                return Err(err(NeighborLineError::Duplicate {
                    next_hop: nh,
                    first,
                }));
            }
            first_line.insert(nh, line);
            entries.insert(nh, n);
        }
        Ok(Neighbors { entries })
    }

    /// Read and parse a neighbour file.
    ///
    /// # Errors
    /// The file cannot be read, is not text, or has a bad line.
    pub fn load(path: &Path) -> Result<Neighbors, NeighborsError> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| NeighborsError::Io {
            path: name.clone(),
            source,
        })?;
        let text =
            String::from_utf8(bytes).map_err(|_| NeighborsError::NotText { path: name.clone() })?;
        Neighbors::parse(&text, &name)
    }

    /// Add or replace the entry of `next_hop`.
    pub fn insert(&mut self, next_hop: NextHop, n: Neighbor) -> Option<Neighbor> {
        self.entries.insert(next_hop, n)
    }

    /// The entry of `next_hop`.
    pub fn get(&self, next_hop: NextHop) -> Option<&Neighbor> {
        self.entries.get(&next_hop)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, in next-hop order.
    pub fn sorted(&self) -> Vec<(NextHop, Neighbor)> {
        let mut v: Vec<_> = self.entries.iter().map(|(&k, &n)| (k, n)).collect();
        v.sort_unstable_by_key(|e| e.0);
        v
    }

    /// Every output port, sorted, once each.
    pub fn ports(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self.entries.values().map(|n| n.port).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn parse_fields(f: &[&str]) -> Result<(NextHop, Neighbor), NeighborLineError> {
    let [nh, port, dst, src] = f else {
        return Err(NeighborLineError::FieldCount(f.len()));
    };
    let next_hop = nh
        .parse::<NextHop>()
        .ok()
        .filter(|&v| v != NO_ROUTE)
        .ok_or_else(|| NeighborLineError::NextHop(nh.to_string()))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| NeighborLineError::Port(port.to_string()))?;
    let mac = |which: &'static str, text: &str| {
        text.parse::<MacAddr>().map_err(|_| NeighborLineError::Mac {
            which,
            text: text.to_string(),
        })
    };
    let dst_mac = mac("dst-mac", dst)?;
    let src_mac = mac("src-mac", src)?;
    if dst_mac.is_multicast() {
        return Err(NeighborLineError::GroupDst(dst_mac.to_string()));
    }
    if src_mac.is_multicast() {
        return Err(NeighborLineError::GroupSrc(src_mac.to_string()));
    }
    Ok((
        next_hop,
        Neighbor {
            port,
            dst_mac: dst_mac.octets(),
            src_mac: src_mac.octets(),
        },
    ))
}

impl fmt::Display for Neighbor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "port {} dst {} src {}",
            self.port,
            MacAddr::from(self.dst_mac),
            MacAddr::from(self.src_mac)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let n = Neighbors::parse(
            "\u{feff}1 1 02:00:00:00:01:01 02:00:00:00:00:01\n",
            "nb.txt",
        )
        .unwrap();
        assert_eq!(n.len(), 1);
        assert_eq!(n.get(1).map(|e| e.port), Some(1));
    }

    #[test]
    fn parses_entries_comments_and_blank_lines() {
        let text = "# nh port dst src\n\n1 1 02:00:00:00:01:01 02:00:00:00:00:01\n\
                    7\t3\t02-00-00-00-07-01\t02:00:00:00:00:03 # trailing comment\n";
        let n = Neighbors::parse(text, "nb.txt").unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(
            n.get(7),
            Some(&Neighbor {
                port: 3,
                dst_mac: [2, 0, 0, 0, 7, 1],
                src_mac: [2, 0, 0, 0, 0, 3],
            })
        );
        assert_eq!(n.ports(), [1, 3]);
        assert_eq!(n.sorted()[0].0, 1);
    }

    #[test]
    fn bad_lines_are_refused_with_file_line_and_reason() {
        let cases = [
            ("1 1 02:00:00:00:01:01\n", "nb:1: expected 4 fields"),
            (
                "x 1 02:00:00:00:01:01 02:00:00:00:00:01\n",
                "nb:1: next hop 'x'",
            ),
            (
                "4294967295 1 02:00:00:00:01:01 02:00:00:00:00:01\n",
                "nb:1: next hop '4294967295'",
            ),
            (
                "\n1 65536 02:00:00:00:01:01 02:00:00:00:00:01\n",
                "nb:2: port '65536'",
            ),
            (
                "1 1 02:00:00:00:01 02:00:00:00:00:01\n",
                "nb:1: dst-mac '02:00:00:00:01'",
            ),
            (
                "1 1 02:00:00:00:01:01 zz:00:00:00:00:01\n",
                "nb:1: src-mac 'zz:00:00:00:00:01'",
            ),
            (
                "1 1 ff:ff:ff:ff:ff:ff 02:00:00:00:00:01\n",
                "nb:1: dst-mac ff:ff:ff:ff:ff:ff is a group",
            ),
            (
                "1 1 02:00:00:00:01:01 01:00:5e:00:00:01\n",
                "nb:1: src-mac 01:00:5e:00:00:01 is a group",
            ),
            (
                "1 1 02:00:00:00:01:01 02:00:00:00:00:01\n\
                 1 2 02:00:00:00:01:02 02:00:00:00:00:02\n",
                "nb:2: duplicate next hop 1 (first on line 1)",
            ),
        ];
        for (text, want) in cases {
            let e = Neighbors::parse(text, "nb").unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: got {e:?}, want {want:?}");
        }
    }

    #[test]
    fn missing_and_binary_files_are_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("absent");
        assert!(Neighbors::load(&p)
            .unwrap_err()
            .to_string()
            .starts_with(&p.display().to_string()));
        let b = dir.path().join("bin");
        std::fs::write(&b, [0xff, 0xfe, 0x00]).unwrap();
        assert!(Neighbors::load(&b)
            .unwrap_err()
            .to_string()
            .ends_with("not UTF-8 text"));
    }
}
