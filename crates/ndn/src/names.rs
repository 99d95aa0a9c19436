//! Seeded name sets for tests and benchmarks.
//!
//! * [`synthetic`]: names of 1..=k components (or exactly k) of 6–10 random
//!   characters each, as in dissertation §3.4.1.
//! * [`worst_case`]: the two-phase construction of §3.4.1: for each base
//!   name of `k` components, every level on its binary-search path is a
//!   separate rule with its own entry, inserted level by level, so a lookup
//!   of the base verifies a different entry at every probe.
//! * Real-derived sets: domains from the EasyList/EasyPrivacy filter lists
//!   (Debian `webext-ublock-origin-firefox`), made into names TLD-first,
//!   site-first or host-first (Table 4.1) with the Public Suffix List
//!   (Debian `publicsuffix`); words from `wamerican-huge` as components.
//!   Loaders fail with a message naming the missing package.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::fib::SearchTree;
use crate::name::NameBuf;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~";

fn component(rng: &mut Xoshiro256PlusPlus) -> Vec<u8> {
    let len = rng.gen_range(6..=10);
    (0..len)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
        .collect()
}

/// `n` distinct names; each has `k` components when `exact`, else a
/// uniform count in `1..=k`.
pub fn synthetic(n: usize, k: usize, exact: bool, seed: u64) -> Vec<NameBuf> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    // Components are 6..10 random chars from 66 symbols: distinct first
    // components make names distinct with overwhelming probability; the
    // set below removes the rare repeat.
    let mut seen = HashSet::with_capacity(n);
    while out.len() < n {
        let c = if exact { k } else { rng.gen_range(1..=k) };
        let name = NameBuf::from_components((0..c).map(|_| component(&mut rng)))
            .unwrap_or_else(|_| NameBuf::root());
        if seen.insert(nexthop_hash::hash64(crate::name::NameView::tlv(&name), 1)) {
            out.push(name);
        }
    }
    out
}

/// The worst case of §3.4.1 for rules of up to `k` components: about `n`
/// rules in insertion order (grouped by level) and the lookup trace (the
/// `k`-component base names, shuffled).
pub fn worst_case(n: usize, k: usize, seed: u64) -> (Vec<NameBuf>, Vec<NameBuf>) {
    let path = SearchTree::new(k).path(k);
    let bases = synthetic(n.div_ceil(path.len()).max(1), k, true, seed);
    let mut rules = Vec::with_capacity(bases.len() * path.len());
    for &l in &path {
        rules.extend(bases.iter().map(|b| b.prefix(l as usize)));
    }
    let mut trace = bases;
    trace.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5348_5546));
    (rules, trace)
}

/// The worst case of [`worst_case`] as a stream, for sets too large to
/// hold as [`NameBuf`]s (10^8 rules): base `i` is generated from
/// `(seed, i)` alone, so rules and lookup names are regenerated on demand.
/// The rules come base by base, each base's search-path prefixes longest
/// first (so a bulk build shares every string without freeing any entry).
/// Bases are not deduplicated: with `k` components of 6–10 random
/// characters a repeat is vanishingly rare, and a bulk build counts it as
/// a replaced rule.
#[derive(Clone, Debug)]
pub struct WorstCase {
    path: Vec<u8>,
    k: usize,
    bases: usize,
    seed: u64,
}

impl WorstCase {
    /// About `n` rules of up to `k` components (`n / depth` bases).
    pub fn new(n: usize, k: usize, seed: u64) -> WorstCase {
        let path = SearchTree::new(k).path(k);
        WorstCase {
            bases: n.div_ceil(path.len()).max(1),
            path,
            k,
            seed,
        }
    }

    /// Number of `k`-component bases.
    pub fn bases(&self) -> usize {
        self.bases
    }

    /// Number of rules the stream yields (`bases * depth`).
    pub fn rules(&self) -> usize {
        self.bases * self.path.len()
    }

    /// Base name `i`.
    pub fn base(&self, i: usize) -> NameBuf {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(nexthop_hash::hash64(
            &(i as u64).to_le_bytes(),
            self.seed,
        ));
        NameBuf::from_components((0..self.k).map(|_| component(&mut rng)))
            .unwrap_or_else(|_| NameBuf::root())
    }

    /// Every rule: for each base, its search-path prefixes, longest first.
    pub fn rules_iter(&self) -> impl Iterator<Item = NameBuf> + '_ {
        (0..self.bases).flat_map(move |i| {
            let b = self.base(i);
            self.path
                .iter()
                .rev()
                .map(|&l| b.prefix(l as usize))
                .collect::<Vec<_>>()
        })
    }

    /// `lookups` base names drawn uniformly (with replacement; seeded).
    pub fn trace(&self, lookups: usize, seed: u64) -> Vec<NameBuf> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..lookups)
            .map(|_| self.base(rng.gen_range(0..self.bases)))
            .collect()
    }
}

