//! The routes file of `nexthop ndn fib build`: one rule per line,
//! `NAME NEXTHOP[,NEXTHOP...]`, NAME in NDN URI form, NEXTHOP a face id
//! with an optional cost (`FACE` or `FACE:COST`); blank lines and `#`
//! comments are skipped.

use std::collections::HashMap;

use nexthop_wire::ndn::Name;
use thiserror::Error;

use crate::name::NameBuf;
use crate::nexthop::NextHop;

/// A line of a routes file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{line}: {reason}")]
pub struct RoutesError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong.
    pub reason: String,
}

/// One rule of a routes file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// 1-based line number.
    pub line: usize,
    /// The name.
    pub name: NameBuf,
    /// Its next hops, in file order.
    pub hops: Vec<NextHop>,
}

fn parse_hop(s: &str) -> Result<NextHop, String> {
    let (f, c) = match s.split_once(':') {
        Some((f, c)) => (f, Some(c)),
        None => (s, None),
    };
    let face = f
        .parse::<u32>()
        .map_err(|_| format!("bad next hop '{s}': face must be a number 0..=4294967295"))?;
    let cost = match c {
        Some(c) => c
            .parse::<u32>()
            .map_err(|_| format!("bad next hop '{s}': cost must be a number 0..=4294967295"))?,
        None => 0,
    };
    Ok(NextHop { face, cost })
}

/// Parse a whole routes file. A name given twice is an error. A UTF-8
/// byte-order mark at the start is skipped (not part of the first name).
pub fn parse_routes(text: &str) -> Result<Vec<Route>, RoutesError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut first: HashMap<Vec<u8>, usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |reason: String| RoutesError { line, reason };
        let l = raw.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let mut it = l.split_whitespace();
        let (Some(uri), Some(hops_s)) = (it.next(), it.next()) else {
            return Err(err("expected NAME NEXTHOP[,NEXTHOP...]".into()));
        };
        if let Some(extra) = it.next() {
            return Err(err(format!("unexpected '{extra}' after the next hops")));
        }
        let name = Name::from_uri(uri).map_err(|e| err(format!("invalid name '{uri}': {e}")))?;
        let name =
            NameBuf::from_name(&name).map_err(|e| err(format!("invalid name '{uri}': {e}")))?;
        let mut hops = Vec::new();
        for h in hops_s.split(',') {
            let hop = parse_hop(h).map_err(err)?;
            if hops.iter().any(|x: &NextHop| x.face == hop.face) {
                return Err(err(format!("face {} appears twice", hop.face)));
            }
            hops.push(hop);
        }
        if let Some(prev) = first.insert(crate::name::NameView::tlv(&name).to_vec(), line) {
            return Err(err(format!(
                "duplicate name '{uri}' (first on line {prev})"
            )));
        }
        out.push(Route { line, name, hops });
    }
    Ok(out)
}

/// Format next hops as the routes file writes them (`FACE` when the cost
/// is 0, else `FACE:COST`), joined by commas.
pub fn format_hops(hops: &[NextHop]) -> String {
    let v: Vec<String> = hops
        .iter()
        .map(|h| {
            if h.cost == 0 {
                h.face.to_string()
            } else {
                format!("{}:{}", h.face, h.cost)
            }
        })
        .collect();
    v.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_name() {
        let r = parse_routes("\u{feff}/a/b 1\n").unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, parse_routes("/a/b 1\n").unwrap()[0].name);
        assert_eq!(r[0].line, 1);
    }

    #[test]
    fn parses_rules_comments_and_costs() {
        let r = parse_routes("# x\n/a/b 1,2:5 # c\n\n/ 3\n").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].line, 2);
        assert_eq!(
            r[0].hops,
            vec![NextHop { face: 1, cost: 0 }, NextHop { face: 2, cost: 5 }]
        );
        assert_eq!(r[1].name, NameBuf::root());
        assert_eq!(format_hops(&r[0].hops), "1,2:5");
    }

    #[test]
    fn malformed_lines_name_their_line() {
        for (text, line) in [
            ("/a 1\n/b\n", 2),
            ("/a x\n", 1),
            ("/a 1,1\n", 1),
            ("\n\n/a 1 2\n", 3),
            ("/a 1\n/a 2\n", 2),
            ("/a 1:\n", 1),
            ("/a 99999999999\n", 1),
        ] {
            assert_eq!(
                parse_routes(text).map(|_| ()).unwrap_err().line,
                line,
                "{text:?}"
            );
        }
    }
}
