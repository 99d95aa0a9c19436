//! The graph work behind every update: lock-step tree searches
//! ([`Othello::split_search`]), flips of a tree's slots, the stash, and the
//! per-key insert, remove and alter steps that [`Othello::apply_batch`] and
//! the single-key calls share.

use std::fmt::Debug;

use nexthop_hash::{Hash128, KeyBytes};

use super::{col_words, Change, ColWords, Edge, Othello, NIL, RETRY_EVERY, STASHED};
use crate::config::mask;
use crate::delta::Op;
use crate::error::UpdateError;

/// One side of a lock-step tree search: every vertex reached (`members`,
/// what a flip XORs) and the non-leaves among them, expanded in order
/// (`frontier`, expanded up to `next`).
#[derive(Default)]
pub(super) struct SideWalk {
    members: Vec<u32>,
    frontier: Vec<u32>,
    next: usize,
}

impl SideWalk {
    /// Restart from vertex `x` alone.
    fn start(&mut self, x: u32) {
        self.members.clear();
        self.frontier.clear();
        self.members.push(x);
        self.frontier.push(x);
        self.next = 0;
    }

    /// Whether every reached vertex has been expanded (the tree is whole).
    fn complete(&self) -> bool {
        self.next == self.frontier.len()
    }
}

#[derive(Clone, Copy)]
enum Side {
    A,
    B,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

impl<K: KeyBytes + Eq + Clone + Debug> Othello<K> {
    pub(super) fn new_ops(&self) -> Vec<Vec<Op>> {
        vec![Vec::new(); self.cols()]
    }

    /// Set `arr[x][c] = w`, recording a write if it changes.
    fn set_slot(&mut self, x: u32, c: usize, w: u64, ops: &mut [Vec<Op>]) {
        let slot = self.slot_mut(x, c);
        if *slot != w {
            *slot = w;
            let op = if x < self.meta.ma {
                Op::SetA { index: x, word: w }
            } else {
                Op::SetB {
                    index: x - self.meta.ma,
                    word: w,
                }
            };
            ops[c].push(op);
        }
    }

    fn next_stamp(&mut self) -> u32 {
        if self.stamp >= u32::MAX - 2 {
            let st = self.stride();
            for x in 0..self.verts.len() / st {
                self.verts[x * st] &= 0xffff_ffff;
            }
            self.stamp = 0;
        }
        self.stamp += 2;
        self.stamp
    }

    /// Lock-step search of the trees of `xa` and `xb`, not crossing edge
    /// `skip`. `None` if they are connected; otherwise the side whose tree
    /// has fewer vertices, with its vertices in `wa.members`/`wb.members`.
    ///
    /// The two sides expand one vertex each in turn. A vertex whose only
    /// edge is the one it was reached by (a leaf, about half of a small
    /// tree's vertices) is counted but never expanded: its vertex line,
    /// read for the mark, and the edge record in hand tell. Once a side has
    /// nothing left to expand its tree is complete; the other side then
    /// expands only until it is complete or has more vertices, so the side
    /// flipped is the smaller and the search costs about twice its size.
    fn split_search(&mut self, xa: u32, xb: u32, skip: u32) -> Option<Side> {
        let sa = self.next_stamp();
        let sb = sa + 1;
        let mut wa = std::mem::take(&mut self.wa);
        let mut wb = std::mem::take(&mut self.wb);
        wa.start(xa);
        wb.start(xb);
        self.set_mark(xa, sa);
        self.set_mark(xb, sb);
        let result = loop {
            if !self.expand(&mut wa, skip, sa, sb) {
                break None;
            }
            if wa.complete() {
                break Some(self.finish_other(&mut wb, skip, sb, wa.members.len(), Side::A));
            }
            if !self.expand(&mut wb, skip, sb, sa) {
                break None;
            }
            if wb.complete() {
                break Some(self.finish_other(&mut wa, skip, sa, wb.members.len(), Side::B));
            }
        };
        self.wa = wa;
        self.wb = wb;
        result
    }

    /// One side's tree is complete with `done` vertices: expand the other
    /// side `w` while it is incomplete and not larger, and return the side
    /// to flip (`complete`, the finished one, unless `w` ends up smaller).
    /// The two trees are known to be apart, so no mark of the other search
    /// can be met.
    fn finish_other(
        &mut self,
        w: &mut SideWalk,
        skip: u32,
        mine: u32,
        done: usize,
        complete: Side,
    ) -> Side {
        while !w.complete() && w.members.len() < done {
            self.expand(w, skip, mine, NIL);
        }
        if w.complete() && w.members.len() < done {
            complete.other()
        } else {
            complete
        }
    }

