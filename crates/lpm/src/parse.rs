//! Route files and BGP update streams (untrusted text: typed errors with
//! line numbers, never a panic).
//!
//! Route file: one `prefix/len next-hop` per line, fields separated by any
//! whitespace (spaces or tabs); IPv4 and IPv6 lines may be mixed; blank
//! lines and everything after `#` are ignored. A next hop is a decimal
//! `u32` or a dotted-quad IPv4 address (read as its 32-bit value); the value
//! `4294967295` (`255.255.255.255`) is reserved ([`NO_ROUTE`]). When every
//! next hop of a file is a dotted quad, [`RouteFile::next_hops`] says so,
//! and the table keeps it to print them back the same way. A prefix may
//! appear on one line only: a second line for it is an error naming both
//! lines ([`LineError::DuplicatePrefix`]).
//! With [`NextHopMode::Asn`] the second field is an origin AS number and the
//! next hop is `asn % 250 + 1` (the convention of `DATA.md` for the
//! RouteViews `prefix/len<TAB>asn` tables).
//!
//! Update stream: `time a|w prefix/len [next-hop]` per line (`time` is a
//! decimal integer; the next hop is required for `a` and optional for `w`).
//!
//! A prefix must have no bits set after its length (`10.0.0.1/8` is an
//! error, not silently masked).

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use crate::addr::{NextHop, Prefix, Prefix4, Prefix6, NO_ROUTE};

/// An IPv4 or IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnyPrefix {
    /// IPv4.
    V4(Prefix4),
    /// IPv6.
    V6(Prefix6),
}

impl fmt::Display for AnyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyPrefix::V4(p) => p.fmt(f),
            AnyPrefix::V6(p) => p.fmt(f),
        }
    }
}

/// How the second field of a route line becomes a next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NextHopMode {
    /// The field is the next hop (decimal or dotted quad).
    #[default]
    Raw,
    /// The field is an origin AS number; next hop = `asn % 250 + 1`.
    Asn,
}

/// What was wrong with one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// A required field is absent.
    #[error("missing {0}")]
    MissingField(&'static str),
    /// The prefix has no `/len`.
    #[error("prefix {0:?} has no /length")]
    MissingLength(String),
    /// The address part is neither IPv4 nor IPv6.
    #[error("bad address {0:?}")]
    BadAddress(String),
    /// The length is not a number or exceeds the family's width.
    #[error("bad prefix length {0:?}")]
    BadLength(String),
    /// The address has bits set after the prefix length.
    #[error("prefix {0:?} has bits set after its length")]
    HostBitsSet(String),
    /// The next hop is not a `u32` or dotted quad, or is the reserved value.
    #[error("bad next hop {0:?} (a decimal below 4294967295 or a dotted quad other than 255.255.255.255)")]
    BadNextHop(String),
    /// The AS number is not a decimal `u32`.
    #[error("bad AS number {0:?}")]
    BadAsn(String),
    /// The update time is not a decimal integer.
    #[error("bad time {0:?}")]
    BadTime(String),
    /// The update action is not `a` or `w`.
    #[error("bad action {0:?} (expected a or w)")]
    BadAction(String),
    /// More fields than the format has.
    #[error("unexpected trailing field {0:?}")]
    TrailingField(String),
    /// The line is not UTF-8.
    #[error("line is not UTF-8")]
    NotUtf8,
    /// A route file names the prefix a second time.
    #[error("duplicate prefix {prefix} (first defined on line {first_line})")]
    DuplicatePrefix {
        /// The prefix (canonical form: `2001:DB8::/32` reads `2001:db8::/32`).
        prefix: String,
        /// 1-based line of its first definition.
        first_line: usize,
    },
}

/// A line error with its 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub error: LineError,
}

/// An error reading a routes or updates file: names the file (and the line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read (or decompressed).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A gzip input expands past the decompression limit.
    #[error(
        "{path}: decompresses to more than {limit} bytes (a gzip bomb?); raise the limit with --max-decompressed"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// A line is malformed (one location, one reason: the line error is
    /// not repeated as a cause).
    #[error("{path}:{line}: {error}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        error: LineError,
    },
    /// A route file names a prefix twice (both locations).
    #[error("{path}:{line}: duplicate prefix {prefix} (first defined at {path}:{first_line})")]
    DuplicatePrefix {
        /// The file.
        path: PathBuf,
        /// The prefix.
        prefix: String,
        /// 1-based line of the first definition.
        first_line: usize,
        /// 1-based line of the second.
        line: usize,
    },
}

