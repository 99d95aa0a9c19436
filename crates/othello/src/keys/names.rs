//! Variable-length printable names: NDN-style paths and DNS-style hostnames.
//!
//! Name tables (NDN FIB, PIT, Content Store; a DNS cache) see keys that share
//! leading components, vary in length and draw their components from a small,
//! skewed vocabulary. [`strings`] models that: half the names are paths
//! (`/ndn/kavilo/seg12/x7q`) whose first component comes from a fixed list of
//! 16 and second from a per-seed pool of 256 pronounceable words chosen with
//! Zipf(1) popularity; the other half are hostnames (`api.kavilo.com`) built
//! right to left from a top-level domain, a pool word and further labels. Each
//! name is built to a length drawn uniformly from `min_len..=max_len` and then
//! cut to exactly that length, so the bytes are always ASCII graphic
//! characters (`a-z`, `0-9`, `-`, `.`, `/`).

use std::collections::HashSet;

use rand::seq::SliceRandom;
use rand::Rng;

use super::{rng, Zipf};

const TOP: [&str; 16] = [
    "ndn", "edu", "com", "org", "net", "video", "www", "cdn", "local", "sensor", "app", "music",
    "news", "maps", "mail", "repo",
];
const TLDS: [&str; 10] = [
    "com", "net", "org", "io", "edu", "de", "jp", "cn", "uk", "dev",
];
const HOST_LABELS: [&str; 11] = [
    "www", "api", "cdn", "mail", "static", "img", "auth", "edge", "m", "ns1", "ns2",
];
const CONSONANTS: &[u8] = b"bcdfghjklmnprstvwz";
const VOWELS: &[u8] = b"aeiou";
const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const WORD_POOL: usize = 256;

/// Consecutive duplicate draws after which [`strings`] gives up.
const MAX_CONSECUTIVE_DUPLICATES: usize = 100_000;

fn word<R: Rng>(r: &mut R) -> Vec<u8> {
    let syllables = r.gen_range(1..=3);
    let mut w = Vec::with_capacity(2 * syllables + 1);
    for _ in 0..syllables {
        w.push(CONSONANTS[r.gen_range(0..CONSONANTS.len())]);
        w.push(VOWELS[r.gen_range(0..VOWELS.len())]);
    }
    if r.gen_bool(0.3) {
        w.push(CONSONANTS[r.gen_range(0..CONSONANTS.len())]);
    }
    w
}

fn alnum<R: Rng>(r: &mut R, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| ALNUM[r.gen_range(0..ALNUM.len())])
        .collect()
}

struct Vocabulary {
    words: Vec<Vec<u8>>,
    popularity: Zipf,
}

