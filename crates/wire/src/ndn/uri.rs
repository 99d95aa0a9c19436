//! The NDN URI scheme: parsing and canonical printing of names.
//!
//! Rules (NDN packet format v0.3 "NDN URI Scheme" and naming conventions
//! rev. 3) — see the module docs of [`crate::ndn`] for the full list.

use std::fmt;

use super::error::{ParseNameError, ParseNameErrorKind as K};
use super::name::{component_type as ct, Name};
use super::tlv;

/// Whether `b` is printed as itself (RFC 3986 unreserved characters).
#[inline]
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Aliases of the number components (naming conventions rev. 3).
const NUMBER_ALIASES: [(&str, u16); 5] = [
    ("seg", ct::SEGMENT),
    ("off", ct::BYTE_OFFSET),
    ("v", ct::VERSION),
    ("t", ct::TIMESTAMP),
    ("seq", ct::SEQUENCE_NUM),
];

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

fn write_escaped(f: &mut dyn fmt::Write, value: &[u8]) -> fmt::Result {
    if value.iter().all(|&b| b == b'.') {
        for _ in 0..value.len() + 3 {
            f.write_char('.')?;
        }
        return Ok(());
    }
    for &b in value {
        if unreserved(b) {
            f.write_char(b as char)?;
        } else {
            f.write_char('%')?;
            f.write_char(HEX_UPPER[(b >> 4) as usize] as char)?;
            f.write_char(HEX_UPPER[(b & 15) as usize] as char)?;
        }
    }
    Ok(())
}

fn write_hex_lower(f: &mut dyn fmt::Write, value: &[u8]) -> fmt::Result {
    for &b in value {
        f.write_char(HEX_LOWER[(b >> 4) as usize] as char)?;
        f.write_char(HEX_LOWER[(b & 15) as usize] as char)?;
    }
    Ok(())
}

/// Write one component in canonical URI form (without the leading `/`).
pub(crate) fn write_component(f: &mut dyn fmt::Write, typ: u16, value: &[u8]) -> fmt::Result {
    match typ {
        ct::GENERIC => write_escaped(f, value),
        ct::IMPLICIT_SHA256_DIGEST if value.len() == 32 => {
            f.write_str("sha256digest=")?;
            write_hex_lower(f, value)
        }
        ct::PARAMETERS_SHA256_DIGEST if value.len() == 32 => {
            f.write_str("params-sha256=")?;
            write_hex_lower(f, value)
        }
        _ => {
            if let Some((alias, _)) = NUMBER_ALIASES.iter().find(|(_, t)| *t == typ) {
                // Only the shortest NonNegativeInteger prints as a number:
                // `seg=1` parses back to one byte, so a two-byte 00 01 must
                // keep its bytes (`50=%00%01`) to round-trip.
                if let Ok(n) = tlv::read_nni(value) {
                    if tlv::nni_len(n) == value.len() {
                        return write!(f, "{alias}={n}");
                    }
                }
            }
            write!(f, "{typ}=")?;
            write_escaped(f, value)
        }
    }
}

/// Write a whole name (`/` for the empty name).
pub(crate) fn write_name<'a>(
    f: &mut dyn fmt::Write,
    components: impl Iterator<Item = super::ComponentRef<'a>>,
) -> fmt::Result {
    let mut any = false;
    for c in components {
        any = true;
        f.write_char('/')?;
        write_component(f, c.typ(), c.value())?;
    }
    if !any {
        f.write_char('/')?;
    }
    Ok(())
}

