//! The control-side RIB: one hash map per prefix length.
//!
//! It answers the two questions the expansion needs on an update: "is this
//! exact prefix present" and "which is the longest present prefix that
//! covers this one, among lengths in a range".

use hashbrown::HashMap;

use crate::addr::{Address, NextHop, Prefix};

/// Routes by prefix length: `by_len[l]` maps the first `l` bits
/// (right-aligned) to the next hop.
#[derive(Clone, Debug)]
pub struct Rib<A> {
    by_len: Vec<HashMap<A, NextHop>>,
    count: usize,
}

impl<A: Address> Default for Rib<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Address> Rib<A> {
    /// An empty RIB.
    pub fn new() -> Self {
        Rib {
            by_len: (0..=A::BITS).map(|_| HashMap::new()).collect(),
            count: 0,
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Insert or replace; returns the previous next hop.
    pub fn insert(&mut self, p: Prefix<A>, nh: NextHop) -> Option<NextHop> {
        let old = self.by_len[p.len() as usize].insert(p.bits(), nh);
        if old.is_none() {
            self.count += 1;
        }
        old
    }

    /// Remove; returns the removed next hop.
    pub fn remove(&mut self, p: Prefix<A>) -> Option<NextHop> {
        let old = self.by_len[p.len() as usize].remove(&p.bits());
        if old.is_some() {
            self.count -= 1;
        }
        old
    }

    /// The next hop of exactly this prefix.
    pub fn get(&self, p: Prefix<A>) -> Option<NextHop> {
        self.by_len[p.len() as usize].get(&p.bits()).copied()
    }

    /// The longest present prefix covering `p` whose length lies in
    /// `lo..hi` (`hi <= p.len() + 1`): `(next hop, length)`.
    pub fn covering(&self, p: Prefix<A>, lo: u8, hi: u8) -> Option<(NextHop, u8)> {
        (lo..hi).rev().find_map(|l| {
            self.by_len[l as usize]
                .get(&p.addr().top(l))
                .map(|&nh| (nh, l))
        })
    }

    /// Number of routes of each length (index = length).
    pub fn length_counts(&self) -> Vec<u64> {
        self.by_len.iter().map(|m| m.len() as u64).collect()
    }

    /// All routes, by length then in map order.
    pub fn iter(&self) -> impl Iterator<Item = (Prefix<A>, NextHop)> + '_ {
        self.by_len.iter().enumerate().flat_map(|(l, m)| {
            m.iter().map(move |(&bits, &nh)| {
                let addr = if l == 0 {
                    A::default()
                } else {
                    A::from_u128(bits.to_u128() << (A::BITS as u32 - l as u32))
                };
                (Prefix::new(addr, l as u8).unwrap_or_default(), nh)
            })
        })
    }

    /// All routes sorted by (length, address): a canonical order.
    pub fn sorted(&self) -> Vec<(Prefix<A>, NextHop)> {
        let mut v: Vec<_> = self.iter().collect();
        v.sort_unstable_by_key(|(p, _)| (p.len(), p.addr()));
        v
    }

    /// Bytes held by the maps (an estimate from their capacities).
    pub fn memory_bytes(&self) -> usize {
        self.by_len
            .iter()
            .map(|m| m.capacity() * (std::mem::size_of::<(A, NextHop)>() + 1))
            .sum()
    }
}
