//! The hash of the crate's maps whose keys outsiders choose (source MACs,
//! masks made from the marks an app set for attacker-shaped packets):
//! seeded XXH3 under a random per-map seed, so collisions cannot be aimed
//! at, and a few nanoseconds where SipHash cost a tenth of a decision.

use std::hash::{BuildHasher, Hasher};

/// A `BuildHasher` with a random seed of its own.
#[derive(Clone, Debug)]
pub(crate) struct SeededHash(u64);

impl Default for SeededHash {
    fn default() -> Self {
        SeededHash(std::collections::hash_map::RandomState::new().hash_one(0x12u8))
    }
}

impl BuildHasher for SeededHash {
    type Hasher = SeededHasher;

    fn build_hasher(&self) -> SeededHasher {
        SeededHasher(self.0)
    }
}

pub(crate) struct SeededHasher(u64);

impl Hasher for SeededHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = nexthop_hash::hash64(bytes, self.0);
    }

    fn write_u8(&mut self, b: u8) {
        self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 ^= n as u64;
    }

    fn finish(&self) -> u64 {
        // The multiply of `write_u8` leaves its low bits weak: fold.
        self.0 ^ (self.0 >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn seeds_differ_and_keys_that_differ_in_one_field_hash_apart() {
        assert_ne!(SeededHash::default().0, SeededHash::default().0);
        let h = SeededHash::default();
        let mut seen = HashSet::new();
        for i in 0..64u8 {
            for b in [false, true] {
                assert!(seen.insert(h.hash_one(([i; 6], b))));
            }
        }
        assert_eq!(h.hash_one([1u8; 6]), h.hash_one([1u8; 6]));
    }
}
