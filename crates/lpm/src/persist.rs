//! An IPv4 + IPv6 Bloomfwd table and its file format.
//!
//! The file stores what defines the table (the two configurations and the
//! routes); loading rebuilds the filters, counters and hash tables, so a
//! loaded table always satisfies every invariant of a built one.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! 0   8  magic "NHLPM\0\r\n"
//! 8   4  version (2; version 1 files, identical but without hash code 3, still load)
//! 12  4  flags (bit 0: next hops print as IPv4 addresses, [`NextHopForm::Ipv4`];
//!        other bits 0)
//! 16  8  body length in bytes
//! 24  8  XXH3-64 of the body (seed 0)
//! 32  .. body:
//!        config v4, config v6:
//!          direct_bits u8, fpr f64, filter_hash u8, table_hash u8,
//!          max_expansion_bits u8, level count u8, levels [u8]
//!        IPv4 route count u64, then per route: addr u32, len u8, next hop u32
//!        IPv6 route count u64, then per route: addr u128, len u8, next hop u32
//! ```

use crate::addr::{Address, NextHop, Prefix, NO_ROUTE};
use crate::bloomfwd::{length_counts, BloomfwdControl, Config, ConfigError, GroupKey};
use crate::hash::HashKind;
use crate::parse::{AnyAddr, AnyPrefix, NextHopForm, RouteList, Update, UpdateKind};
use nexthop_wire::cursor::{self, CursorError};

/// File magic.
pub const MAGIC: [u8; 8] = *b"NHLPM\0\r\n";
/// Format version written. Version 2 added hash code 3
/// ([`HashKind::Mix64`], the IPv6 default); the layout is unchanged, so
/// version 1 files still load (where a hash code 3 is malformed).
pub const VERSION: u32 = 2;
/// Oldest version read.
pub const MIN_VERSION: u32 = 1;
const HEADER: usize = 32;
/// Header flag: next hops print as IPv4 addresses ([`NextHopForm::Ipv4`]).
pub const FLAG_IPV4_NEXT_HOPS: u32 = 1;
/// Every flag this build knows.
const KNOWN_FLAGS: u32 = FLAG_IPV4_NEXT_HOPS;

/// Why a table file was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not a nexthop LPM table file.
    #[error("not an LPM table file (bad magic)")]
    BadMagic,
    /// A version this build does not read.
    #[error("unsupported table file version {0} (this build reads {MIN_VERSION}..={VERSION})")]
    UnsupportedVersion(u32),
    /// Unknown flag bits.
    #[error("unsupported flags {0:#x}")]
    UnsupportedFlags(u32),
    /// The file ends early.
    #[error("truncated: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        got: u64,
    },
    /// The body does not match its checksum.
    #[error("checksum mismatch (file corrupt)")]
    ChecksumMismatch,
    /// A field has an impossible value.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// Bytes after the body.
    #[error("{0} bytes of trailing data")]
    TrailingData(u64),
    /// The stored configuration is invalid.
    #[error("bad configuration: {0}")]
    Config(#[from] ConfigError),
}

impl From<CursorError> for DecodeError {
    fn from(e: CursorError) -> Self {
        match e {
            CursorError::Truncated { needed, got } => DecodeError::Truncated {
                needed: needed as u64,
                got: got as u64,
            },
            CursorError::TrailingData(n) => DecodeError::TrailingData(n as u64),
            CursorError::Malformed(what) => DecodeError::Malformed(what),
            _ => DecodeError::Malformed("unreadable field"),
        }
    }
}