fn err(at: usize, kind: K) -> ParseNameError {
    ParseNameError { at, kind }
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode `s` (starting at byte `at` of the URI), applying the
/// periods rule to the text.
fn unescape(s: &str, at: usize) -> Result<Vec<u8>, ParseNameError> {
    let b = s.as_bytes();
    if b.iter().all(|&c| c == b'.') {
        return match b.len() {
            0 => Ok(Vec::new()),
            1 | 2 => Err(err(at, K::DotComponent)),
            n => Ok(vec![b'.'; n - 3]),
        };
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hi = b.get(i + 1).copied().and_then(hex_val);
            let lo = b.get(i + 2).copied().and_then(hex_val);
            match (hi, lo) {
                (Some(h), Some(l)) => out.push(h << 4 | l),
                _ => return Err(err(at + i, K::BadPercentEscape)),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

fn parse_hex32(s: &str, at: usize) -> Result<Vec<u8>, ParseNameError> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return Err(err(at, K::BadDigest));
    }
    b.chunks_exact(2)
        .map(|p| match (hex_val(p[0]), hex_val(p[1])) {
            (Some(h), Some(l)) => Ok(h << 4 | l),
            _ => Err(err(at, K::BadDigest)),
        })
        .collect()
}

fn parse_component(s: &str, at: usize, name: &mut Name) -> Result<(), ParseNameError> {
    let Some(eq) = s.find('=') else {
        let v = unescape(s, at)?;
        return name
            .push_typed(ct::GENERIC, &v)
            .map_err(|_| err(at, K::TooLong));
    };
    let (head, rest) = (&s[..eq], &s[eq + 1..]);
    let vat = at + eq + 1;
    let (typ, value) = if head.bytes().all(|c| c.is_ascii_digit()) && !head.is_empty() {
        let typ = head
            .parse::<u32>()
            .ok()
            .filter(|t| (1..=0xFFFF).contains(t))
            .ok_or_else(|| err(at, K::UnknownType(head.to_string())))? as u16;
        (typ, unescape(rest, vat)?)
    } else if head == "sha256digest" {
        (ct::IMPLICIT_SHA256_DIGEST, parse_hex32(rest, vat)?)
    } else if head == "params-sha256" {
        (ct::PARAMETERS_SHA256_DIGEST, parse_hex32(rest, vat)?)
    } else if let Some(&(_, typ)) = NUMBER_ALIASES.iter().find(|(a, _)| *a == head) {
        if rest.is_empty() || !rest.bytes().all(|c| c.is_ascii_digit()) {
            return Err(err(vat, K::BadNumber(rest.to_string())));
        }
        let n: u64 = rest
            .parse()
            .map_err(|_| err(vat, K::BadNumber(rest.to_string())))?;
        let mut v = Vec::with_capacity(8);
        tlv::write_nni(&mut v, n);
        (typ, v)
    } else {
        return Err(err(at, K::UnknownType(head.to_string())));
    };
    name.push_typed(typ, &value).map_err(|_| {
        if typ == ct::IMPLICIT_SHA256_DIGEST || typ == ct::PARAMETERS_SHA256_DIGEST {
            err(vat, K::BadDigest)
        } else {
            err(at, K::TooLong)
        }
    })
}

/// Parse an NDN URI into a [`Name`].
pub(crate) fn parse_name(uri: &str) -> Result<Name, ParseNameError> {
    let mut pos = 0usize;
    let mut s = uri;
    // Scheme: anything before the first ':' that comes before the first '/'.
    if let Some(colon) = s.find(':') {
        if colon < s.find('/').unwrap_or(usize::MAX) {
            if &s[..colon] != "ndn" {
                return Err(err(0, K::BadScheme));
            }
            pos = colon + 1;
            s = &s[colon + 1..];
        }
    }
    // Authority (`//host`): ignored, as the spec says.
    if let Some(after) = s.strip_prefix("//") {
        let skip = after.find('/').unwrap_or(after.len());
        pos += 2 + skip;
        s = &after[skip..];
    }
    if let Some(rest) = s.strip_prefix('/') {
        pos += 1;
        s = rest;
    }
    let s = s.strip_suffix('/').unwrap_or(s);
    let mut name = Name::new();
    if s.is_empty() {
        return Ok(name);
    }
    for part in s.split('/') {
        if part.is_empty() {
            return Err(err(pos, K::EmptyComponent));
        }
        parse_component(part, pos, &mut name)?;
        pos += part.len() + 1;
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ndn::NameComponent;

    fn round(s: &str) -> String {
        Name::from_uri(s).unwrap().to_string()
    }
    fn kind(s: &str) -> K {
        Name::from_uri(s).unwrap_err().kind
    }

    #[test]
    fn prints_unreserved_bytes_as_themselves_and_escapes_the_rest() {
        assert_eq!(round("/a b/~+/A-Z_0.9"), "/a%20b/~%2B/A-Z_0.9");
        assert_eq!(round("/%e2%82%ac"), "/%E2%82%AC");
        let n = Name::from_components([NameComponent::generic(vec![0u8, 0xFF, b'/', b'='])]);
        assert_eq!(n.to_string(), "/%00%FF%2F%3D");
    }

    #[test]
    fn periods_only_components_carry_three_extra_periods() {
        let n = Name::from_uri("/.../..../.....").unwrap();
        let v: Vec<&[u8]> = n.components().map(|c| c.value()).collect();
        assert_eq!(v, [&b""[..], b".", b".."]);
        assert_eq!(n.to_string(), "/.../..../.....");
        assert_eq!(kind("/a/."), K::DotComponent);
        assert_eq!(kind("/.."), K::DotComponent);
        // An escaped period is an ordinary byte.
        assert_eq!(
            Name::from_uri("/%2E").unwrap().get(0).unwrap().value(),
            b"."
        );
    }

    #[test]
    fn typed_and_convention_components() {
        let n = Name::from_uri("/seg=3/off=4/v=7/t=5/seq=9/32=kw/8=abc/300=x").unwrap();
        let t: Vec<u16> = n.components().map(|c| c.typ()).collect();
        assert_eq!(t, [50, 52, 54, 56, 58, 32, 8, 300]);
        assert_eq!(n.to_string(), "/seg=3/off=4/v=7/t=5/seq=9/32=kw/abc/300=x");
        assert_eq!(n.to_wire()[..5], [7, 29, 50, 1, 3]);
        assert_eq!(round("/v=256"), "/v=256");
        assert_eq!(Name::from_uri("/v=256").unwrap().value(), [54, 2, 1, 0]);
        assert_eq!(round("/50=%00%01"), "/50=%00%01");
        assert_eq!(round("/54=..."), "/54=...");
    }

    #[test]
    fn digest_components_use_lowercase_hex() {
        let up = format!("/sha256digest={}", "AB".repeat(32));
        assert_eq!(round(&up), format!("/sha256digest={}", "ab".repeat(32)));
        let p = format!("/params-sha256={}", "01".repeat(32));
        assert_eq!(round(&p), p);
        assert_eq!(kind("/sha256digest=abcd"), K::BadDigest);
        assert_eq!(kind("/1=abc"), K::BadDigest);
    }

    #[test]
    fn scheme_authority_and_slashes() {
        assert_eq!(round("ndn:/a/b"), "/a/b");
        assert_eq!(round("ndn://host/a"), "/a");
        assert_eq!(round("a/b/"), "/a/b");
        assert_eq!(round("/"), "/");
        assert_eq!(round(""), "/");
        assert_eq!(round("ndn:"), "/");
        assert_eq!(round("/a:b"), "/a%3Ab");
        assert_eq!(kind("http://x/a"), K::BadScheme);
        assert_eq!(kind("/a//b"), K::EmptyComponent);
    }

    #[test]
    fn bad_inputs_say_where() {
        let e = Name::from_uri("/ab/c%4").unwrap_err();
        assert_eq!((e.at, &e.kind), (5, &K::BadPercentEscape));
        assert_eq!(kind("/x=1"), K::UnknownType("x".into()));
        assert_eq!(kind("/0=a"), K::UnknownType("0".into()));
        assert_eq!(kind("/65536=a"), K::UnknownType("65536".into()));
        assert_eq!(kind("/seg=-1"), K::BadNumber("-1".into()));
        assert_eq!(kind("/seg="), K::BadNumber("".into()));
        assert_eq!(
            kind("/seg=18446744073709551616"),
            K::BadNumber("18446744073709551616".into())
        );
        assert!(e.to_string().contains("at byte 5"));
    }
}
