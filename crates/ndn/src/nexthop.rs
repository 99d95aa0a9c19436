//! Next hops (multipath, with costs) and the interned table of next-hop
//! sets that FIB entries refer to by a 24-bit id.

use std::collections::HashMap;

use crate::error::FibError;

/// One next hop: an outgoing face and its routing cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NextHop {
    /// Face id.
    pub face: u32,
    /// Cost (lower is preferred).
    pub cost: u32,
}

/// Largest next-hop set id; ids are 24 bits in an entry's role word and
/// `NH_NONE` (all ones) means "no match".
pub const MAX_NH_SETS: u32 = (1 << 24) - 1;
/// The "no next hops" id.
pub const NH_NONE: u32 = (1 << 24) - 1;

/// Normalise a rule's next hops: non-empty, no face twice, stably sorted
/// by cost (ties keep the given order).
pub fn normalize(hops: &[NextHop]) -> Result<Vec<NextHop>, FibError> {
    if hops.is_empty() {
        return Err(FibError::NoNextHops);
    }
    let mut seen = std::collections::HashSet::new();
    for h in hops {
        if !seen.insert(h.face) {
            return Err(FibError::DuplicateFace(h.face));
        }
    }
    let mut v = hops.to_vec();
    v.sort_by_key(|h| h.cost);
    Ok(v)
}

/// Interned next-hop sets: the hot part (`offsets`, `hops`) is read by
/// lookups; `index` and `refs` are the control part.
#[derive(Clone, Debug, Default)]
pub struct NhTable {
    /// `hops[offsets[id]..offsets[id + 1]]` is set `id`.
    pub(crate) offsets: Vec<u32>,
    pub(crate) hops: Vec<NextHop>,
    index: HashMap<Vec<NextHop>, u32>,
    refs: Vec<u32>,
}

impl NhTable {
    /// An empty table.
    pub fn new() -> NhTable {
        NhTable {
            offsets: vec![0],
            ..Default::default()
        }
    }

    /// Rebuild from stored sets (for loading a FIB file); reference counts
    /// start at zero and are recounted by the caller if it updates.
    pub(crate) fn from_parts(offsets: Vec<u32>, hops: Vec<NextHop>) -> NhTable {
        let n = offsets.len().saturating_sub(1);
        let mut index = HashMap::with_capacity(n);
        for id in 0..n {
            let s = &hops[offsets[id] as usize..offsets[id + 1] as usize];
            index.entry(s.to_vec()).or_insert(id as u32);
        }
        NhTable {
            offsets,
            hops,
            index,
            refs: vec![0; n],
        }
    }

    /// Number of distinct sets ever interned (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether no set was interned.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hops of set `id` (empty for `NH_NONE` or an unknown id).
    #[inline]
    pub fn get(&self, id: u32) -> &[NextHop] {
        let i = id as usize;
        if i + 1 >= self.offsets.len() {
            return &[];
        }
        &self.hops[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Intern a normalised set and take a reference to it.
    pub(crate) fn acquire(&mut self, hops: &[NextHop]) -> Result<u32, FibError> {
        if let Some(&id) = self.index.get(hops) {
            self.refs[id as usize] += 1;
            return Ok(id);
        }
        let id = self.len() as u32;
        if id >= MAX_NH_SETS {
            return Err(FibError::TooManyNextHopSets(MAX_NH_SETS));
        }
        self.hops.extend_from_slice(hops);
        self.offsets.push(self.hops.len() as u32);
        self.index.insert(hops.to_vec(), id);
        self.refs.push(1);
        Ok(id)
    }

    /// Drop a reference (sets are kept for reuse; ids stay stable).
    pub(crate) fn release(&mut self, id: u32) {
        if let Some(r) = self.refs.get_mut(id as usize) {
            *r = r.saturating_sub(1);
        }
    }

    /// Bytes of the hot part.
    pub fn hot_bytes(&self) -> usize {
        self.offsets.len() * 4 + self.hops.len() * std::mem::size_of::<NextHop>()
    }
}