/// Statistics of one family's table.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyStats {
    /// Routes.
    pub prefixes: usize,
    /// Routes held by the direct array.
    pub direct_prefixes: usize,
    /// Direct-array bytes.
    pub direct_bytes: usize,
    /// Per-group figures.
    pub groups: Vec<crate::bloomfwd::GroupStats>,
    /// Measured false-positive rate of each group's filter.
    pub measured_fpr: Vec<f64>,
    /// Bytes read by lookups (direct array, sub-masks, filters, tables).
    pub lookup_bytes: usize,
    /// Direct slots refined into sub-masks, and sub-slots refined into
    /// sub-sub-masks (see the crate README).
    pub refined: (usize, usize),
    /// Bytes of the sub-masks and sub-sub-masks.
    pub sub_mask_bytes: usize,
    /// Configuration in force.
    pub config: Config,
}

/// IPv4 and IPv6 Bloomfwd tables together (what `nexthop lpm` stores).
#[derive(Clone, Debug)]
pub struct LpmTable {
    /// IPv4.
    pub v4: BloomfwdControl<u32>,
    /// IPv6.
    pub v6: BloomfwdControl<u128>,
    /// How the route file wrote the next hops (how to print them back);
    /// [`NextHopForm::Integer`] unless set.
    pub next_hops: NextHopForm,
}

/// Default number of DPCPE levels for IPv6. The paper's best was 5
/// (Fig. 7), but its tables stop at /64; on the 2015 RouteViews table
/// (prefixes up to /128) 5 levels expand 27,693 prefixes to ~3 M keys
/// (~280 MB), 12 levels above the /16 direct array to ~43,000 keys (4 MB,
/// lookups no slower: a direct slot's group mask skips most levels).
pub const DEFAULT_V6_LEVELS: usize = 12;

impl LpmTable {
    /// Build with the paper's IPv4 layout and `v6_levels` DPCPE levels.
    pub fn build(routes: &RouteList, v6_levels: usize) -> Result<Self, ConfigError> {
        Self::build_with(
            routes,
            Config::ipv4(),
            Config::ipv6_dpcpe(&routes.v6, v6_levels),
        )
    }

    /// Build with explicit configurations.
    pub fn build_with(routes: &RouteList, v4: Config, v6: Config) -> Result<Self, ConfigError> {
        Ok(LpmTable {
            v4: BloomfwdControl::build(v4, &routes.v4)?,
            v6: BloomfwdControl::build(v6, &routes.v6)?,
            next_hops: NextHopForm::Integer,
        })
    }

    /// [`Self::build_with`], refused with the estimate
    /// ([`ConfigError::TooLarge`]) when the configurations would need more
    /// than `max_memory` bytes for these routes.
    pub fn build_limited(
        routes: &RouteList,
        v4: Config,
        v6: Config,
        max_memory: u64,
    ) -> Result<Self, ConfigError> {
        v4.validate(32)?;
        v6.validate(128)?;
        check_memory(&v4, &routes.v4, &v6, &routes.v6, max_memory)?;
        Self::build_with(routes, v4, v6)
    }

    /// Longest-prefix match of either family.
    pub fn lookup(&self, a: AnyAddr) -> Option<NextHop> {
        match a {
            AnyAddr::V4(a) => self.v4.lookup(a),
            AnyAddr::V6(a) => self.v6.lookup(a),
        }
    }

    /// Apply one update; `false` for a withdraw of an absent prefix.
    pub fn apply(&mut self, u: &Update) -> bool {
        match (u.prefix, u.kind) {
            (AnyPrefix::V4(p), UpdateKind::Announce(nh)) => self.v4.announce(p, nh),
            (AnyPrefix::V4(p), UpdateKind::Withdraw) => self.v4.withdraw(p),
            (AnyPrefix::V6(p), UpdateKind::Announce(nh)) => self.v6.announce(p, nh),
            (AnyPrefix::V6(p), UpdateKind::Withdraw) => self.v6.withdraw(p),
        }
    }

    /// Statistics; the false-positive rates are measured with `samples`
    /// random absent keys per group.
    pub fn stats(&self, samples: usize) -> (FamilyStats, FamilyStats) {
        (
            family_stats(&self.v4, samples),
            family_stats(&self.v6, samples),
        )
    }