    /// Expand the next vertex of `w`'s frontier: count its unvisited
    /// neighbours as members and queue the non-leaves for expansion. False
    /// if the other search's mark (`theirs`) is reached (the trees are one).
    #[inline]
    fn expand(&mut self, w: &mut SideWalk, skip: u32, mine: u32, theirs: u32) -> bool {
        let x = w.frontier[w.next];
        w.next += 1;
        let ma = self.meta.ma;
        let on_a = x < ma;
        let mut e = self.head(x);
        while e != NIL {
            let ed = &self.edges[e as usize];
            // The far end, the next edge of x's list and of y's.
            let (y, next, y_next) = if on_a {
                (ma + ed.b, ed.next_a, ed.next_b)
            } else {
                (ed.a, ed.next_b, ed.next_a)
            };
            if e != skip {
                let m = self.mark(y);
                if m == theirs {
                    return false;
                }
                if m != mine {
                    self.set_mark(y, mine);
                    w.members.push(y);
                    // `y`'s list holds `e`: if `e` is its first and only
                    // edge, `y` is a leaf and has nothing to expand.
                    // Otherwise its expansion reads its list: fetch the
                    // first record it has not got (`e`'s is in cache).
                    let first = self.head(y);
                    let want = if first == e { y_next } else { first };
                    if want != NIL {
                        w.frontier.push(y);
                        nexthop_mem::prefetch(self.edges.as_ptr().wrapping_add(want as usize));
                    }
                }
            }
            e = next;
        }
        true
    }

    /// XOR column `c` of every vertex of `side`'s search result by `d[c]`.
    fn flip(&mut self, side: Side, d: &[u64], ops: &mut [Vec<Op>]) {
        let walk = match side {
            Side::A => std::mem::take(&mut self.wa),
            Side::B => std::mem::take(&mut self.wb),
        };
        for (c, &dc) in d.iter().enumerate() {
            if dc == 0 {
                continue;
            }
            for &x in &walk.members {
                let w = self.slot(x, c) ^ dc;
                self.set_slot(x, c, w, ops);
            }
        }
        match side {
            Side::A => self.wa = walk,
            Side::B => self.wb = walk,
        }
    }

    /// If vertex `x` has exactly two edges, `e` and one other, and that
    /// other edge's far end has no further edge (a leaf), the leaf: then
    /// `x` and the leaf are the whole tree on `x`'s side of `e`. Reads
    /// `x`'s two edge records and the far end's vertex line, which a batch
    /// prefetches for operations that may search.
    #[inline]
    fn leaf_beyond(&self, x: u32, e: u32) -> Option<u32> {
        let first = self.head(x);
        let ma = self.meta.ma;
        let next_of = |f: u32| {
            let ed = &self.edges[f as usize];
            if x < ma {
                ed.next_a
            } else {
                ed.next_b
            }
        };
        let second = next_of(first);
        if second == NIL || next_of(second) != NIL {
            return None;
        }
        let other = if first == e { second } else { first };
        let ed = &self.edges[other as usize];
        let (y, y_next) = if x < ma {
            (ma + ed.b, ed.next_b)
        } else {
            (ed.a, ed.next_a)
        };
        (self.head(y) == other && y_next == NIL).then_some(y)
    }

    /// XOR column `c` of vertex `x` by `d[c]`.
    #[inline]
    fn flip_vertex(&mut self, x: u32, d: &[u64], ops: &mut [Vec<Op>]) {
        for (c, &dc) in d.iter().enumerate() {
            if dc != 0 {
                let w = self.slot(x, c) ^ dc;
                self.set_slot(x, c, w, ops);
            }
        }
    }

    /// Put edge `e` into the graph if it closes no cycle, writing slots so
    /// its constraint holds. False (nothing changed) if it would close one.
    pub(super) fn attach(&mut self, e: u32, ops: &mut [Vec<Op>]) -> bool {
        let cols = self.cols();
        let Edge { a, b, .. } = self.edges[e as usize];
        let (xa, xb) = (a, self.meta.ma + b);
        let w0 = e as usize * cols;
        if self.head(xa) == NIL || self.head(xb) == NIL {
            // One end is isolated: write just that slot.
            let (free, other) = if self.head(xa) == NIL {
                (xa, xb)
            } else {
                (xb, xa)
            };
            for c in 0..cols {
                let w = self.words[w0 + c] ^ self.slot(other, c);
                self.set_slot(free, c, w, ops);
            }
        } else {
            let Some(side) = self.split_search(xa, xb, NIL) else {
                return false;
            };
            let d: ColWords = (0..cols)
                .map(|c| self.words[w0 + c] ^ self.slot(xa, c) ^ self.slot(xb, c))
                .collect();
            self.flip(side, &d, ops);
        }
        self.link(e);
        true
    }

