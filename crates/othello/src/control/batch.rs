//! [`Othello::apply_batch`]: a batch of inserts, removes and alters, each
//! key's vertices and edges prefetched a few operations ahead.

use std::fmt::Debug;

use nexthop_hash::{Hash128, KeyBytes};

use super::{BatchError, BatchOp, Change, Othello, NIL};

impl<K: KeyBytes + Eq + Clone + Debug> Othello<K> {
    /// Apply many operations as one change, hiding memory latency: the keys
    /// are hashed up front and the graph vertices (then the first edges) of
    /// the operations a few places ahead are prefetched while the current one
    /// runs. The returned change holds the writes of all of them in order
    /// (or is a rebuild if any operation rebuilt the structure).
    ///
    /// Stops at the first failing operation: the error carries its index and
    /// the change made by the operations before it, which are applied.
    pub fn apply_batch(&mut self, batch: Vec<BatchOp<K>>) -> Result<Change, BatchError> {
        const AHEAD: usize = 8;
        let n = batch.len();
        let mut ops = self.new_ops();
        for col in &mut ops {
            col.reserve(n + n / 2);
        }
        let mut rebuilt = false;
        // Every rebuild bumps the generation (and changes seed and sizes).
        let generation = self.meta.generation;
        // Per operation: the key's hash and its two vertices, computed once.
        let mut at: Vec<(Hash128, u32, u32)> = Vec::with_capacity(n);
        at.extend(batch.iter().map(|op| self.locate(op.key())));
        // Removals need no tree search and read no slot words.
        let searches: Vec<bool> = batch
            .iter()
            .map(|op| !matches!(op, BatchOp::Remove(_)))
            .collect();
        for &(_, xa, xb) in &at[..n.min(2 * AHEAD)] {
            self.prefetch_vertices(xa, xb);
        }
        // List heads read by the first-edge stage, for the second stage of
        // the same operation `AHEAD / 2` iterations later (slot `j % AHEAD`
        // for operation `j`; stale by then at worst, which only makes a
        // prefetch useless).
        let mut heads = [(NIL, NIL); AHEAD];
        for (i, op) in batch.into_iter().enumerate() {
            let h = if self.meta.generation == generation {
                if let Some(&(_, xa, xb)) = at.get(i + 2 * AHEAD) {
                    self.prefetch_vertices(xa, xb);
                }
                if let Some(&(_, xa, xb)) = at.get(i + AHEAD) {
                    heads[i % AHEAD] = self.prefetch_first_edges(xa, xb, searches[i + AHEAD]);
                }
                if let Some(&(_, xa, xb)) = at.get(i + AHEAD / 2) {
                    let j = (i + AHEAD / 2) % AHEAD;
                    self.prefetch_second(xa, xb, heads[j], searches[i + AHEAD / 2]);
                }
                at[i].0
            } else {
                // A rebuild changed seed and sizes: hash the rest as they run,
                // without prefetching (rebuilds are rare).
                op.key().hash128(self.meta.seed)
            };
            let r = match op {
                BatchOp::Insert(k, v) => self.insert_hashed(k, h, &[v], &mut ops),
                BatchOp::Remove(k) => {
                    let (a, b) = if self.meta.generation == generation {
                        (at[i].1, at[i].2 - self.meta.ma)
                    } else {
                        let (a, b) = self.meta.slots(h);
                        (a as u32, b as u32)
                    };
                    self.remove_at(&k, h, a, b, &mut ops).map(|_| false)
                }
                BatchOp::Alter(k, v) => self
                    .alter_hashed(&k, h, Some(0), &[v], &mut ops)
                    .map(|_| false),
            };
            match r {
                Ok(rb) => rebuilt |= rb,
                Err(error) => {
                    return Err(BatchError {
                        index: i,
                        error,
                        applied: Self::finish_change(ops, rebuilt),
                    })
                }
            }
        }
        Ok(Self::finish_change(ops, rebuilt))
    }

    /// A key's hash under the current seed and its two vertex ids.
    #[inline(always)]
    pub(super) fn locate(&self, key: &K) -> (Hash128, u32, u32) {
        let h = key.hash128(self.meta.seed);
        let (a, b) = self.meta.slots(h);
        (h, a as u32, self.meta.ma + b as u32)
    }

    #[inline(always)]
    fn prefetch_vertices(&self, xa: u32, xb: u32) {
        let st = self.stride();
        nexthop_mem::prefetch(self.verts.as_ptr().wrapping_add(xa as usize * st));
        nexthop_mem::prefetch(self.verts.as_ptr().wrapping_add(xb as usize * st));
    }

    /// The second stage of a batch operation's prefetch, reading the lines
    /// the earlier stages fetched: the second record of each end's list
    /// when the first is not the key's edge (a lookup or an unlink walks
    /// past it), and for an insert or alter that will search its tree (both
    /// ends have other edges) the first neighbours of both ends. Only a
    /// hint: the operation itself finds everything again.
    #[inline(always)]
    fn prefetch_second(&self, xa: u32, xb: u32, (ea, eb): (u32, u32), search: bool) {
        let b = xb.wrapping_sub(self.meta.ma);
        // `NIL` (an isolated end: nothing to walk, no search) is out of range.
        let (Some(ra), Some(rb)) = (self.edges.get(ea as usize), self.edges.get(eb as usize))
        else {
            return;
        };
        if ra.b != b && ra.next_a != NIL {
            nexthop_mem::prefetch(self.edges.as_ptr().wrapping_add(ra.next_a as usize));
            if search {
                nexthop_mem::prefetch(
                    self.words
                        .as_ptr()
                        .wrapping_add(ra.next_a as usize * self.cols()),
                );
            }
        }
        if rb.a != xa && rb.next_b != NIL {
            nexthop_mem::prefetch(self.edges.as_ptr().wrapping_add(rb.next_b as usize));
        }
        // An edge that is the only one of either end (a leaf) needs no search.
        let leaf = (ra.b == b && ra.next_a == NIL) || (rb.a == xa && rb.next_b == NIL);
        if search && !leaf {
            self.prefetch_neighbours(xa, xb);
        }
    }

    /// Prefetch the first neighbours of both ends (the first level of a
    /// tree search), reading the edges prefetched earlier.
    #[inline(always)]
    fn prefetch_neighbours(&self, xa: u32, xb: u32) {
        let st = self.stride();
        for x in [xa, xb] {
            let mut e = self.head(x);
            let mut budget = 2;
            while e != NIL && budget > 0 {
                let (y, next) = self.adj_next(e, x);
                nexthop_mem::prefetch(self.verts.as_ptr().wrapping_add(y as usize * st));
                e = next;
                budget -= 1;
            }
        }
    }

    /// Prefetch the first edge of both ends' lists, and for side A (where
    /// keys are looked up) that edge's key, and its slot words when the
    /// operation reads them (`words`: not for a removal).
    /// Returns the two list heads it read.
    #[inline(always)]
    fn prefetch_first_edges(&self, xa: u32, xb: u32, words: bool) -> (u32, u32) {
        let ea = self.head(xa);
        if ea != NIL {
            nexthop_mem::prefetch(self.edges.as_ptr().wrapping_add(ea as usize));
            if words {
                nexthop_mem::prefetch(self.words.as_ptr().wrapping_add(ea as usize * self.cols()));
            }
        }
        let eb = self.head(xb);
        if eb != NIL {
            nexthop_mem::prefetch(self.edges.as_ptr().wrapping_add(eb as usize));
        }
        (ea, eb)
    }
}
