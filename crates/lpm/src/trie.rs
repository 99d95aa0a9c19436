//! The plain binary trie: the test oracle every fast structure is checked
//! against (one node per prefix bit, longest match by walking the address).

use crate::addr::{Address, NextHop, Prefix};

#[derive(Clone, Copy, Debug)]
struct Node {
    child: [u32; 2],
    next_hop: Option<NextHop>,
}

const NIL: u32 = 0;

/// A binary trie of prefixes (IPv4 or IPv6).
#[derive(Clone, Debug)]
pub struct BinaryTrie<A> {
    nodes: Vec<Node>,
    routes: usize,
    _a: std::marker::PhantomData<A>,
}

impl<A: Address> Default for BinaryTrie<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Address> BinaryTrie<A> {
    /// An empty trie.
    pub fn new() -> Self {
        BinaryTrie {
            nodes: vec![Node {
                child: [NIL; 2],
                next_hop: None,
            }],
            routes: 0,
            _a: std::marker::PhantomData,
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.routes == 0
    }

    /// Insert or replace; returns the previous next hop.
    pub fn insert(&mut self, p: Prefix<A>, nh: NextHop) -> Option<NextHop> {
        let mut n = 0usize;
        for i in 0..p.len() {
            let b = p.addr().bit(i) as usize;
            if self.nodes[n].child[b] == NIL {
                self.nodes.push(Node {
                    child: [NIL; 2],
                    next_hop: None,
                });
                let id = (self.nodes.len() - 1) as u32;
                self.nodes[n].child[b] = id;
            }
            n = self.nodes[n].child[b] as usize;
        }
        let old = self.nodes[n].next_hop.replace(nh);
        if old.is_none() {
            self.routes += 1;
        }
        old
    }

    fn find(&self, p: Prefix<A>) -> Option<usize> {
        let mut n = 0usize;
        for i in 0..p.len() {
            let c = self.nodes[n].child[p.addr().bit(i) as usize];
            if c == NIL {
                return None;
            }
            n = c as usize;
        }
        Some(n)
    }

    /// The next hop stored for exactly this prefix.
    pub fn get(&self, p: Prefix<A>) -> Option<NextHop> {
        self.find(p).and_then(|n| self.nodes[n].next_hop)
    }

    /// Remove; returns the removed next hop (nodes are kept).
    pub fn remove(&mut self, p: Prefix<A>) -> Option<NextHop> {
        let n = self.find(p)?;
        let old = self.nodes[n].next_hop.take();
        if old.is_some() {
            self.routes -= 1;
        }
        old
    }

    /// Longest-prefix match.
    pub fn lookup(&self, a: A) -> Option<NextHop> {
        let mut n = 0usize;
        let mut best = self.nodes[0].next_hop;
        for i in 0..A::BITS {
            let c = self.nodes[n].child[a.bit(i) as usize];
            if c == NIL {
                break;
            }
            n = c as usize;
            if let Some(nh) = self.nodes[n].next_hop {
                best = Some(nh);
            }
        }
        best
    }

    /// Bytes held by the nodes.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: u32, l: u8) -> Prefix<u32> {
        Prefix::new(a, l).unwrap()
    }

    #[test]
    fn trie_returns_longest_match_and_forgets_removed_routes() {
        let mut t = BinaryTrie::<u32>::new();
        assert_eq!(t.lookup(1), None);
        t.insert(p(0, 0), 1);
        t.insert(p(0x0A00_0000, 8), 2);
        t.insert(p(0x0A01_0000, 16), 3);
        assert_eq!(t.lookup(0x0A01_0203), Some(3));
        assert_eq!(t.lookup(0x0A02_0203), Some(2));
        assert_eq!(t.lookup(0x0B00_0000), Some(1));
        assert_eq!(t.remove(p(0x0A01_0000, 16)), Some(3));
        assert_eq!(t.lookup(0x0A01_0203), Some(2));
        assert_eq!(t.remove(p(0x0A01_0000, 16)), None);
        assert_eq!(t.len(), 2);
        t.insert(p(0xFFFF_FFFF, 32), 4);
        assert_eq!(t.lookup(0xFFFF_FFFF), Some(4));
        assert_eq!(t.lookup(0xFFFF_FFFE), Some(1));
    }
}