    fn stash_put(&mut self, e: u32, ops: &mut [Vec<Op>]) {
        self.edges[e as usize].next_a = STASHED;
        self.edges[e as usize].next_b = STASHED;
        self.stash.push(e);
        self.push_stash_ops(e, ops);
    }

    fn push_stash_ops(&self, e: u32, ops: &mut [Vec<Op>]) {
        let Some(key) = self.edges[e as usize].key.as_ref() else {
            return;
        };
        let fp = key.hash128(self.meta.seed).0;
        let vmask = mask(self.cfg.value_bits as u32);
        for (c, col) in ops.iter_mut().enumerate() {
            let word = self.words[e as usize * self.cols() + c] & vmask;
            col.push(Op::StashPut { fp, word });
        }
    }

    pub(super) fn alloc_edge(&mut self, key: K, words: &[u64], a: u32, b: u32) -> u32 {
        let edge = Edge {
            a,
            b,
            next_a: NIL,
            next_b: NIL,
            key: Some(key),
        };
        let cols = self.cols();
        match self.free.pop() {
            Some(e) => {
                self.edges[e as usize] = edge;
                self.words[e as usize * cols..(e as usize + 1) * cols].copy_from_slice(words);
                e
            }
            None => {
                self.edges.push(edge);
                self.words.extend_from_slice(words);
                (self.edges.len() - 1) as u32
            }
        }
    }

    pub(super) fn finish_change(ops: Vec<Vec<Op>>, rebuilt: bool) -> Change {
        if rebuilt {
            Change::Rebuilt
        } else {
            Change::Writes(ops)
        }
    }

    /// Insert with the key's hash under the current seed already computed;
    /// appends writes to `ops`; `Ok(true)` if the structure was rebuilt.
    pub(super) fn insert_hashed(
        &mut self,
        key: K,
        h: Hash128,
        values: &[u64],
        ops: &mut [Vec<Op>],
    ) -> Result<bool, UpdateError> {
        let mut words = ColWords::new();
        self.encode_into(h, values, &mut words)?;
        if self.find_hashed(&key, h).is_some() {
            return Err(UpdateError::DuplicateKey(format!("{key:?}")));
        }
        if self.len >= self.capacity {
            // This key makes the structure grow: refuse, unchanged, if the
            // larger arrays cannot be allocated.
            Self::check_growth(&self.cfg, (self.capacity * 2).max(self.len + 1))?;
        }
        let (a, b) = self.meta.slots(h);
        let e = self.alloc_edge(key, &words, a as u32, b as u32);
        self.len += 1;
        if self.len > self.capacity {
            let cap = (self.capacity * 2).max(self.len);
            self.counters.grow_rebuilds += 1;
            self.rebuild_or_undo(cap, e)?;
            return Ok(true);
        }
        let before = ops[0].len();
        if !self.attach(e, ops) {
            self.counters.stashed += 1;
            if self.stash.len() >= self.cfg.stash_capacity && self.cfg.stash_capacity > 0 {
                // Make room: removals since the last retry may have broken
                // the cycles of stashed keys.
                self.retry_stash(ops);
            }
            if self.stash.len() >= self.cfg.stash_capacity {
                self.counters.reseed_rebuilds += 1;
                let cap = self.capacity;
                self.rebuild_or_undo(cap, e)?;
                return Ok(true);
            }
            self.stash_put(e, ops);
        }
        self.counters.slot_writes += (ops[0].len() - before) as u64;
        Ok(false)
    }

    /// Rebuild; if no seed works, drop the newest key (the one just added)
    /// and restore the previous structure so the failed insert changes
    /// nothing but the seed.
    fn rebuild_or_undo(&mut self, capacity: usize, newest: u32) -> Result<(), UpdateError> {
        match self.rebuild(capacity, false) {
            Ok(()) => Ok(()),
            Err(err) => {
                self.edges[newest as usize].key = None;
                self.edges[newest as usize].a = NIL;
                self.free.push(newest);
                self.len -= 1;
                let cap = self.capacity;
                self.rebuild(cap, false)?;
                Err(err)
            }
        }
    }

