//! [`Probe::FiltersFirst`](super::Probe::FiltersFirst): per chunk, every group's filter for every lane
//! first, then the tables of the lanes whose filters passed.

use super::{prefetch, Bloomfwd, GroupKey, CHUNK, FILTERS_FIRST_MAX_GROUPS};
use crate::addr::NextHop;

impl<A: GroupKey> Bloomfwd<A> {
    /// [`Probe::FiltersFirst`](super::Probe::FiltersFirst) on one chunk of at most [`CHUNK`] lanes (at
    /// most [`FILTERS_FIRST_MAX_GROUPS`] groups).
    pub(super) fn filters_first_chunk(&self, ca: &[A], co: &mut [NextHop]) {
        const G: usize = FILTERS_FIRST_MAX_GROUPS;
        let n = ca.len().min(co.len()).min(CHUNK);
        let all: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let mut keys = [[A::default(); CHUNK]; G];
        let mut h1 = [[0u32; CHUNK]; G];
        let mut h2 = [[0u32; CHUNK]; G];
        let mut th = [[0u32; CHUNK]; G];
        // Lanes whose filter passes, per group.
        let mut cand = [0u64; G];
        let groups = &self.groups[..self.groups.len().min(G)];
        for (j, g) in groups.iter().enumerate() {
            for (k, a) in keys[j].iter_mut().zip(&ca[..n]) {
                *k = a.top(g.level);
            }
            A::pair_batch(
                self.filter_hash,
                &keys[j][..n],
                &mut h1[j][..n],
                &mut h2[j][..n],
                self.simd,
            );
            for &h in &h1[j][..n] {
                g.filter.prefetch(h);
            }
        }
        let mut any = 0u64;
        for (j, g) in groups.iter().enumerate() {
            for i in 0..n {
                if g.filter.contains(h1[j][i], h2[j][i]) {
                    cand[j] |= 1 << i;
                    th[j][i] = self.table_hash_of(keys[j][i], h1[j][i]);
                    g.table.prefetch(th[j][i]);
                }
            }
            any |= cand[j];
        }
        // Lanes no filter passes go to their direct slot now.
        let mut p = all & !any;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            prefetch(self.direct.as_ptr().wrapping_add(self.slot(ca[i])));
        }
        // Probe the passing groups longest first; a miss everywhere falls
        // back to the direct slot too.
        let mut unresolved = all;
        for (j, g) in groups.iter().enumerate().rev() {
            let mut p = cand[j] & unresolved;
            while p != 0 {
                let i = p.trailing_zeros() as usize;
                p &= p - 1;
                if let Some(nh) = g.table.get(keys[j][i], th[j][i]) {
                    co[i] = nh;
                    unresolved &= !(1 << i);
                }
            }
        }
        let mut p = unresolved & any;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            prefetch(self.direct.as_ptr().wrapping_add(self.slot(ca[i])));
        }
        let mut p = unresolved;
        while p != 0 {
            let i = p.trailing_zeros() as usize;
            p &= p - 1;
            co[i] = self.direct[self.slot(ca[i])].next_hop;
        }
    }
}