/// Lookup names for a rule set: each rule with `extra` random components
/// appended (the dissertation appends three).
pub fn extend_names(rules: &[NameBuf], extra: usize, seed: u64) -> Vec<NameBuf> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out: Vec<NameBuf> = rules
        .iter()
        .map(|r| {
            let mut n = r.clone();
            for _ in 0..extra {
                let _ = n.push(crate::name::TT_GENERIC_COMPONENT, &component(&mut rng));
            }
            n
        })
        .collect();
    out.shuffle(&mut rng);
    out
}

/// How a domain becomes a name (dissertation Table 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `/net/named-data/www`: labels reversed.
    TldFirst,
    /// `/named-data.net/www`: the registrable domain, then the other labels
    /// right to left.
    SiteFirst,
    /// `/www.named-data.net`: the whole host as one component.
    HostFirst,
}

/// A data set that could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// The file is missing: install the named Debian package.
    #[error(
        "{path} not found: install the Debian package `{package}` (apt-get install {package})"
    )]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// The package that provides it.
        package: &'static str,
    },
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Where uBlock Origin's EasyList copies live in Debian.
pub const EASYLIST_DIR: &str = "/usr/share/mozilla/extensions/{ec8030f7-c20a-464f-9b0e-13a3a9e97384}/uBlock0@raymondhill.net/assets/thirdparties/easylist";
/// The Public Suffix List in Debian.
pub const PUBLIC_SUFFIX_LIST: &str = "/usr/share/publicsuffix/public_suffix_list.dat";
/// The huge American English word list in Debian.
pub const WORDS_HUGE: &str = "/usr/share/dict/american-english-huge";

