//! DIR-24-8 (Gupta, Lin, McKeown 1998; the layout of DPDK's `rte_lpm`): a
//! baseline. `tbl24` has one 32-bit entry per /24; an entry either holds a
//! next hop or (top bit set) the index of a 256-entry `tbl8` group for a /24
//! that holds longer prefixes. A lookup reads one or two entries.
//!
//! Built once from a route list (no incremental updates: it is a baseline
//! for lookups). Next hops must be below `2^31 - 1`.

use crate::addr::{NextHop, Prefix4, NO_ROUTE};
use crate::rib::Rib;

const EXT: u32 = 1 << 31;
const NONE: u32 = EXT - 1;

/// A next hop the 31-bit entries cannot hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Dir248Error {
    /// Next hop `>= 2^31 - 1`.
    #[error("next hop {0} does not fit DIR-24-8's 31-bit entries")]
    NextHopTooLarge(NextHop),
}

/// The DIR-24-8 table.
#[derive(Clone, Debug)]
pub struct Dir248 {
    tbl24: Box<[u32]>,
    tbl8: Vec<u32>,
}

impl Dir248 {
    /// Build from routes (a later route for a prefix replaces an earlier one).
    pub fn build(routes: &[(Prefix4, NextHop)]) -> Result<Self, Dir248Error> {
        let mut rib = Rib::new();
        for &(p, nh) in routes {
            if nh >= NONE {
                return Err(Dir248Error::NextHopTooLarge(nh));
            }
            rib.insert(p, nh);
        }
        let mut t = Dir248 {
            tbl24: vec![NONE; 1 << 24].into_boxed_slice(),
            tbl8: Vec::new(),
        };
        // Shorter prefixes first: longer ones overwrite what they cover.
        for (p, nh) in rib.sorted() {
            let a = p.addr();
            if p.len() <= 24 {
                let base = (a >> 8) as usize;
                for i in base..base + (1usize << (24 - p.len())) {
                    let e = t.tbl24[i];
                    if e & EXT != 0 {
                        // Longer prefixes cannot be here yet (sorted), so the
                        // whole group takes the new next hop.
                        let g = ((e & !EXT) as usize) << 8;
                        t.tbl8[g..g + 256].fill(nh);
                    } else {
                        t.tbl24[i] = nh;
                    }
                }
            } else {
                let i = (a >> 8) as usize;
                let e = t.tbl24[i];
                let g = if e & EXT != 0 {
                    ((e & !EXT) as usize) << 8
                } else {
                    let g = t.tbl8.len();
                    t.tbl8.extend(std::iter::repeat_n(e, 256));
                    t.tbl24[i] = EXT | (g >> 8) as u32;
                    g
                };
                let lo = g + (a & 0xff) as usize;
                t.tbl8[lo..lo + (1usize << (32 - p.len()))].fill(nh);
            }
        }
        Ok(t)
    }

    /// Longest-prefix match.
    #[inline]
    pub fn lookup(&self, a: u32) -> Option<NextHop> {
        let mut e = self.tbl24[(a >> 8) as usize];
        if e & EXT != 0 {
            e = self.tbl8[(((e & !EXT) as usize) << 8) | (a & 0xff) as usize];
        }
        (e != NONE).then_some(e)
    }

    /// Look up a batch ([`NO_ROUTE`] for misses); returns the hit count.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [NextHop]) -> usize {
        let mut hits = 0;
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(*a).unwrap_or(NO_ROUTE);
            hits += (*o != NO_ROUTE) as usize;
        }
        hits
    }

    /// Bytes of both tables.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.tbl24) + self.tbl8.len() * 4
    }
}