    /// Serialise (see the module docs for the layout).
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        put_config(&mut body, self.v4.config());
        put_config(&mut body, self.v6.config());
        put_routes(&mut body, &self.v4.rib().sorted(), 4);
        put_routes(&mut body, &self.v6.rib().sorted(), 16);
        let mut out = Vec::with_capacity(HEADER + body.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let flags = match self.next_hops {
            NextHopForm::Integer => 0,
            NextHopForm::Ipv4 => FLAG_IPV4_NEXT_HOPS,
        };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parse and rebuild; rejects truncated, corrupt and foreign files,
    /// and files whose configuration would need more than
    /// [`DEFAULT_MAX_MEMORY`] to rebuild.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_with_limit(bytes, DEFAULT_MAX_MEMORY)
    }

    /// [`Self::decode`] with a memory limit: the memory the file's
    /// configurations imply for its routes ([`Config::estimate_bytes`]) is
    /// checked against `max_memory` before anything is built.
    pub fn decode_with_limit(bytes: &[u8], max_memory: u64) -> Result<Self, DecodeError> {
        let mut r = cursor::Reader::new(bytes);
        if r.take(8)? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = r.u32()?;
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let flags = r.u32()?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(DecodeError::UnsupportedFlags(flags));
        }
        let len = r.u64()?;
        let sum = r.u64()?;
        let have = r.remaining() as u64;
        if len > have {
            return Err(DecodeError::Truncated {
                needed: (HEADER as u64).saturating_add(len),
                got: bytes.len() as u64,
            });
        }
        if len < have {
            return Err(DecodeError::TrailingData(have - len));
        }
        let body = &bytes[HEADER..];
        if xxhash_rust::xxh3::xxh3_64(body) != sum {
            return Err(DecodeError::ChecksumMismatch);
        }
        let mut r = Reader {
            r: cursor::Reader::new(body),
            version,
        };
        let c4 = r.config()?;
        let c6 = r.config()?;
        c4.validate(32)?;
        c6.validate(128)?;
        let v4 = r.routes::<u32>(4)?;
        let v6 = r.routes::<u128>(16)?;
        r.r.finish()?;
        check_memory(&c4, &v4, &c6, &v6, max_memory)?;
        Ok(LpmTable {
            v4: BloomfwdControl::build(c4, &v4)?,
            v6: BloomfwdControl::build(c6, &v6)?,
            next_hops: if flags & FLAG_IPV4_NEXT_HOPS != 0 {
                NextHopForm::Ipv4
            } else {
                NextHopForm::Integer
            },
        })
    }
}

fn family_stats<A: GroupKey>(t: &BloomfwdControl<A>, samples: usize) -> FamilyStats {
    FamilyStats {
        prefixes: t.rib().len(),
        direct_prefixes: t.direct_prefixes(),
        direct_bytes: t.direct_bytes(),
        groups: t.group_stats(),
        measured_fpr: t.measure_fpr(samples, 0x5eed),
        lookup_bytes: t.table().memory_bytes(),
        refined: (t.table().refined_slots(), t.table().refined_sub_slots()),
        sub_mask_bytes: t.table().sub_mask_bytes(),
        config: t.config().clone(),
    }
}

fn put_config(out: &mut Vec<u8>, c: &Config) {
    out.push(c.direct_bits);
    out.extend_from_slice(&c.fpr.to_le_bytes());
    out.push(c.filter_hash as u8);
    out.push(c.table_hash as u8);
    out.push(c.max_expansion_bits);
    out.push(c.levels.len() as u8);
    out.extend_from_slice(&c.levels);
}

fn put_routes<A: Address>(out: &mut Vec<u8>, routes: &[(Prefix<A>, NextHop)], width: usize) {
    out.extend_from_slice(&(routes.len() as u64).to_le_bytes());
    for (p, nh) in routes {
        out.extend_from_slice(&p.addr().to_u128().to_le_bytes()[..width]);
        out.push(p.len());
        out.extend_from_slice(&nh.to_le_bytes());
    }
}