fn read(path: &Path, package: &'static str) -> Result<String, DatasetError> {
    match std::fs::read(path) {
        Ok(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DatasetError::Missing {
            path: path.to_owned(),
            package,
        }),
        Err(source) => Err(DatasetError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// A host (and URL path components) from one filter rule `||host^` or
/// `||host/a/b...`; `None` for other rules.
pub fn parse_filter_rule(line: &str) -> Option<(String, Vec<String>)> {
    let rest = line.strip_prefix("||")?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
        .unwrap_or(rest.len());
    let host = rest[..end].trim_matches('.').to_ascii_lowercase();
    if host.is_empty() || !host.contains('.') || host.contains("..") {
        return None;
    }
    let tail = &rest[end..];
    let mut path = Vec::new();
    if let Some(p) = tail.strip_prefix('/') {
        for seg in p.split('/') {
            let ok = !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.~".contains(c));
            if !ok {
                break;
            }
            path.push(seg.to_owned());
        }
    } else if !tail.starts_with('^') && !tail.is_empty() {
        return None;
    }
    Some((host, path))
}

/// Unique `(host, path)` pairs from EasyList and EasyPrivacy, sorted.
pub fn load_filter_hosts() -> Result<Vec<(String, Vec<String>)>, DatasetError> {
    let mut set = HashSet::new();
    for f in ["easylist.txt", "easyprivacy.txt"] {
        let text = read(
            &Path::new(EASYLIST_DIR).join(f),
            "webext-ublock-origin-firefox",
        )?;
        set.extend(text.lines().filter_map(parse_filter_rule));
    }
    let mut v: Vec<_> = set.into_iter().collect();
    v.sort();
    Ok(v)
}

/// Public suffix rules (`*.ck`, `!www.ck` and plain ones).
#[derive(Clone, Debug, Default)]
pub struct PublicSuffixes {
    rules: HashMap<String, char>,
}

impl PublicSuffixes {
    /// Parse the list's text.
    pub fn parse(text: &str) -> PublicSuffixes {
        let mut rules = HashMap::new();
        for l in text.lines().map(str::trim) {
            if l.is_empty() || l.starts_with("//") {
                continue;
            }
            let l = l
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if let Some(r) = l.strip_prefix('!') {
                rules.insert(r.to_owned(), '!');
            } else if let Some(r) = l.strip_prefix("*.") {
                rules.insert(r.to_owned(), '*');
            } else {
                rules.entry(l).or_insert('=');
            }
        }
        PublicSuffixes { rules }
    }

    /// Load Debian's copy.
    pub fn load() -> Result<PublicSuffixes, DatasetError> {
        Ok(PublicSuffixes::parse(&read(
            Path::new(PUBLIC_SUFFIX_LIST),
            "publicsuffix",
        )?))
    }

    /// Number of labels of the public suffix of `labels` (left to right).
    pub fn suffix_labels(&self, labels: &[&str]) -> usize {
        let mut best = 1; // the implicit "*" rule
        for i in (0..labels.len()).rev() {
            let s = labels[i..].join(".");
            let n = labels.len() - i;
            match self.rules.get(&s) {
                Some('!') => return n - 1,
                Some('*') => best = best.max(n + 1),
                Some(_) => best = best.max(n),
                None => {}
            }
        }
        best.min(labels.len())
    }
}

/// Components of `host` (+ `path`) under `scheme`.
pub fn host_components(
    host: &str,
    path: &[String],
    scheme: Scheme,
    psl: &PublicSuffixes,
) -> Vec<String> {
    let labels: Vec<&str> = host.split('.').filter(|l| !l.is_empty()).collect();
    let mut c: Vec<String> = match scheme {
        Scheme::TldFirst => labels.iter().rev().map(|s| s.to_string()).collect(),
        Scheme::HostFirst => vec![labels.join(".")],
        Scheme::SiteFirst => {
            let site = (psl.suffix_labels(&labels) + 1).min(labels.len());
            let cut = labels.len() - site;
            let mut v = vec![labels[cut..].join(".")];
            v.extend(labels[..cut].iter().rev().map(|s| s.to_string()));
            v
        }
    };
    c.extend(path.iter().cloned());
    c
}

/// The filter-list hosts as distinct names under `scheme`.
pub fn real_names(scheme: Scheme) -> Result<Vec<NameBuf>, DatasetError> {
    let hosts = load_filter_hosts()?;
    let psl = PublicSuffixes::load()?;
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(hosts.len());
    for (h, p) in &hosts {
        if let Ok(n) = NameBuf::from_components(host_components(h, p, scheme, &psl)) {
            if seen.insert(n.clone()) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

/// The words of `wamerican-huge`.
pub fn load_words() -> Result<Vec<String>, DatasetError> {
    let text = read(Path::new(WORDS_HUGE), "wamerican-huge")?;
    Ok(text
        .lines()
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect())
}

/// `n` distinct names of 1..=k words drawn from `words`.
pub fn word_names(words: &[String], n: usize, k: usize, seed: u64) -> Vec<NameBuf> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    let mut tries = 0usize;
    while out.len() < n && !words.is_empty() && tries < n.saturating_mul(20) {
        tries += 1;
        let c = rng.gen_range(1..=k);
        let comps: Vec<&str> = (0..c)
            .map(|_| words[rng.gen_range(0..words.len())].as_str())
            .collect();
        if let Ok(name) = NameBuf::from_components(comps) {
            if seen.insert(name.clone()) {
                out.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::NameView;

    #[test]
    fn table_4_1_conversions() {
        let psl = PublicSuffixes::parse("net\nuk\nco.uk\n*.ck\n!www.ck\n");
        let p = vec!["project".to_string()];
        assert_eq!(
            host_components("www.named-data.net", &p, Scheme::TldFirst, &psl),
            ["net", "named-data", "www", "project"]
        );
        assert_eq!(
            host_components("www.named-data.net", &p, Scheme::SiteFirst, &psl),
            ["named-data.net", "www", "project"]
        );
        assert_eq!(
            host_components("www.named-data.net", &p, Scheme::HostFirst, &psl),
            ["www.named-data.net", "project"]
        );
        assert_eq!(
            host_components("a.b.bbc.co.uk", &[], Scheme::SiteFirst, &psl),
            ["bbc.co.uk", "b", "a"]
        );
        assert_eq!(
            host_components("x.foo.ck", &[], Scheme::SiteFirst, &psl),
            ["x.foo.ck"]
        );
        assert_eq!(
            host_components("www.ck", &[], Scheme::SiteFirst, &psl),
            ["www.ck"]
        );
    }

    #[test]
    fn filter_rules_give_hosts_and_paths() {
        assert_eq!(
            parse_filter_rule("||ads.example.com^"),
            Some(("ads.example.com".into(), vec![]))
        );
        assert_eq!(
            parse_filter_rule("||example.com/ads/banner.js$script"),
            Some(("example.com".into(), vec!["ads".into()]))
        );
        assert_eq!(parse_filter_rule("||cacheserve.*/promo"), None);
        assert_eq!(parse_filter_rule("##.ad"), None);
    }

    #[test]
    fn a_missing_data_file_names_its_debian_package() {
        let e = read(
            Path::new("/nonexistent/ndnfib/list.txt"),
            "webext-ublock-origin-firefox",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("apt-get install webext-ublock-origin-firefox"),
            "{e}"
        );
    }

    #[test]
    fn synthetic_sets_are_seeded_and_shaped() {
        let a = synthetic(1000, 7, false, 5);
        assert_eq!(a, synthetic(1000, 7, false, 5));
        assert!(a.iter().all(|n| (1..=7).contains(&n.component_count())));
        assert!(a
            .iter()
            .flat_map(|n| n.components())
            .all(|(_, v)| (6..=10).contains(&v.len())));
        let (rules, trace) = worst_case(300, 7, 1);
        assert_eq!(rules.len(), 300);
        assert_eq!(trace.len(), 100);
        assert_eq!(rules[0].component_count(), 4);
        assert_eq!(rules[299].component_count(), 7);
    }
}