impl LoadError {
    fn parse(path: &Path, e: ParseError) -> LoadError {
        let path = path.to_path_buf();
        match e.error {
            LineError::DuplicatePrefix { prefix, first_line } => LoadError::DuplicatePrefix {
                path,
                prefix,
                first_line,
                line: e.line,
            },
            error => LoadError::Parse {
                path,
                line: e.line,
                error,
            },
        }
    }
}

/// Parse a prefix `addr/len` (IPv4 or IPv6).
pub fn parse_prefix(s: &str) -> Result<AnyPrefix, LineError> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| LineError::MissingLength(shown(s)))?;
    let len: u8 = l.parse().map_err(|_| LineError::BadLength(shown(l)))?;
    if let Ok(v4) = a.parse::<Ipv4Addr>() {
        if len > 32 {
            return Err(LineError::BadLength(shown(l)));
        }
        Prefix::new_exact(u32::from(v4), len)
            .map(AnyPrefix::V4)
            .ok_or_else(|| LineError::HostBitsSet(shown(s)))
    } else if let Ok(v6) = a.parse::<Ipv6Addr>() {
        if len > 128 {
            return Err(LineError::BadLength(shown(l)));
        }
        Prefix::new_exact(u128::from(v6), len)
            .map(AnyPrefix::V6)
            .ok_or_else(|| LineError::HostBitsSet(shown(s)))
    } else {
        Err(LineError::BadAddress(shown(a)))
    }
}

/// Parse a next hop: decimal `u32` or dotted quad, never [`NO_ROUTE`].
pub fn parse_next_hop(s: &str) -> Result<NextHop, LineError> {
    parse_next_hop_form(s).map(|(v, _)| v)
}

/// [`parse_next_hop`], and how it was written.
fn parse_next_hop_form(s: &str) -> Result<(NextHop, NextHopForm), LineError> {
    let (v, form) = if let Ok(n) = s.parse::<u32>() {
        (n, NextHopForm::Integer)
    } else if let Ok(a) = s.parse::<Ipv4Addr>() {
        (u32::from(a), NextHopForm::Ipv4)
    } else {
        return Err(LineError::BadNextHop(shown(s)));
    };
    if v == NO_ROUTE {
        return Err(LineError::BadNextHop(shown(s)));
    }
    Ok((v, form))
}

/// How a route file wrote its next hops, so that lookups print them back
/// the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum NextHopForm {
    /// Decimal integers (also AS-derived next hops, and files that mix
    /// integers and dotted quads).
    #[default]
    Integer,
    /// Every next hop was a dotted-quad IPv4 address.
    Ipv4,
}

impl NextHopForm {
    /// `nh` written in this form (`192.0.2.1` or `3221225985`).
    pub fn show(self, nh: NextHop) -> impl fmt::Display {
        struct Show(NextHopForm, NextHop);
        impl fmt::Display for Show {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    NextHopForm::Integer => self.1.fmt(f),
                    NextHopForm::Ipv4 => Ipv4Addr::from(self.1).fmt(f),
                }
            }
        }
        Show(self, nh)
    }
}

/// The next hop the RouteViews tables get from an origin AS: `asn % 250 + 1`.
pub fn asn_next_hop(asn: u32) -> NextHop {
    asn % 250 + 1
}

/// Parse an IPv4 or IPv6 address (for lookups).
pub fn parse_addr(s: &str) -> Result<AnyAddr, LineError> {
    if let Ok(a) = s.parse::<Ipv4Addr>() {
        Ok(AnyAddr::V4(u32::from(a)))
    } else if let Ok(a) = s.parse::<Ipv6Addr>() {
        Ok(AnyAddr::V6(u128::from(a)))
    } else {
        Err(LineError::BadAddress(shown(s)))
    }
}

/// An IPv4 or IPv6 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnyAddr {
    /// IPv4.
    V4(u32),
    /// IPv6.
    V6(u128),
}

/// Routes of a route file, split by family, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteList {
    /// IPv4 routes (a parsed file names each prefix once; where a list
    /// built otherwise repeats one, a table built from it keeps the later).
    pub v4: Vec<(Prefix4, NextHop)>,
    /// IPv6 routes.
    pub v6: Vec<(Prefix6, NextHop)>,
}