    pub(super) fn remove_hashed(
        &mut self,
        key: &K,
        h: Hash128,
        ops: &mut [Vec<Op>],
    ) -> Result<(), UpdateError> {
        let (a, b) = self.meta.slots(h);
        self.remove_at(key, h, a as u32, b as u32, ops)
    }

    /// [`Self::remove_hashed`] with the key's slots `(a, b)` under the
    /// current seed already computed.
    pub(super) fn remove_at(
        &mut self,
        key: &K,
        h: Hash128,
        a: u32,
        b: u32,
        ops: &mut [Vec<Op>],
    ) -> Result<(), UpdateError> {
        // Find the key in `a`'s list, remembering its predecessor, so the
        // unlink from that list needs no second walk.
        let mut prev = NIL;
        let mut e = self.head(a);
        while e != NIL {
            let ed = &self.edges[e as usize];
            if ed.b == b && ed.key.as_ref() == Some(key) {
                break;
            }
            prev = e;
            e = ed.next_a;
        }
        let before = ops[0].len();
        if e != NIL {
            let next = self.edges[e as usize].next_a;
            if prev == NIL {
                self.set_head(a, next);
            } else {
                self.edges[prev as usize].next_a = next;
            }
            self.unlink_b(e, self.meta.ma + b);
            if self.cfg.check_bits != 0 {
                self.invalidate_check(e, h, ops);
            }
        } else {
            e = self
                .stash
                .iter()
                .copied()
                .find(|&s| self.edges[s as usize].key.as_ref() == Some(key))
                .ok_or_else(|| UpdateError::NotFound(format!("{key:?}")))?;
            self.stash.retain(|&s| s != e);
            for col in ops.iter_mut() {
                col.push(Op::StashDel { fp: h.0 });
            }
        }
        self.edges[e as usize].key = None;
        self.edges[e as usize].a = NIL;
        self.free.push(e);
        self.len -= 1;
        // Retrying stashed keys costs a tree search each and rarely succeeds:
        // do it once per RETRY_EVERY removals (and when an insert finds the
        // stash full), not on every removal.
        self.removes_since_retry += 1;
        if !self.stash.is_empty()
            && (self.removes_since_retry >= RETRY_EVERY || self.len == self.stash.len())
        {
            self.removes_since_retry = 0;
            self.retry_stash(ops);
        }
        self.counters.slot_writes += (ops[0].len() - before) as u64;
        Ok(())
    }

