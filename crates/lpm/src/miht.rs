//! MIHT, the multi-index hybrid trie (Lin, Hsu, Hsieh 2014; paper
//! section 5): the paper's competitor, a baseline here.
//!
//! Every prefix of length `>= K` is split into its `K`-bit key and its
//! suffix; keys live in a B+ tree of order 16 whose nodes are one 64-byte
//! line of sixteen sorted `u32` keys (searched by binary search), and each
//! key's leaf points to a priority trie holding the suffixes. Prefixes
//! shorter than `K` are "keyless" and live in the priority trie `PT[-1]`.
//! IPv4 uses `K = 16` (the paper's (16,16)-MIHT), IPv6 `K = 32`.
//!
//! Priority trie (Lim, Yim, Lee 2007): a binary trie where each node holds
//! at most one prefix. Prefixes are inserted longest first; each takes the
//! first empty node on its path, becoming a *priority* prefix when that node
//! is shallower than its length. A shorter prefix whose own node holds a
//! priority prefix takes the node (as an ordinary prefix) and pushes the
//! priority prefix down its path. A priority prefix is longer than every
//! prefix below it, so a lookup returns at the first matching priority node
//! and otherwise remembers the last matching ordinary node. A prefix being
//! pushed down that meets a shorter priority prefix swaps with it, so the
//! invariant holds after every displacement.
//!
//! Built once from a route list (a lookup baseline; no updates).

use crate::addr::{Address, NextHop, Prefix, NO_ROUTE};
use crate::rib::Rib;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct PNode {
    /// Suffix bits, left-aligned in 128 bits; zero after `len`.
    bits: u128,
    next_hop: NextHop,
    len: u8,
    /// Holds a prefix.
    used: bool,
    /// The prefix is a priority prefix (`len` > node depth).
    priority: bool,
    child: [u32; 2],
}

impl PNode {
    fn empty() -> Self {
        PNode {
            bits: 0,
            next_hop: NO_ROUTE,
            len: 0,
            used: false,
            priority: false,
            child: [NIL; 2],
        }
    }
}

#[inline(always)]
fn top_mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    }
}

#[inline(always)]
fn bit(x: u128, i: u8) -> usize {
    (x >> (127 - i)) as usize & 1
}

/// A B+ tree node: sixteen sorted keys (unused slots `u32::MAX`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct BNode {
    keys: [u32; 16],
}

const _: () = assert!(std::mem::size_of::<BNode>() == 64);

/// A MIHT over addresses `A` with `K`-bit keys.
#[derive(Clone, Debug)]
pub struct Miht<A, const K: u8> {
    /// B+ tree levels, root first; children of node `j` at one level are
    /// nodes `16j .. 16j+16` of the next; a separator is its child's
    /// largest key.
    levels: Vec<Vec<BNode>>,
    /// Trie root of each leaf key, in key order.
    roots: Vec<u32>,
    /// Root of `PT[-1]`.
    keyless: u32,
    nodes: Vec<PNode>,
    _a: std::marker::PhantomData<A>,
}

/// IPv4 (16,16)-MIHT.
pub type Miht4 = Miht<u32, 16>;
/// IPv6 MIHT with 32-bit keys.
pub type Miht6 = Miht<u128, 32>;

