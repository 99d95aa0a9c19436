//! A plain name-component trie: the reference the FIB is tested against.

use std::collections::HashMap;

use crate::name::NameView;
use crate::nexthop::NextHop;

#[derive(Clone, Debug, Default)]
struct Node {
    hops: Option<Vec<NextHop>>,
    children: HashMap<Vec<u8>, Node>,
}

/// Longest-prefix match by walking one component at a time.
#[derive(Clone, Debug, Default)]
pub struct NameTrie {
    root: Node,
    len: usize,
}

fn components<N: NameView + ?Sized>(name: &N) -> impl Iterator<Item = &[u8]> {
    let tlv = name.tlv();
    (0..name.component_count()).map(move |i| &tlv[name.prefix_end(i)..name.prefix_end(i + 1)])
}

impl NameTrie {
    /// An empty trie.
    pub fn new() -> NameTrie {
        NameTrie::default()
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Insert or replace.
    pub fn insert<N: NameView + ?Sized>(&mut self, name: &N, hops: Vec<NextHop>) {
        let mut n = &mut self.root;
        for c in components(name) {
            n = n.children.entry(c.to_vec()).or_default();
        }
        if n.hops.replace(hops).is_none() {
            self.len += 1;
        }
    }

    /// Remove; returns whether it was there.
    pub fn remove<N: NameView + ?Sized>(&mut self, name: &N) -> bool {
        let mut n = &mut self.root;
        for c in components(name) {
            match n.children.get_mut(c) {
                Some(ch) => n = ch,
                None => return false,
            }
        }
        let was = n.hops.take().is_some();
        self.len -= was as usize;
        was
    }

    /// `(matched components, next hops)` of the longest rule prefixing `name`.
    pub fn lookup<N: NameView + ?Sized>(&self, name: &N) -> Option<(usize, &[NextHop])> {
        let mut n = &self.root;
        let mut best = n.hops.as_deref().map(|h| (0, h));
        for (i, c) in components(name).enumerate() {
            match n.children.get(c) {
                Some(ch) => n = ch,
                None => break,
            }
            if let Some(h) = n.hops.as_deref() {
                best = Some((i + 1, h));
            }
        }
        best
    }
}