impl RouteList {
    /// Number of routes of both families.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Most characters of an offending field an error message repeats.
const SHOWN_CHARS: usize = 64;

/// A field for an error message: itself, or its first [`SHOWN_CHARS`]
/// characters and an ellipsis (a line of a hostile file can be gigabytes).
fn shown(field: &str) -> String {
    match field.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => format!("{}...", &field[..i]),
        None => field.to_string(),
    }
}

fn content(line: &str) -> &str {
    match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
}

/// The lines of a text file with their 1-based numbers, `\r\n` or `\n`
/// ended; a UTF-8 byte-order mark at the start is skipped.
fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, Result<&str, ParseError>)> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    bytes.split(|&b| b == b'\n').enumerate().map(|(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        (
            i + 1,
            std::str::from_utf8(l).map(content).map_err(|_| ParseError {
                line: i + 1,
                error: LineError::NotUtf8,
            }),
        )
    })
}

/// A route file's routes and how it wrote their next hops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteFile {
    /// The routes, each prefix once.
    pub routes: RouteList,
    /// [`NextHopForm::Ipv4`] when the file has routes and every next hop is
    /// a dotted quad, else [`NextHopForm::Integer`].
    pub next_hops: NextHopForm,
}

fn parse_route_line(
    line: &str,
    mode: NextHopMode,
) -> Result<Option<(AnyPrefix, NextHop, NextHopForm)>, LineError> {
    let mut f = line.split_whitespace();
    let Some(p) = f.next() else {
        return Ok(None);
    };
    let prefix = parse_prefix(p)?;
    let nh = f.next().ok_or(LineError::MissingField("next hop"))?;
    let (nh, form) = match mode {
        NextHopMode::Raw => parse_next_hop_form(nh)?,
        NextHopMode::Asn => (
            asn_next_hop(nh.parse().map_err(|_| LineError::BadAsn(shown(nh)))?),
            NextHopForm::Integer,
        ),
    };
    if let Some(extra) = f.next() {
        return Err(LineError::TrailingField(shown(extra)));
    }
    Ok(Some((prefix, nh, form)))
}

/// Parse a route file's bytes; a prefix on two lines is an error
/// ([`LineError::DuplicatePrefix`] at the second).
pub fn parse_route_file(bytes: &[u8], mode: NextHopMode) -> Result<RouteFile, ParseError> {
    let mut out = RouteList::default();
    let mut first_line: HashMap<AnyPrefix, usize> = HashMap::new();
    let mut all_ipv4 = true;
    for (line, text) in lines(bytes) {
        let Some((prefix, nh, form)) =
            parse_route_line(text?, mode).map_err(|error| ParseError { line, error })?
        else {
            continue;
        };
        if let Some(&first_line) = first_line.get(&prefix) {
            return Err(ParseError {
                line,
                error: LineError::DuplicatePrefix {
                    prefix: prefix.to_string(),
                    first_line,
                },
            });
        }
        first_line.insert(prefix, line);
        all_ipv4 &= form == NextHopForm::Ipv4;
        match prefix {
            AnyPrefix::V4(p) => out.v4.push((p, nh)),
            AnyPrefix::V6(p) => out.v6.push((p, nh)),
        }
    }
    let next_hops = if all_ipv4 && !out.is_empty() {
        NextHopForm::Ipv4
    } else {
        NextHopForm::Integer
    };
    Ok(RouteFile {
        routes: out,
        next_hops,
    })
}

/// Parse a route file's bytes ([`parse_route_file`] without the next-hop
/// form).
pub fn parse_routes(bytes: &[u8], mode: NextHopMode) -> Result<RouteList, ParseError> {
    parse_route_file(bytes, mode).map(|f| f.routes)
}

/// One BGP update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    /// The time field (seconds, as written).
    pub time: u64,
    /// What to do.
    pub kind: UpdateKind,
    /// Which prefix.
    pub prefix: AnyPrefix,
}

/// Announce or withdraw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    /// Announce (insert or replace) with this next hop.
    Announce(NextHop),
    /// Withdraw (a withdraw of an absent prefix changes nothing).
    Withdraw,
}