impl Vocabulary {
    fn new<R: Rng>(r: &mut R) -> Self {
        let mut seen = HashSet::new();
        let mut words = Vec::with_capacity(WORD_POOL);
        while words.len() < WORD_POOL {
            let w = word(r);
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        words.shuffle(r);
        let popularity = Zipf::new(WORD_POOL, 1.0).expect("256 items and exponent 1 are valid");
        Vocabulary { words, popularity }
    }

    fn pick<R: Rng>(&self, r: &mut R) -> &[u8] {
        &self.words[self.popularity.sample(r)]
    }

    /// A path component below the second level.
    fn component<R: Rng>(&self, r: &mut R) -> Vec<u8> {
        match r.gen_range(0..10) {
            0..=3 => self.pick(r).to_vec(),
            4..=5 => {
                let stem = ["seg", "v", "chunk"][r.gen_range(0..3)];
                format!("{stem}{}", r.gen_range(0..1000)).into_bytes()
            }
            _ => {
                let len = r.gen_range(1..=8);
                alnum(r, len)
            }
        }
    }

    /// A hostname label left of the second-level domain.
    fn label<R: Rng>(&self, r: &mut R) -> Vec<u8> {
        match r.gen_range(0..10) {
            0..=2 => HOST_LABELS[r.gen_range(0..HOST_LABELS.len())]
                .as_bytes()
                .to_vec(),
            3..=5 => self.pick(r).to_vec(),
            _ => {
                let len = r.gen_range(1..=10);
                let mut l = alnum(r, len);
                if len >= 3 && r.gen_bool(0.3) {
                    l[r.gen_range(1..len - 1)] = b'-';
                }
                l
            }
        }
    }

    /// `/top/word/component/...` cut to exactly `len` bytes.
    fn path<R: Rng>(&self, r: &mut R, len: usize) -> Vec<u8> {
        let mut p = Vec::with_capacity(len + 16);
        p.push(b'/');
        p.extend_from_slice(TOP[r.gen_range(0..TOP.len())].as_bytes());
        p.push(b'/');
        p.extend_from_slice(self.pick(r));
        while p.len() < len {
            p.push(b'/');
            p.extend(self.component(r));
        }
        p.truncate(len);
        if p.last() == Some(&b'/') {
            p.pop();
            p.push(ALNUM[r.gen_range(0..26)]);
        }
        p
    }

    /// `label.label.word.tld` cut to exactly `len` bytes from the left.
    fn hostname<R: Rng>(&self, r: &mut R, len: usize) -> Vec<u8> {
        // Built reversed, then flipped, so labels can be prepended cheaply.
        let mut h: Vec<u8> = TLDS[r.gen_range(0..TLDS.len())].bytes().rev().collect();
        h.push(b'.');
        h.extend(self.pick(r).iter().rev());
        while h.len() < len {
            h.push(b'.');
            h.extend(self.label(r).into_iter().rev());
        }
        h.truncate(len);
        h.reverse();
        if matches!(h.first(), Some(b'.' | b'-')) {
            h[0] = ALNUM[r.gen_range(0..26)];
        }
        h
    }
}

/// `n` distinct printable names with lengths in `min_len..=max_len` (see the
/// module docs for their shape), in a seeded order.
///
/// # Panics
///
/// If `min_len == 0`, `min_len > max_len`, or the length range is too narrow
/// to hold `n` distinct names (detected after 100 000 duplicate draws in a
/// row).
pub fn strings(seed: u64, n: usize, min_len: usize, max_len: usize) -> Vec<Vec<u8>> {
    assert!(
        min_len >= 1 && min_len <= max_len,
        "strings: need 1 <= min_len <= max_len, got {min_len}..={max_len}"
    );
    let mut r = rng(seed);
    let vocab = Vocabulary::new(&mut r);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut duplicates = 0usize;
    while out.len() < n {
        let len = r.gen_range(min_len..=max_len);
        let name = if r.gen_bool(0.5) {
            vocab.path(&mut r, len)
        } else {
            vocab.hostname(&mut r, len)
        };
        if seen.insert(name.clone()) {
            out.push(name);
            duplicates = 0;
        } else {
            duplicates += 1;
            assert!(
                duplicates < MAX_CONSECUTIVE_DUPLICATES,
                "strings: cannot find {n} distinct names of length {min_len}..={max_len}"
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_distinct_printable_and_within_length_bounds() {
        let v = strings(1, 20_000, 4, 40);
        assert_eq!(v.len(), 20_000);
        assert_eq!(v.iter().collect::<HashSet<_>>().len(), v.len());
        for s in &v {
            assert!((4..=40).contains(&s.len()), "{s:?}");
            assert!(s.iter().all(|b| b.is_ascii_graphic()), "{s:?}");
        }
        assert_eq!(v, strings(1, 20_000, 4, 40));
        assert_ne!(v, strings(2, 20_000, 4, 40));
    }

    #[test]
    fn strings_mix_paths_and_hostnames_that_share_prefixes() {
        let v = strings(3, 10_000, 16, 64);
        let paths: Vec<&Vec<u8>> = v.iter().filter(|s| s.first() == Some(&b'/')).collect();
        assert!(paths.len() > 4_000 && paths.len() < 6_000);
        let hosts = v.iter().filter(|s| s.first() != Some(&b'/'));
        assert!(hosts.clone().all(|s| s.contains(&b'.')));
        // Paths share their first component; hostnames their last label.
        let tops: HashSet<&[u8]> = paths
            .iter()
            .filter_map(|p| p[1..].split(|&b| b == b'/').next())
            .collect();
        assert!(tops.len() <= TOP.len());
        let tlds: HashSet<&[u8]> = hosts
            .filter_map(|h| h.rsplit(|&b| b == b'.').next())
            .collect();
        assert!(tlds.len() <= TLDS.len());
    }

    #[test]
    fn strings_with_fixed_length_have_exactly_that_length() {
        let v = strings(4, 1_000, 12, 12);
        assert!(v.iter().all(|s| s.len() == 12));
        assert!(v.iter().all(|s| s.last() != Some(&b'/')));
    }

    #[test]
    #[should_panic(expected = "min_len <= max_len")]
    fn strings_reject_an_empty_length_range() {
        strings(1, 10, 9, 8);
    }

    #[test]
    #[should_panic(expected = "cannot find")]
    fn strings_give_up_when_the_range_cannot_hold_n_names() {
        strings(1, 1_000, 1, 1);
    }
}