/// Refuse configurations whose estimated build memory for these routes
/// exceeds `limit`; the estimate otherwise.
fn check_memory(
    c4: &Config,
    v4: &[(Prefix<u32>, NextHop)],
    c6: &Config,
    v6: &[(Prefix<u128>, NextHop)],
    limit: u64,
) -> Result<u128, ConfigError> {
    let bytes = c4
        .estimate_bytes(32, &length_counts(v4))
        .saturating_add(c6.estimate_bytes(128, &length_counts(v6)));
    if bytes > limit as u128 {
        return Err(ConfigError::TooLarge { bytes, limit });
    }
    Ok(bytes)
}

/// The default memory limit of a table build or load (`--max-memory` on
/// the CLI): 4 GiB, many times what the full 2015 IPv4 and IPv6 tables
/// need.
pub const DEFAULT_MAX_MEMORY: u64 = 4 << 30;

/// A table-file reader: the shared cursor and the file's format version.
struct Reader<'a> {
    r: cursor::Reader<'a>,
    /// The file's format version.
    version: u32,
}

impl<'a> Reader<'a> {
    fn hash(&mut self) -> Result<HashKind, DecodeError> {
        match HashKind::from_code(self.r.u8()?) {
            Some(HashKind::Mix64) if self.version < 2 => Err(DecodeError::Malformed(
                "hash code 3 (mix64) in a version 1 file",
            )),
            Some(h) => Ok(h),
            None => Err(DecodeError::Malformed("unknown hash code")),
        }
    }
    fn config(&mut self) -> Result<Config, DecodeError> {
        let direct_bits = self.r.u8()?;
        let fpr = self.r.f64()?;
        let filter_hash = self.hash()?;
        let table_hash = self.hash()?;
        let max_expansion_bits = self.r.u8()?;
        let n = self.r.u8()? as usize;
        let levels = self.r.take(n)?.to_vec();
        Ok(Config {
            direct_bits,
            levels,
            fpr,
            filter_hash,
            table_hash,
            max_expansion_bits,
        })
    }
    fn routes<A: Address>(
        &mut self,
        width: usize,
    ) -> Result<Vec<(Prefix<A>, NextHop)>, DecodeError> {
        let n = self.r.u64()?;
        let n = self.r.count(n, width + 5)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let mut a = [0u8; 16];
            a[..width].copy_from_slice(self.r.take(width)?);
            let addr = A::from_u128(u128::from_le_bytes(a));
            let len = self.r.u8()?;
            let nh = self.r.u32()?;
            if len > A::BITS {
                return Err(DecodeError::Malformed(
                    "prefix length exceeds the address width",
                ));
            }
            let p = Prefix::new_exact(addr, len).ok_or(DecodeError::Malformed(
                "prefix has bits set after its length",
            ))?;
            if nh == NO_ROUTE {
                return Err(DecodeError::Malformed("reserved next hop"));
            }
            out.push((p, nh));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file the fuzzer found (lpm_table_decode, sealed there): an IPv6
    /// configuration with no direct bits and a level at /128 made a group
    /// key's direct slot a shift by 128 bits, which panicked.
    #[test]
    fn a_v6_level_at_128_over_no_direct_bits_decodes_without_a_shift_overflow() {
        let mut b: Vec<u8> = vec![
            0x4e, 0x48, 0x4c, 0x50, 0x4d, 0x00, 0x0d, 0x0a, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x5d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x8b, 0xe9, 0xa6, 0x5e,
            0x85, 0x51, 0x07, 0x69, 0x14, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0xd3, 0x3f, 0x00,
            0x00, 0x10, 0x02, 0x18, 0x20, 0x00, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0xd3, 0x3f,
            0x01, 0x01, 0x10, 0x01, 0x20, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x08, 0x02,
            0x01, 0x09, 0x00, 0x80, 0x02, 0x01, 0x0a, 0x19, 0x01, 0x00, 0x00, 0x0a, 0x01, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x08, 0x02, 0x00, 0x00, 0x00, 0x80, 0x02, 0x01, 0x0a, 0x19,
        ];
        let sum = xxhash_rust::xxh3::xxh3_64(&b[32..]);
        b[24..32].copy_from_slice(&sum.to_le_bytes());
        if let Ok(t) = LpmTable::decode_with_limit(&b, 1 << 30) {
            let again = LpmTable::decode(&t.encode()).unwrap();
            assert_eq!(again.v6.rib().len(), t.v6.rib().len());
        }
    }
    use crate::parse::{parse_routes, NextHopMode};

    /// A header claiming a body of u64::MAX bytes is truncated, not an
    /// overflow (found by the lpm_table_decode fuzz target).
    #[test]
    fn huge_claimed_length_is_truncated_not_an_overflow() {
        let mut b = sample().encode();
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            LpmTable::decode(&b),
            Err(DecodeError::Truncated {
                needed: u64::MAX,
                ..
            })
        ));
    }

    /// `bytes` relabelled as a version 1 file.
    fn as_version_1(bytes: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b
    }

    #[test]
    fn version_1_files_load_unless_they_name_mix64() {
        let routes = parse_routes(b"10.0.0.0/8 2\n2001:db8::/32 6\n", NextHopMode::Raw).unwrap();
        let mut v6 = Config::ipv6_dpcpe(&routes.v6, 4);
        assert_eq!(v6.filter_hash, HashKind::Mix64, "the IPv6 default");
        // What a version 1 build wrote: Murmur3 for IPv6.
        v6.filter_hash = HashKind::Murmur3;
        v6.table_hash = HashKind::Murmur3;
        let old = LpmTable::build_with(&routes, Config::ipv4(), v6).unwrap();
        let u = LpmTable::decode(&as_version_1(&old.encode())).unwrap();
        assert_eq!(u.v6.config().filter_hash, HashKind::Murmur3);
        assert_eq!(u.lookup(AnyAddr::V6(0x2001_0db8_u128 << 96)), Some(6));
        // Mix64 did not exist in version 1.
        let new = LpmTable::build(&routes, 4).unwrap().encode();
        assert_eq!(
            LpmTable::decode(&as_version_1(&new)).unwrap_err(),
            DecodeError::Malformed("hash code 3 (mix64) in a version 1 file")
        );
        assert!(LpmTable::decode(&new).is_ok());
    }

    fn sample() -> LpmTable {
        let routes = parse_routes(
            b"0.0.0.0/0 1\n10.0.0.0/8 2\n10.1.2.0/24 3\n10.1.2.128/25 4\n::/0 5\n2001:db8::/32 6\n2001:db8::1/128 7\n",
            NextHopMode::Raw,
        )
        .unwrap();
        LpmTable::build(&routes, 4).unwrap()
    }

    #[test]
    fn next_hop_form_survives_the_file_and_unknown_flags_are_refused() {
        let mut t = sample();
        assert_eq!(t.next_hops, NextHopForm::Integer);
        let plain = t.encode();
        assert_eq!(&plain[12..16], &0u32.to_le_bytes());
        assert_eq!(
            LpmTable::decode(&plain).unwrap().next_hops,
            NextHopForm::Integer
        );
        t.next_hops = NextHopForm::Ipv4;
        let ip = t.encode();
        assert_eq!(&ip[12..16], &FLAG_IPV4_NEXT_HOPS.to_le_bytes());
        let u = LpmTable::decode(&ip).unwrap();
        assert_eq!(u.next_hops, NextHopForm::Ipv4);
        assert_eq!(u.encode(), ip);
        let mut b = ip.clone();
        b[12..16].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            LpmTable::decode(&b).unwrap_err(),
            DecodeError::UnsupportedFlags(3)
        );
    }

    #[test]
    fn encode_decode_round_trips_lookups() {
        let t = sample();
        let bytes = t.encode();
        let u = LpmTable::decode(&bytes).unwrap();
        for a in [
            AnyAddr::V4(0x0A01_0281),
            AnyAddr::V4(0x0A01_0201),
            AnyAddr::V4(0x0B00_0000),
            AnyAddr::V6(0x2001_0db8_u128 << 96 | 1),
            AnyAddr::V6(0x2001_0db8_u128 << 96 | 2),
            AnyAddr::V6(1),
        ] {
            assert_eq!(t.lookup(a), u.lookup(a));
            assert!(u.lookup(a).is_some());
        }
        assert_eq!(u.encode(), bytes);
    }

    #[test]
    fn truncated_corrupt_and_foreign_files_are_rejected() {
        let bytes = sample().encode();
        for cut in [0, 7, 8, 20, 31, 32, bytes.len() - 1] {
            let e = LpmTable::decode(&bytes[..cut]).unwrap_err();
            assert!(
                matches!(e, DecodeError::Truncated { .. } | DecodeError::BadMagic),
                "cut {cut}: {e:?}"
            );
        }
        let mut b = bytes.clone();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(
            LpmTable::decode(&b).unwrap_err(),
            DecodeError::ChecksumMismatch
        );
        let mut b = bytes.clone();
        b[0] = b'X';
        assert_eq!(LpmTable::decode(&b).unwrap_err(), DecodeError::BadMagic);
        for v in [0u32, 3, u32::MAX] {
            let mut b = bytes.clone();
            b[8..12].copy_from_slice(&v.to_le_bytes());
            assert_eq!(
                LpmTable::decode(&b).unwrap_err(),
                DecodeError::UnsupportedVersion(v)
            );
        }
        let mut b = bytes.clone();
        b.push(0);
        assert_eq!(
            LpmTable::decode(&b).unwrap_err(),
            DecodeError::TrailingData(1)
        );
    }

    #[test]
    fn checksummed_but_invalid_bodies_are_rejected() {
        // Re-checksum a body with a bad prefix length to get past the checksum.
        let t = sample();
        let mut bytes = t.encode();
        let body_start = HEADER;
        // The first IPv4 route's length byte: after two configs and the count.
        let cfg_len = |c: &Config| 1 + 8 + 3 + 1 + c.levels.len();
        let off = body_start + cfg_len(t.v4.config()) + cfg_len(t.v6.config()) + 8 + 4;
        bytes[off] = 40;
        let sum = xxhash_rust::xxh3::xxh3_64(&bytes[HEADER..]);
        bytes[24..32].copy_from_slice(&sum.to_le_bytes());
        assert!(matches!(
            LpmTable::decode(&bytes).unwrap_err(),
            DecodeError::Malformed(_)
        ));
    }

    /// A table file with these configurations and routes, checksummed as
    /// `encode` writes it (what a forger with the format can produce).
    fn forged(
        c4: &Config,
        c6: &Config,
        v4: &[(Prefix<u32>, NextHop)],
        v6: &[(Prefix<u128>, NextHop)],
    ) -> Vec<u8> {
        let mut body = Vec::new();
        put_config(&mut body, c4);
        put_config(&mut body, c6);
        put_routes(&mut body, v4, 4);
        put_routes(&mut body, v6, 16);
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// 100 IPv6 /17 routes, each expanding 2^23-fold into a /40 group.
    fn extreme_expansion() -> Vec<u8> {
        let mut c6 = Config::ipv6(vec![40]);
        c6.max_expansion_bits = 24;
        let v6: Vec<_> = (0..100u128)
            .map(|i| (Prefix::new_exact(i << 111, 17).unwrap(), 1))
            .collect();
        forged(&Config::ipv4(), &c6, &[], &v6)
    }

    /// 64 IPv4 /9 routes with a 2^8-slot direct array, one level at /32
    /// and a 1e-300 false-positive target: 2^23 keys per route, and
    /// filters of ~1,400 bits (plus a u16 counter per bit) per key.
    fn extreme_fpr() -> Vec<u8> {
        let mut c4 = Config::ipv4();
        c4.direct_bits = 8;
        c4.levels = vec![32];
        c4.max_expansion_bits = 24;
        c4.fpr = 1e-300;
        let v4: Vec<_> = (0..64u32)
            .map(|i| (Prefix::new_exact(i << 23, 9).unwrap(), 1))
            .collect();
        forged(&c4, &Config::ipv6(vec![32, 48, 64, 128]), &v4, &[])
    }

    #[test]
    fn forged_configs_are_refused_with_the_estimate() {
        for (name, bytes) in [("expansion", extreme_expansion()), ("fpr", extreme_fpr())] {
            assert!(bytes.len() < 4096, "{name}: {} bytes", bytes.len());
            match LpmTable::decode(&bytes) {
                Err(DecodeError::Config(ConfigError::TooLarge { bytes, limit })) => {
                    assert!(bytes > limit as u128, "{name}");
                    assert_eq!(limit, DEFAULT_MAX_MEMORY);
                }
                Err(e) => panic!("{name}: {e}"),
                Ok(_) => panic!("{name}: loaded"),
            }
        }
        // The sample loads under the default limit and is refused under a
        // limit below its estimate.
        let good = sample().encode();
        assert!(LpmTable::decode(&good).is_ok());
        assert!(matches!(
            LpmTable::decode_with_limit(&good, 1 << 10),
            Err(DecodeError::Config(ConfigError::TooLarge { .. }))
        ));
    }

    /// Runs [`forged_configs_are_refused_with_the_estimate`] again in a child
    /// process whose address space is limited to 2 GiB, so a regression that
    /// allocates what the forged configuration asks for aborts the child,
    /// not the machine.
    #[test]
    fn forged_configs_are_refused_under_a_memory_limit() {
        if std::env::var_os("NEXTHOP_LPM_CHILD").is_some() {
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("prlimit")
            .arg(format!("--as={}", 2u64 << 30))
            .arg(&exe)
            .args([
                "--exact",
                "persist::tests::forged_configs_are_refused_with_the_estimate",
                "--test-threads=1",
            ])
            .env("NEXTHOP_LPM_CHILD", "1")
            .output();
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                eprintln!("prlimit not available ({e}); the limit-free run covers the check");
                return;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn builds_over_the_memory_limit_are_refused_before_allocating() {
        // The `lpm build --v6-levels 1` case: one level at /64 expands
        // every /48 2^16-fold.
        let text: String = (0..2000u32)
            .map(|i| format!("2001:{:x}:{:x}::/48 1\n", i >> 8, i & 0xff))
            .collect();
        let routes = parse_routes(text.as_bytes(), NextHopMode::Raw).unwrap();
        let c6 = Config::ipv6(vec![64]);
        let need = c6.estimate_bytes(128, &length_counts(&routes.v6));
        assert!(need > 2000 * 65536 * 32, "{need}");
        match LpmTable::build_limited(&routes, Config::ipv4(), c6, DEFAULT_MAX_MEMORY) {
            Err(ConfigError::TooLarge { bytes, .. }) => assert_eq!(
                bytes,
                need + { Config::ipv4().estimate_bytes(32, &length_counts(&routes.v4)) }
            ),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("built"),
        }
        let ok = LpmTable::build_limited(
            &routes,
            Config::ipv4(),
            Config::ipv6_dpcpe(&routes.v6, 4),
            DEFAULT_MAX_MEMORY,
        );
        assert!(ok.is_ok());
    }
}