    /// With a check field, make the just-unlinked edge `e`'s slots stop
    /// matching its key, so a removed key reads as a miss instead of keeping
    /// its old value: XOR a nonzero check-field pattern (taken from the
    /// key's hash, so successive removals do not cancel out) into one side.
    /// An isolated
    /// end costs one write; otherwise the two ends are now in different
    /// trees and the smaller tree is flipped whole, which keeps every
    /// remaining key's constraint.
    fn invalidate_check(&mut self, e: u32, h: Hash128, ops: &mut [Vec<Op>]) {
        let Edge { a, b, .. } = self.edges[e as usize];
        let (xa, xb) = (a, self.meta.ma + b);
        let pattern = (h.lo() ^ h.hi().rotate_left(17)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let pattern = (pattern >> 32) & mask(self.cfg.check_bits as u32);
        let d = pattern.max(1) << self.cfg.value_bits;
        let cols = self.cols();
        if self.head(xa) == NIL || self.head(xb) == NIL {
            let x = if self.head(xa) == NIL { xa } else { xb };
            for c in 0..cols {
                let w = self.slot(x, c) ^ d;
                self.set_slot(x, c, w, ops);
            }
        } else if let Some(side) = self.split_search(xa, xb, NIL) {
            let dv = col_words(cols, d);
            self.flip(side, &dv, ops);
        }
    }

    /// Move stashed keys back into the graph where they no longer close a
    /// cycle. Slot writes come before the stash removal.
    fn retry_stash(&mut self, ops: &mut [Vec<Op>]) {
        let mut k = 0;
        while k < self.stash.len() {
            let e = self.stash[k];
            if self.attach(e, ops) {
                self.stash.swap_remove(k);
                if let Some(key) = self.edges[e as usize].key.as_ref() {
                    let fp = key.hash128(self.meta.seed).0;
                    for col in ops.iter_mut() {
                        col.push(Op::StashDel { fp });
                    }
                }
            } else {
                k += 1;
            }
        }
    }

    pub(super) fn alter_one(
        &mut self,
        key: &K,
        column: Option<usize>,
        values: &[u64],
    ) -> Result<Change, UpdateError> {
        let mut ops = self.new_ops();
        let h = key.hash128(self.meta.seed);
        self.alter_hashed(key, h, column, values, &mut ops)?;
        Ok(Change::Writes(ops))
    }

    /// Alter `column` (all columns when `None`) of `key` to `values`.
    pub(super) fn alter_hashed(
        &mut self,
        key: &K,
        h: Hash128,
        column: Option<usize>,
        values: &[u64],
        ops: &mut [Vec<Op>],
    ) -> Result<(), UpdateError> {
        let e = self
            .find_hashed(key, h)
            .ok_or_else(|| UpdateError::NotFound(format!("{key:?}")))?;
        let cols = self.cols();
        let vmask = mask(self.cfg.value_bits as u32);
        let too_wide = |v: u64| UpdateError::ValueTooWide {
            value: v,
            bits: self.cfg.value_bits,
        };
        let expected = if column.is_some() { 1 } else { cols };
        if values.len() != expected {
            return Err(UpdateError::Columns {
                expected,
                got: values.len(),
            });
        }
        if cols == 1 {
            // One column (the FIB of one switch): no per-column scratch.
            let v = values[0];
            if v & !vmask != 0 {
                return Err(too_wide(v));
            }
            let w = self.words[e as usize];
            let dc = (v | (w & !vmask)) ^ w;
            self.words[e as usize] = w ^ dc;
            self.flip_edge(e, h, &[dc], ops);
            return Ok(());
        }
        let w0 = e as usize * cols;
        let check = self.words[w0] & !vmask;
        let mut d = col_words(cols, 0);
        for (i, &v) in values.iter().enumerate() {
            if v & !vmask != 0 {
                return Err(too_wide(v));
            }
            let c = column.unwrap_or(i);
            d[c] = (v | check) ^ self.words[w0 + c];
        }
        for (w, dc) in self.words[w0..w0 + cols].iter_mut().zip(d.iter()) {
            *w ^= dc;
        }
        self.flip_edge(e, h, &d, ops);
        Ok(())
    }

    /// Make the data plane follow a change of edge `e`'s slot words by
    /// `d` (one difference per column; its words are already updated): a
    /// stashed key rewrites its stash entry, a key in the graph XORs the
    /// smaller side of its tree.
    #[inline]
    fn flip_edge(&mut self, e: u32, h: Hash128, d: &[u64], ops: &mut [Vec<Op>]) {
        let before = ops[0].len();
        if self.edges[e as usize].next_a == STASHED {
            let (cols, vmask) = (self.cols(), mask(self.cfg.value_bits as u32));
            for (c, &dc) in d.iter().enumerate() {
                if dc != 0 {
                    ops[c].push(Op::StashPut {
                        fp: h.0,
                        word: self.words[e as usize * cols + c] & vmask,
                    });
                }
            }
        } else if d.iter().any(|&x| x != 0) {
            let Edge {
                a,
                b,
                next_a,
                next_b,
                ..
            } = self.edges[e as usize];
            let (xa, xb) = (a, self.meta.ma + b);
            // Most keys have an end of degree 1 (a leaf of the tree): then
            // that end is the smaller half and one slot write suffices.
            if next_a == NIL && self.head(xa) == e {
                self.flip_vertex(xa, d, ops);
            } else if next_b == NIL && self.head(xb) == e {
                self.flip_vertex(xb, d, ops);
            } else if let Some(y) = self.leaf_beyond(xa, e).or_else(|| self.leaf_beyond(xb, e)) {
                // The next most common shape (two thirds of the rest at
                // 1e7 keys): an end whose one other edge leads to a leaf.
                // That end and the leaf are a side of two vertices, and the
                // other side has at least two.
                let x = if y < self.meta.ma { xb } else { xa };
                self.flip_vertex(x, d, ops);
                self.flip_vertex(y, d, ops);
            } else {
                let side = self.split_search(xa, xb, e).unwrap_or(Side::A);
                self.flip(side, d, ops);
            }
        }
        self.counters.slot_writes += (ops[0].len() - before) as u64;
    }
}