impl<A: Address, const K: u8> Miht<A, K> {
    /// Build from routes (a later route for a prefix replaces an earlier one).
    pub fn build(routes: &[(Prefix<A>, NextHop)]) -> Self {
        let mut rib = Rib::new();
        for &(p, nh) in routes {
            rib.insert(p, nh);
        }
        let mut all = rib.sorted();
        // Longest first (priority-trie insertion order).
        all.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.addr().cmp(&b.0.addr())));
        let mut keys: Vec<u32> = all
            .iter()
            .filter(|(p, _)| p.len() >= K)
            .map(|(p, _)| p.addr().top(K).to_u128() as u32)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut m = Miht {
            levels: Vec::new(),
            roots: Vec::new(),
            keyless: 0,
            nodes: vec![PNode::empty()],
            _a: std::marker::PhantomData,
        };
        m.roots = keys
            .iter()
            .map(|_| {
                m.nodes.push(PNode::empty());
                (m.nodes.len() - 1) as u32
            })
            .collect();
        for (p, nh) in all {
            let left = p.addr().to_u128() << (128 - A::BITS as u32);
            if p.len() >= K {
                let key = p.addr().top(K).to_u128() as u32;
                let Ok(i) = keys.binary_search(&key) else {
                    continue;
                };
                let bits = if K >= 128 { 0 } else { left << K };
                m.place(m.roots[i], bits, p.len() - K, nh);
            } else {
                m.place(m.keyless, left, p.len(), nh);
            }
        }
        // B+ tree levels, leaves first, then reversed.
        let mut lv: Vec<Vec<BNode>> = Vec::new();
        let mut cur: Vec<u32> = keys.clone();
        loop {
            let nodes: Vec<BNode> = cur
                .chunks(16)
                .map(|c| {
                    let mut n = BNode {
                        keys: [u32::MAX; 16],
                    };
                    n.keys[..c.len()].copy_from_slice(c);
                    n
                })
                .collect();
            let seps: Vec<u32> = cur.chunks(16).map(|c| c[c.len() - 1]).collect();
            lv.push(nodes);
            if seps.len() <= 1 {
                break;
            }
            cur = seps;
        }
        lv.reverse();
        m.levels = lv;
        m
    }

    fn place(&mut self, mut node: u32, bits: u128, len: u8, nh: NextHop) {
        let (mut bits, mut len, mut nh) = (bits, len, nh);
        let mut depth: u8 = 0;
        loop {
            let n = &mut self.nodes[node as usize];
            if !n.used {
                *n = PNode {
                    bits,
                    next_hop: nh,
                    len,
                    used: true,
                    priority: depth < len,
                    child: n.child,
                };
                return;
            }
            if depth == len {
                // Our own node holds a longer (priority) prefix: take it and
                // push that one down.
                std::mem::swap(&mut n.bits, &mut bits);
                std::mem::swap(&mut n.len, &mut len);
                std::mem::swap(&mut n.next_hop, &mut nh);
                n.priority = false;
            } else if n.priority && n.len < len {
                // A pushed-down prefix meets a shorter priority prefix: it
                // takes the node (priority stays longest-in-subtree) and the
                // shorter one continues down.
                std::mem::swap(&mut n.bits, &mut bits);
                std::mem::swap(&mut n.len, &mut len);
                std::mem::swap(&mut n.next_hop, &mut nh);
            }
            let b = bit(bits, depth);
            let c = self.nodes[node as usize].child[b];
            node = if c == NIL {
                self.nodes.push(PNode::empty());
                let id = (self.nodes.len() - 1) as u32;
                self.nodes[node as usize].child[b] = id;
                id
            } else {
                c
            };
            depth += 1;
        }
    }

    #[inline]
    fn trie_lookup(&self, root: u32, s: u128) -> Option<NextHop> {
        let mut node = root;
        let mut depth = 0u8;
        let mut best = None;
        while node != NIL {
            let n = &self.nodes[node as usize];
            if n.used && (s ^ n.bits) & top_mask(n.len) == 0 {
                if n.priority {
                    return Some(n.next_hop);
                }
                best = Some(n.next_hop);
            }
            if depth == 128 {
                break;
            }
            node = n.child[bit(s, depth)];
            depth += 1;
        }
        best
    }

    #[inline]
    fn find_key(&self, key: u32) -> Option<usize> {
        let mut idx = 0usize;
        for (li, level) in self.levels.iter().enumerate() {
            let node = level.get(idx)?;
            // Lower bound: first slot whose key >= key.
            let i = node.keys.partition_point(|&k| k < key);
            if i == 16 {
                return None;
            }
            if li + 1 == self.levels.len() {
                let at = idx * 16 + i;
                return (at < self.roots.len() && node.keys[i] == key).then_some(at);
            }
            idx = idx * 16 + i;
            if idx >= self.levels[li + 1].len() {
                return None;
            }
        }
        None
    }

    /// Longest-prefix match.
    #[inline]
    pub fn lookup(&self, a: A) -> Option<NextHop> {
        let left = a.to_u128() << (128 - A::BITS as u32);
        if !self.levels.is_empty() {
            if let Some(i) = self.find_key(a.top(K).to_u128() as u32) {
                let s = if K >= 128 { 0 } else { left << K };
                if let Some(nh) = self.trie_lookup(self.roots[i], s) {
                    return Some(nh);
                }
            }
        }
        self.trie_lookup(self.keyless, left)
    }

    /// Look up a batch ([`NO_ROUTE`] for misses); returns the hit count.
    pub fn lookup_batch(&self, addrs: &[A], out: &mut [NextHop]) -> usize {
        let mut hits = 0;
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(*a).unwrap_or(NO_ROUTE);
            hits += (*o != NO_ROUTE) as usize;
        }
        hits
    }

    /// Bytes of the B+ tree, trie roots and trie nodes.
    pub fn memory_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.len() * 64).sum::<usize>()
            + self.roots.len() * 4
            + self.nodes.len() * std::mem::size_of::<PNode>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_prefix_is_pushed_down_by_a_shorter_own_node_prefix() {
        // Inserted longest first: 10.1.2.0/24 takes the root of its trie as
        // a priority prefix, then 10.1.0.0/16 (suffix length 0) takes the
        // root back as an ordinary prefix and pushes the /24 down.
        let p = |a: u32, l| Prefix::new(a, l).unwrap();
        let m = Miht4::build(&[
            (p(0x0A01_0200, 24), 1),
            (p(0x0A01_0000, 16), 2),
            (p(0x0A00_0000, 8), 3),
        ]);
        assert_eq!(m.lookup(0x0A01_0203), Some(1));
        assert_eq!(m.lookup(0x0A01_0303), Some(2));
        assert_eq!(m.lookup(0x0A02_0303), Some(3));
        assert_eq!(m.lookup(0x0B02_0303), None);
    }

    #[test]
    fn pushed_down_prefix_overtakes_shorter_priority_prefix() {
        // Suffixes after /16: 0011 (the /20), 001 (/19), 0 (/17), empty
        // (/16). The /16 pushes 0011 down past the priority 001, which must
        // give way, or 10.1.48.0 would match the /19.
        let p = |a: u32, l| Prefix::new(a, l).unwrap();
        let routes = [
            (p(0x0A01_0000, 17), 0),
            (p(0x0A01_0000, 16), 1),
            (p(0x0A01_3000, 20), 2),
            (p(0x0A01_2000, 19), 4),
        ];
        let m = Miht4::build(&routes);
        assert_eq!(m.lookup(0x0A01_3000), Some(2));
        assert_eq!(m.lookup(0x0A01_2000), Some(4));
        assert_eq!(m.lookup(0x0A01_0000), Some(0));
        assert_eq!(m.lookup(0x0A01_8000), Some(1));
    }

    #[test]
    fn empty_and_keyless_only_tables_answer() {
        let m = Miht6::build(&[]);
        assert_eq!(m.lookup(u128::MAX), None);
        let m = Miht6::build(&[(Prefix::new(0u128, 0).unwrap(), 9)]);
        assert_eq!(m.lookup(u128::MAX), Some(9));
    }
}
