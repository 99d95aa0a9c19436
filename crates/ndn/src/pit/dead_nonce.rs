//! The dead-nonce list (NFD's `DeadNonceList`): `(name, nonce)` pairs of
//! Interests whose PIT entry is gone, remembered for a lifetime so that a
//! looping Interest arriving after its entry was satisfied or expired is
//! still detected. Stored as 64-bit keys mixed from the name's hash
//! ([`crate::name::NameView::name_hash`], the chain a decoded name
//! caches, under the process's secret seed, so the name bytes are not
//! hashed again and chosen names cannot be aimed at one probe sequence of
//! the set) and the nonce (a false positive needs a 64-bit collision);
//! bounded: when full, the oldest pair is forgotten and
//! [`DeadNonceList::evicted`] counts it.

use std::collections::VecDeque;

use super::{Millis, PreHashedMap};
use crate::name::mix64;

/// Bounded, time-limited set of `(name, nonce)` hashes.
#[derive(Debug, Clone)]
pub struct DeadNonceList {
    seed: u64,
    lifetime: Millis,
    cap: usize,
    /// Hash to number of live copies in `fifo`.
    set: PreHashedMap<u32>,
    /// Insertion order with expiry.
    fifo: VecDeque<(u64, Millis)>,
    evicted: u64,
}

impl DeadNonceList {
    /// A list of at most `cap` pairs, each kept `lifetime` ms.
    pub fn new(cap: usize, lifetime: Millis, seed: u64) -> DeadNonceList {
        DeadNonceList {
            seed,
            lifetime,
            cap,
            set: PreHashedMap::default(),
            fifo: VecDeque::new(),
            evicted: 0,
        }
    }

    fn key(&self, name_hash: u64, nonce: u32) -> u64 {
        mix64(name_hash ^ self.seed ^ (nonce as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn expire(&mut self, now: Millis) {
        while let Some(&(k, exp)) = self.fifo.front() {
            if exp > now {
                break;
            }
            self.fifo.pop_front();
            self.forget(k);
        }
    }

    fn forget(&mut self, k: u64) {
        if let Some(c) = self.set.get_mut(&k) {
            *c -= 1;
            if *c == 0 {
                self.set.remove(&k);
            }
        }
    }

    /// Remember `(name, nonce)` until `now + lifetime` (`name_hash`: the
    /// name's [`crate::name::NameView::name_hash`]).
    pub fn add(&mut self, name_hash: u64, nonce: u32, now: Millis) {
        if self.cap == 0 {
            return;
        }
        self.expire(now);
        if self.fifo.len() >= self.cap {
            if let Some((k, _)) = self.fifo.pop_front() {
                self.forget(k);
                self.evicted += 1;
            }
        }
        let k = self.key(name_hash, nonce);
        self.fifo.push_back((k, now.saturating_add(self.lifetime)));
        *self.set.entry(k).or_insert(0) += 1;
    }

    /// Whether `(name, nonce)` is remembered at `now` (`name_hash` as in
    /// [`Self::add`]).
    pub fn contains(&mut self, name_hash: u64, nonce: u32, now: Millis) -> bool {
        self.expire(now);
        !self.set.is_empty() && self.set.contains_key(&self.key(name_hash, nonce))
    }

    /// Pairs remembered (some may have expired since the last call).
    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Pairs forgotten early because the list was full.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_lifetime_then_forgets() {
        let mut d = DeadNonceList::new(10, 100, 1);
        d.add(0xa, 7, 0);
        assert!(d.contains(0xa, 7, 99));
        assert!(!d.contains(0xa, 8, 99));
        assert!(!d.contains(0xb, 7, 99));
        assert!(!d.contains(0xa, 7, 100));
        assert!(d.is_empty());
    }

    #[test]
    fn full_list_forgets_oldest_and_counts_it() {
        let mut d = DeadNonceList::new(2, 1000, 1);
        d.add(0xa, 1, 0);
        d.add(0xa, 2, 0);
        d.add(0xa, 3, 0);
        assert_eq!(d.len(), 2);
        assert_eq!(d.evicted(), 1);
        assert!(!d.contains(0xa, 1, 1));
        assert!(d.contains(0xa, 2, 1));
        assert!(d.contains(0xa, 3, 1));
    }

    #[test]
    fn zero_capacity_remembers_nothing() {
        let mut d = DeadNonceList::new(0, 1000, 1);
        d.add(0xa, 1, 0);
        assert!(!d.contains(0xa, 1, 0));
    }
}