fn parse_update_line(line: &str) -> Result<Option<Update>, LineError> {
    let mut f = line.split_whitespace();
    let Some(t) = f.next() else {
        return Ok(None);
    };
    let time = t.parse().map_err(|_| LineError::BadTime(shown(t)))?;
    let action = f.next().ok_or(LineError::MissingField("action"))?;
    let prefix = parse_prefix(f.next().ok_or(LineError::MissingField("prefix"))?)?;
    let nh = f.next();
    let kind = match action {
        "a" | "A" => UpdateKind::Announce(parse_next_hop(
            nh.ok_or(LineError::MissingField("next hop"))?,
        )?),
        "w" | "W" => {
            if let Some(nh) = nh {
                // The next hop of a withdraw is informational (LINX writes
                // 0.0.0.0) but must still be well formed.
                if nh.parse::<u32>().is_err() && nh.parse::<Ipv4Addr>().is_err() {
                    return Err(LineError::BadNextHop(shown(nh)));
                }
            }
            UpdateKind::Withdraw
        }
        other => return Err(LineError::BadAction(shown(other))),
    };
    if let Some(extra) = f.next() {
        return Err(LineError::TrailingField(shown(extra)));
    }
    Ok(Some(Update { time, kind, prefix }))
}

/// Parse an update stream's bytes.
pub fn parse_updates(bytes: &[u8]) -> Result<Vec<Update>, ParseError> {
    let mut out = Vec::new();
    for (line, text) in lines(bytes) {
        if let Some(u) = parse_update_line(text?).map_err(|error| ParseError { line, error })? {
            out.push(u);
        }
    }
    Ok(out)
}

/// The most bytes a gzip input may expand to unless the caller raises it
/// (`--max-decompressed` on the CLI): 1 GiB, about ten times a full IPv4
/// plus IPv6 routing table as text.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 1 << 30;

/// Read a file, decompressing it when it starts with the gzip magic, with
/// [`DEFAULT_MAX_DECOMPRESSED`] as the limit.
pub fn read_maybe_gz(path: &Path) -> Result<Vec<u8>, LoadError> {
    read_maybe_gz_limited(path, DEFAULT_MAX_DECOMPRESSED)
}

/// Read a file, decompressing it when it starts with the gzip magic; a
/// gzip input that expands past `max_decompressed` bytes is refused
/// ([`LoadError::TooLarge`]) after reading at most one byte more, so a
/// bomb never fills memory.
pub fn read_maybe_gz_limited(path: &Path, max_decompressed: u64) -> Result<Vec<u8>, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .take(max_decompressed.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(io)?;
        if out.len() as u64 > max_decompressed {
            return Err(LoadError::TooLarge {
                path: path.to_path_buf(),
                limit: max_decompressed,
            });
        }
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Load a route file (plain or gzip) with the form of its next hops.
pub fn load_route_file(path: &Path, mode: NextHopMode) -> Result<RouteFile, LoadError> {
    load_route_file_limited(path, mode, DEFAULT_MAX_DECOMPRESSED)
}

/// [`load_route_file`] with a limit on the decompressed size.
pub fn load_route_file_limited(
    path: &Path,
    mode: NextHopMode,
    max_decompressed: u64,
) -> Result<RouteFile, LoadError> {
    let bytes = read_maybe_gz_limited(path, max_decompressed)?;
    parse_route_file(&bytes, mode).map_err(|e| LoadError::parse(path, e))
}

/// Load a route file (plain or gzip).
pub fn load_routes(path: &Path, mode: NextHopMode) -> Result<RouteList, LoadError> {
    load_route_file(path, mode).map(|f| f.routes)
}

/// Load an update stream (plain or gzip).
pub fn load_updates(path: &Path) -> Result<Vec<Update>, LoadError> {
    load_updates_limited(path, DEFAULT_MAX_DECOMPRESSED)
}

/// [`load_updates`] with a limit on the decompressed size.
pub fn load_updates_limited(path: &Path, max_decompressed: u64) -> Result<Vec<Update>, LoadError> {
    let bytes = read_maybe_gz_limited(path, max_decompressed)?;
    parse_updates(&bytes).map_err(|e| LoadError::parse(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_lines_mix_families_tabs_spaces_and_comments() {
        let text = b"# header\n10.0.0.0/8 1\n2001:db8::/32\t7 # doc\n\n  0.0.0.0/0   9\r\n192.168.1.1/32 10.0.0.1\n";
        let r = parse_routes(text, NextHopMode::Raw).unwrap();
        assert_eq!(r.v4.len(), 3);
        assert_eq!(r.v6.len(), 1);
        assert_eq!(r.v4[0].1, 1);
        assert_eq!(r.v4[1].0.len(), 0);
        assert_eq!(r.v4[2].1, 0x0A00_0001);
        assert_eq!(r.v6[0].1, 7);
    }

    #[test]
    fn asn_mode_maps_asn_to_next_hop() {
        let r = parse_routes(b"1.0.0.0/24\t15169\n", NextHopMode::Asn).unwrap();
        assert_eq!(r.v4[0].1, 15169 % 250 + 1);
        let e = parse_routes(b"1.0.0.0/24\tAS1\n", NextHopMode::Asn).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(matches!(e.error, LineError::BadAsn(_)));
    }

    #[test]
    fn malformed_route_lines_report_line_and_reason() {
        let cases: &[(&[u8], LineError)] = &[
            (b"10.0.0.0 1", LineError::MissingLength("10.0.0.0".into())),
            (b"10.0.0.0/33 1", LineError::BadLength("33".into())),
            (b"::/129 1", LineError::BadLength("129".into())),
            (b"10.0.0.1/8 1", LineError::HostBitsSet("10.0.0.1/8".into())),
            (b"10.0.0.0/8", LineError::MissingField("next hop")),
            (b"10.0.0.0/8 x", LineError::BadNextHop("x".into())),
            (
                b"10.0.0.0/8 4294967295",
                LineError::BadNextHop("4294967295".into()),
            ),
            (b"10.0.0.0/8 1 2", LineError::TrailingField("2".into())),
            (b"10.0.0/8 1", LineError::BadAddress("10.0.0".into())),
            (b"10.0.0.0/x 1", LineError::BadLength("x".into())),
            (b"\xff", LineError::NotUtf8),
        ];
        for (text, want) in cases {
            let mut t = b"1.0.0.0/8 1\n".to_vec();
            t.extend_from_slice(text);
            let e = parse_routes(&t, NextHopMode::Raw).unwrap_err();
            assert_eq!(e.line, 2, "{:?}", String::from_utf8_lossy(text));
            assert_eq!(&e.error, want);
        }
    }

    #[test]
    fn update_lines_parse_and_reject_bad_fields() {
        let u = parse_updates(b"1418774413 w 202.70.88.0/21 0.0.0.0\n1418774413 a 202.70.88.0/21 195.66.226.74\n5 w 2001:db8::/32\n").unwrap();
        assert_eq!(u.len(), 3);
        assert_eq!(u[0].kind, UpdateKind::Withdraw);
        assert_eq!(
            u[1].kind,
            UpdateKind::Announce(u32::from(Ipv4Addr::new(195, 66, 226, 74)))
        );
        assert!(matches!(u[2].prefix, AnyPrefix::V6(_)));
        type Check = fn(&LineError) -> bool;
        let bad: &[(&[u8], Check)] = &[
            (b"x a 1.0.0.0/8 1", |e| matches!(e, LineError::BadTime(_))),
            (b"1 z 1.0.0.0/8 1", |e| matches!(e, LineError::BadAction(_))),
            (b"1 a 1.0.0.0/8", |e| {
                matches!(e, LineError::MissingField("next hop"))
            }),
            (b"1 a", |e| matches!(e, LineError::MissingField("prefix"))),
            (b"1", |e| matches!(e, LineError::MissingField("action"))),
            (b"1 w 1.0.0.0/8 zz", |e| {
                matches!(e, LineError::BadNextHop(_))
            }),
            (b"1 a 1.0.0.0/8 1 1", |e| {
                matches!(e, LineError::TrailingField(_))
            }),
        ];
        for (text, ok) in bad {
            let e = parse_updates(text).unwrap_err();
            assert_eq!(e.line, 1);
            assert!(ok(&e.error), "{:?}: {:?}", String::from_utf8_lossy(text), e);
        }
    }

    #[test]
    fn duplicate_prefix_is_refused_naming_both_lines() {
        let text = b"10.0.0.0/8 1\n2001:db8::/32 2\n# x\n10.0.0.0/8 1\n";
        let e = parse_routes(text, NextHopMode::Raw).unwrap_err();
        assert_eq!(e.line, 4);
        assert_eq!(
            e.error,
            LineError::DuplicatePrefix {
                prefix: "10.0.0.0/8".into(),
                first_line: 1
            }
        );
        let e = parse_routes(b"2001:db8::/32 1\n2001:db8::/32 2\n", NextHopMode::Asn).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(matches!(
            e.error,
            LineError::DuplicatePrefix { first_line: 1, .. }
        ));
        // The same address with another length is another prefix.
        assert!(parse_routes(b"10.0.0.0/8 1\n10.0.0.0/9 1\n", NextHopMode::Raw).is_ok());
    }

    #[test]
    fn load_errors_name_one_location_and_one_reason() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e1.txt");
        std::fs::write(&p, "10.0.0.0/8 1\n10.0.0.1/8 2\n").unwrap();
        let e = load_routes(&p, NextHopMode::Raw).unwrap_err();
        let msg = e.to_string();
        assert_eq!(
            msg,
            format!(
                "{}:2: prefix \"10.0.0.1/8\" has bits set after its length",
                p.display()
            )
        );
        assert!(std::error::Error::source(&e).is_none());
        std::fs::write(&p, "10.0.0.0/8 1\n\n10.0.0.0/8 2\n").unwrap();
        let e = load_routes(&p, NextHopMode::Raw).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{0}:3: duplicate prefix 10.0.0.0/8 (first defined at {0}:1)",
                p.display()
            )
        );
        std::fs::write(&p, "1 a 10.0.0.0/8\n").unwrap();
        let e = load_updates(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:1: missing next hop", p.display())
        );
    }

    #[test]
    fn next_hop_form_is_ipv4_only_when_every_next_hop_is_a_dotted_quad() {
        let form = |t: &[u8], m| parse_route_file(t, m).unwrap().next_hops;
        assert_eq!(
            form(b"10.0.0.0/8 192.0.2.1\n::/0 0.0.0.7\n", NextHopMode::Raw),
            NextHopForm::Ipv4
        );
        assert_eq!(
            form(b"10.0.0.0/8 192.0.2.1\n::/0 7\n", NextHopMode::Raw),
            NextHopForm::Integer
        );
        assert_eq!(
            form(b"10.0.0.0/8 7\n", NextHopMode::Raw),
            NextHopForm::Integer
        );
        assert_eq!(form(b"# none\n", NextHopMode::Raw), NextHopForm::Integer);
        assert_eq!(
            form(b"10.0.0.0/8 65000\n", NextHopMode::Asn),
            NextHopForm::Integer
        );
        assert_eq!(NextHopForm::Ipv4.show(0xC000_0201).to_string(), "192.0.2.1");
        assert_eq!(
            NextHopForm::Integer.show(0xC000_0201).to_string(),
            "3221225985"
        );
    }

    #[test]
    fn addresses_parse_for_both_families() {
        assert_eq!(parse_addr("1.2.3.4").unwrap(), AnyAddr::V4(0x0102_0304));
        assert_eq!(parse_addr("::1").unwrap(), AnyAddr::V6(1));
        assert!(parse_addr("1.2.3").is_err());
    }

    #[test]
    fn gzip_bomb_is_refused_past_the_limit() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bomb.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..50 {
            gz.write_all(&zeros).unwrap();
        }
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        let err = load_route_file_limited(&path, NextHopMode::Raw, 1 << 20).unwrap_err();
        assert!(
            matches!(err, LoadError::TooLarge { limit, .. } if limit == 1 << 20),
            "{err}"
        );
        assert!(err.to_string().contains("--max-decompressed"), "{err}");
        let err = load_updates_limited(&path, 4096).unwrap_err();
        assert!(matches!(err, LoadError::TooLarge { .. }), "{err}");
        // Exactly at the limit is accepted (and then parsed: zeros are not text).
        let small = dir.path().join("ok.txt.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"10.0.0.0/8 1\n").unwrap();
        std::fs::write(&small, gz.finish().unwrap()).unwrap();
        let f = load_route_file_limited(&small, NextHopMode::Raw, 13).unwrap();
        assert_eq!(f.routes.v4.len(), 1);
        assert!(load_route_file_limited(&small, NextHopMode::Raw, 12).is_err());
    }

    #[test]
    fn error_messages_shorten_long_fields() {
        let line = format!("{} 1\n", "9".repeat(100_000));
        let e = parse_routes(line.as_bytes(), NextHopMode::Raw).unwrap_err();
        let msg = e.to_string();
        assert!(msg.len() < 200 && msg.contains("..."), "{msg}");
        assert_eq!(shown("short"), "short");
    }

    #[test]
    fn a_byte_order_mark_is_skipped_by_the_route_and_update_parsers() {
        let r = parse_routes(b"\xef\xbb\xbf10.0.0.0/8 1\n", NextHopMode::Raw).unwrap();
        assert_eq!(r.v4.len(), 1);
        let u = parse_updates(b"\xef\xbb\xbf1 a 10.0.0.0/8 2\n").unwrap();
        assert_eq!(u.len(), 1);
        // Line numbers still count the first line as 1.
        let e = parse_routes(b"\xef\xbb\xbfnope 1\n", NextHopMode::Raw).unwrap_err();
        assert_eq!(e.line, 1);
    }
}
