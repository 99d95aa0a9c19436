//! The decision cache: an exact-match front over the whole header key, a
//! tuple-space wildcard classifier behind it (one subtable per distinct
//! mask, probed in order of hits), LRU capacity, mask admission, and the
//! state-id index that revokes exactly the entries a changed piece of app
//! state was used for. See the crate README for the algorithm, invariants
//! and costs.

use std::collections::HashMap;

use hashbrown::HashTable;
use smallvec::SmallVec;
use thiserror::Error;

use crate::action::{Actions, Outcome};
use crate::key::{HeaderKey, Mask, PortId, KEY_BYTES, KEY_WORDS};
use crate::seeded::SeededHash;

/// Keys per group in [`DecisionCache::lookup_batch`].
pub const BATCH: usize = 32;
/// Slots per exact-front bucket (16 bytes each: one cache line).
const FRONT_WAYS: usize = 4;
/// "No entry" in the LRU links.
const NIL: u32 = u32::MAX;

/// A piece of app state a decision depended on (a route, a MAC binding, a
/// pending DHT lookup). Issued by [`DecisionCache::new_state_id`], never
/// reused: a changed state gets a new id (paper §6.1).
///
/// The number is a slot of the cache's state table (low 32 bits) and that
/// slot's generation (high 32 bits, from 1): the index is a direct array
/// access, and a slot freed by `removed` comes back under a new
/// generation, so an old id stays dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(u64);

impl StateId {
    /// The id's number (never 0).
    pub fn get(self) -> u64 {
        self.0
    }

    fn slot(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    fn gen(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// One slot of the state table.
#[derive(Clone, Debug, Default)]
struct StateSlot {
    /// Generation of the id issued last from this slot (0: never).
    gen: u32,
    live: bool,
    /// The entries that registered the live id, with each entry's
    /// generation then. An entry freed for another reason (eviction, a
    /// different id) is not taken out (that would touch a random other
    /// entry per id): it goes stale, and the list is compacted when stale
    /// ones outnumber live ones, so it stays within twice its live length
    /// (plus [`COMPACT_MIN`]).
    deps: Vec<(u32, u32)>,
    /// Stale pairs in `deps`.
    stale: u32,
}

/// Dependents lists with fewer stale pairs are not compacted.
const COMPACT_MIN: u32 = 16;

enum StateStatus {
    Live,
    Removed,
    Unknown,
}

/// A cached entry, as a lookup returns it. Stays valid until the entry is
/// revoked, evicted or replaced; then every accessor answers `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryId {
    idx: u32,
    gen: u32,
}

/// A decision's state ids: inline up to four (no allocation per decision
/// for the usual one or two); build one with `smallvec![...]`,
/// `StateIds::new()` or `vec.into()`.
pub type StateIds = SmallVec<[StateId; 4]>;

/// What an app decided for one packet, as the cache stores it: the bits
/// (and whether the ingress port) it looked at, the state it used, and the
/// actions. Built by the API layer from an `InPkt`'s marks and an
/// `OutPkt`'s registrations and destinations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Marked header bits.
    pub mask: Mask,
    /// Registered state ids (inline up to four: a decision usually
    /// registers one or two, and this is made once per app call).
    pub states: StateIds,
    /// Outputs, rewrites, primitives.
    pub actions: Actions,
}

/// Sizes and policies of a [`DecisionCache`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Wildcard entries held at most; the least recently used is evicted
    /// to make room.
    pub capacity: usize,
    /// Exact-front slots (rounded up to a power of two, at least 4); 0
    /// turns the front off.
    pub front_slots: usize,
    /// Distinct masks (subtables) at most: bounds the subtables a lookup
    /// probes.
    pub max_masks: usize,
    /// Subtables a new mask gets at once: while fewer than this many
    /// exist, a mask without a subtable is admitted on its first decision.
    /// An app's few masks never wait; a flood of one-shot masks (the
    /// tuple-space-explosion attack) fills at most these before probation.
    pub free_masks: usize,
    /// Past `free_masks` subtables, a mask without a subtable gets one
    /// only after this many decisions asked for it within one ranking
    /// epoch (1: at once, always).
    pub admit_after: u32,
    /// Lookups between re-rankings of the subtables by hits (each
    /// re-ranking also halves the hit counts, so ranks follow recent
    /// traffic, and forgets masks on probation).
    pub rerank_every: u64,
    /// State ids one decision may register at most.
    pub max_states_per_entry: usize,
    /// Live (issued, not yet removed) state ids at most.
    pub max_state_ids: usize,
    /// Seed of the hash functions (pick a random one per process: keys are
    /// attacker-controlled).
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity: 1 << 16,
            front_slots: 1 << 14,
            max_masks: 64,
            free_masks: 8,
            admit_after: 2,
            rerank_every: 1 << 16,
            max_states_per_entry: 16,
            max_state_ids: 1 << 22,
            seed: 0x5df0_c0de_2010_0001,
        }
    }
}

/// A [`Config`] the cache cannot run with.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `capacity` is 0 or above 2^31.
    #[error("capacity {0} must be in 1..=2^31")]
    Capacity(usize),
    /// `front_slots` above 2^30.
    #[error("front_slots {0} must be at most 2^30")]
    FrontSlots(usize),
    /// `max_masks` is 0 or above 4096.
    #[error("max_masks {0} must be in 1..=4096")]
    MaxMasks(usize),
    /// `admit_after` is 0.
    #[error("admit_after must be at least 1")]
    AdmitAfter,
    /// `rerank_every` is 0.
    #[error("rerank_every must be at least 1")]
    RerankEvery,
    /// `max_states_per_entry` is 0 or above 255.
    #[error("max_states_per_entry {0} must be in 1..=255")]
    StatesPerEntry(usize),
    /// `max_state_ids` is 0.
    #[error("max_state_ids must be at least 1")]
    StateIds,
}

impl Config {
    /// Check every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.capacity == 0 || self.capacity > 1 << 31 {
            return Err(ConfigError::Capacity(self.capacity));
        }
        if self.front_slots > 1 << 30 {
            return Err(ConfigError::FrontSlots(self.front_slots));
        }
        if self.max_masks == 0 || self.max_masks > 4096 {
            return Err(ConfigError::MaxMasks(self.max_masks));
        }
        if self.admit_after == 0 {
            return Err(ConfigError::AdmitAfter);
        }
        if self.rerank_every == 0 {
            return Err(ConfigError::RerankEvery);
        }
        if self.max_states_per_entry == 0 || self.max_states_per_entry > 255 {
            return Err(ConfigError::StatesPerEntry(self.max_states_per_entry));
        }
        if self.max_state_ids == 0 {
            return Err(ConfigError::StateIds);
        }
        Ok(())
    }
}

/// A decision the app got wrong: the packet is still sent as decided,
/// but nothing is cached.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstallError {
    /// A mark lies past the end of the frame the decision was made on.
    #[error("a mark reaches byte {needed} but the frame has {got} header byte(s)")]
    MarkBeyondFrame {
        /// Bytes the marks need.
        needed: usize,
        /// Header bytes the frame had.
        got: usize,
    },
    /// A rewrite or primitive lies past the end of the frame.
    #[error("an action reaches byte {needed} but the frame has {got} header byte(s)")]
    ActionBeyondFrame {
        /// Bytes the actions need.
        needed: usize,
        /// Header bytes the frame had.
        got: usize,
    },
    /// More state ids than `max_states_per_entry`.
    #[error("{got} state ids registered, at most {max}")]
    TooManyStates {
        /// Registered.
        got: usize,
        /// Allowed.
        max: usize,
    },
    /// A state id this cache never issued.
    #[error("state id {0} was never issued")]
    UnknownState(u64),
}

/// Why a well-formed decision was not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotCached {
    /// No bits, no ingress port and no state marked: the paper's sign not
    /// to cache (replies such as ARP answered by the app itself).
    NoDependencies,
    /// A registered state id was removed while the decision was being
    /// made: the decision is already stale.
    StaleState(StateId),
    /// The mask is new and on probation (`admit_after`).
    MaskProbation,
    /// The mask is new, the mask cap is reached and every subtable has had
    /// more recent hits than the newcomer's requests.
    MaskCapFull,
}

/// What [`DecisionCache::install`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Installed {
    /// Cached as this entry.
    Cached(EntryId),
    /// Not cached, for this reason.
    NotCached(NotCached),
}

/// A state id that cannot be issued.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// `max_state_ids` ids are live.
    #[error("{0} state ids are live (max_state_ids); remove some first")]
    TooMany(usize),
}

/// Event counts since the cache was made (gauges: [`DecisionCache::len`],
/// [`DecisionCache::masks`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Keys looked up.
    pub lookups: u64,
    /// Answered by the exact front.
    pub front_hits: u64,
    /// Answered by a wildcard subtable.
    pub wildcard_hits: u64,
    /// Not answered.
    pub misses: u64,
    /// Subtables probed, summed over lookups (÷ `lookups` = per lookup).
    pub subtables_probed: u64,
    /// Decisions cached.
    pub installs: u64,
    /// Entries replaced by a decision with the same mask and masked key.
    pub replaced: u64,
    /// Entries evicted for capacity (LRU) or with a displaced mask.
    pub evictions: u64,
    /// Entries revoked by [`DecisionCache::removed`].
    pub revocations: u64,
    /// [`DecisionCache::removed`] calls.
    pub removed_calls: u64,
    /// Decisions not cached: no dependencies.
    pub not_cached_no_deps: u64,
    /// Decisions not cached: a state id was already removed.
    pub not_cached_stale: u64,
    /// Decisions refused: new mask on probation.
    pub mask_probation: u64,
    /// Decisions refused: mask cap full.
    pub mask_refused: u64,
    /// Subtables displaced by a new mask at the cap.
    pub mask_displaced: u64,
    /// Subtables created.
    pub masks_created: u64,
    /// Re-rankings done.
    pub reranks: u64,
}

impl Counters {
    /// Add `o` (another cache's, in another slice) to these.
    pub fn merge(&mut self, o: &Counters) {
        self.lookups += o.lookups;
        self.front_hits += o.front_hits;
        self.wildcard_hits += o.wildcard_hits;
        self.misses += o.misses;
        self.subtables_probed += o.subtables_probed;
        self.installs += o.installs;
        self.replaced += o.replaced;
        self.evictions += o.evictions;
        self.revocations += o.revocations;
        self.removed_calls += o.removed_calls;
        self.not_cached_no_deps += o.not_cached_no_deps;
        self.not_cached_stale += o.not_cached_stale;
        self.mask_probation += o.mask_probation;
        self.mask_refused += o.mask_refused;
        self.mask_displaced += o.mask_displaced;
        self.masks_created += o.masks_created;
        self.reranks += o.reranks;
    }

    /// Decisions not admitted by mask admission control.
    pub fn admission_refusals(&self) -> u64 {
        self.mask_probation + self.mask_refused
    }
}

#[derive(Clone, Debug)]
struct Entry {
    /// The key masked by the subtable's mask.
    key: [u64; KEY_WORDS],
    hash: u64,
    gen: u32,
    live: bool,
    /// Revoked by `removed` and not yet swept: still in its subtable and
    /// the LRU list, but never answers (see [`DecisionCache::sweep`]).
    revoked: bool,
    subtable: u16,
    in_port: PortId,
    /// Frames shorter than this never match (marks and actions need it).
    min_len: u8,
    prev: u32,
    next: u32,
    /// Each registered state and the entry's position in its dependents.
    deps: SmallVec<[StateId; 2]>,
    actions: Actions,
}

#[derive(Clone, Debug)]
struct Subtable {
    mask: Mask,
    /// The words the mask marks (a lookup hashes and compares only these).
    words: SmallVec<[u8; 4]>,
    min_len: u8,
    table: HashTable<u32>,
    /// Hits since the last re-ranking (halved at each).
    epoch_hits: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct FrontSlot {
    hash: u64,
    idx: u32,
    /// 0: empty.
    gen: u32,
}

// A front bucket is one cache line; an entry (key, links, ids, actions)
// stays small enough that `capacity` bounds memory tightly.
const _: () = assert!(std::mem::size_of::<FrontSlot>() == 16);
const _: () = assert!(std::mem::size_of::<Entry>() <= 320);

/// How many dependents ahead `removed` prefetches (one line per entry, the
/// one with its flags; 16 in flight cover the miss latency).
const REVOKE_AHEAD: usize = 16;
/// Revoked entries `removed` frees before it returns; the rest are freed
/// by later installs ([`SWEEP_PER_INSTALL`] each, and first of all when
/// the cache is full) and by [`DecisionCache::sweep`].
pub const SWEEP_ON_REMOVE: usize = 64;
/// Revoked entries each install frees (when any wait).
pub const SWEEP_PER_INSTALL: usize = 4;

/// The decision cache.
///
/// # Threading
/// One owner: `lookup`, `install` and `removed` take `&mut self` (lookups
/// move entries in the LRU list, fill the front and count). The type is
/// `Send`: a pipeline gives each worker its own cache and sends it the
/// installs and removals, or serializes one cache behind its own lock.
#[derive(Debug)]
pub struct DecisionCache {
    cfg: Config,
    entries: Vec<Entry>,
    free: Vec<u32>,
    /// Entries in the tables (revoked ones not yet swept included).
    live: usize,
    /// Revoked entries not yet swept (each is in `sweep`).
    unswept: usize,
    /// Revoked entries to free: (index, generation then); a pair whose
    /// entry was freed meanwhile is skipped.
    to_sweep: Vec<(u32, u32)>,
    lru_head: u32,
    lru_tail: u32,
    subtables: Vec<Option<Subtable>>,
    free_subtables: Vec<u16>,
    /// Subtable ids, most hit first.
    rank: Vec<u16>,
    mask_index: HashMap<Mask, u16, SeededHash>,
    candidates: HashMap<Mask, u32, SeededHash>,
    front: Vec<FrontSlot>,
    front_buckets_mask: usize,
    states: Vec<StateSlot>,
    free_states: Vec<u32>,
    live_states: usize,
    since_rerank: u64,
    counters: Counters,
}

impl DecisionCache {
    /// An empty cache.
    pub fn new(cfg: Config) -> Result<DecisionCache, ConfigError> {
        cfg.validate()?;
        let front_len = if cfg.front_slots == 0 {
            0
        } else {
            cfg.front_slots.next_power_of_two().max(FRONT_WAYS)
        };
        Ok(DecisionCache {
            cfg,
            entries: Vec::new(),
            free: Vec::new(),
            live: 0,
            unswept: 0,
            to_sweep: Vec::new(),
            lru_head: NIL,
            lru_tail: NIL,
            subtables: Vec::new(),
            free_subtables: Vec::new(),
            rank: Vec::new(),
            mask_index: HashMap::default(),
            candidates: HashMap::default(),
            front: vec![FrontSlot::default(); front_len],
            front_buckets_mask: (front_len / FRONT_WAYS).saturating_sub(1),
            states: Vec::new(),
            free_states: Vec::new(),
            live_states: 0,
            since_rerank: 0,
            counters: Counters::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Event counts.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Cached entries (that can answer: revoked ones not yet swept are
    /// not counted).
    pub fn len(&self) -> usize {
        self.live - self.unswept
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Revoked entries not yet swept (they answer no lookup; they still
    /// hold their slot and subtable until freed).
    pub fn unswept(&self) -> usize {
        self.unswept
    }

    /// Distinct masks (subtables) in use.
    pub fn masks(&self) -> usize {
        self.rank.len()
    }

    /// Live state ids.
    pub fn state_ids(&self) -> usize {
        self.live_states
    }

    /// Entries that registered `id` (0 for an id not live), counting those
    /// another id's `removed` revoked until they are swept.
    pub fn dependents(&self, id: StateId) -> usize {
        match self.status(id) {
            StateStatus::Live => {
                let st = &self.states[id.slot()];
                st.deps.len() - st.stale as usize
            }
            _ => 0,
        }
    }

    /// A new state id (the paper's `new_state_id`).
    pub fn new_state_id(&mut self) -> Result<StateId, StateError> {
        if self.live_states >= self.cfg.max_state_ids {
            return Err(StateError::TooMany(self.live_states));
        }
        let slot = match self.free_states.pop() {
            Some(s) => s,
            None => {
                self.states.push(StateSlot::default());
                (self.states.len() - 1) as u32
            }
        };
        let st = &mut self.states[slot as usize];
        st.gen += 1;
        st.live = true;
        st.deps.clear();
        st.stale = 0;
        self.live_states += 1;
        Ok(StateId(u64::from(st.gen) << 32 | u64::from(slot)))
    }

    /// Whether `id` was issued and not yet removed.
    pub fn is_live(&self, id: StateId) -> bool {
        matches!(self.status(id), StateStatus::Live)
    }

    fn status(&self, id: StateId) -> StateStatus {
        match self.states.get(id.slot()) {
            Some(st) if id.gen() != 0 && id.gen() <= st.gen => {
                if id.gen() == st.gen && st.live {
                    StateStatus::Live
                } else {
                    StateStatus::Removed
                }
            }
            _ => StateStatus::Unknown,
        }
    }

    /// The state behind `id` changed or went away (the paper's `removed`):
    /// revoke every entry that registered it, in O(dependents) one-line
    /// writes: each is marked revoked (from then on no lookup, front slot
    /// or `EntryId` answers with it), and up to [`SWEEP_ON_REMOVE`] are
    /// freed at once; the rest are freed out of the tables later (see
    /// [`DecisionCache::sweep`]). The id is dead afterwards; decisions that
    /// still register it are not cached. Returns the number of entries
    /// revoked (0 for an id not live).
    pub fn removed(&mut self, id: StateId) -> usize {
        self.counters.removed_calls += 1;
        if !self.is_live(id) {
            return 0;
        }
        let st = &mut self.states[id.slot()];
        st.live = false;
        let deps = std::mem::take(&mut st.deps);
        self.live_states -= 1;
        // A slot whose generation is spent is retired, so ids stay unique.
        if st.gen < u32::MAX {
            self.free_states.push(id.slot() as u32);
        }
        let mut n = 0;
        self.to_sweep.reserve(deps.len());
        for (k, &(idx, gen)) in deps.iter().enumerate() {
            // The dependents lie anywhere in `entries` (the index of a
            // popular id outgrows the caches): fetch the flags' line of
            // the entry `REVOKE_AHEAD` places on while this one is marked.
            if let Some(&(ahead, _)) = deps.get(k + REVOKE_AHEAD) {
                if let Some(e) = self.entries.get(ahead as usize) {
                    nexthop_mem::prefetch(&e.revoked);
                }
            }
            let e = &mut self.entries[idx as usize];
            if e.live && !e.revoked && e.gen == gen {
                e.revoked = true;
                self.to_sweep.push((idx, gen));
                n += 1;
            }
        }
        self.unswept += n;
        self.counters.revocations += n as u64;
        // Revocations without installs cannot pile up pairs: past the
        // capacity the whole list is swept.
        let budget = if self.to_sweep.len() > self.cfg.capacity {
            usize::MAX
        } else {
            SWEEP_ON_REMOVE
        };
        self.sweep(budget);
        n
    }

    /// Free up to `budget` revoked entries out of their subtables, the LRU
    /// list and the front (`removed` leaves them marked; installs sweep a
    /// few each). Returns how many were freed. A pipeline calls it when
    /// idle; `sweep(usize::MAX)` frees them all.
    pub fn sweep(&mut self, budget: usize) -> usize {
        self.sweep_keeping(budget, None)
    }

    /// [`Self::sweep`], keeping subtable `keep` even when it empties (an
    /// install sweeps after choosing the subtable it inserts into).
    fn sweep_keeping(&mut self, budget: usize, keep: Option<u16>) -> usize {
        let mut freed = 0;
        while freed < budget {
            let Some((idx, gen)) = self.to_sweep.pop() else {
                break;
            };
            let e = &self.entries[idx as usize];
            if e.live && e.revoked && e.gen == gen {
                self.free_entry(idx, keep);
                freed += 1;
            }
        }
        if self.to_sweep.is_empty() {
            // Give back the memory of a large revocation.
            self.to_sweep.shrink_to(SWEEP_ON_REMOVE);
        }
        freed
    }

    /// The actions of a live entry.
    pub fn actions(&self, id: EntryId) -> Option<&Actions> {
        self.get(id).map(|e| &e.actions)
    }

    /// The mask of a live entry.
    pub fn mask(&self, id: EntryId) -> Option<&Mask> {
        let e = self.get(id)?;
        self.subtables[usize::from(e.subtable)]
            .as_ref()
            .map(|s| &s.mask)
    }

    /// The state ids a live entry registered.
    pub fn entry_states(&self, id: EntryId) -> Option<Vec<StateId>> {
        self.get(id).map(|e| e.deps.to_vec())
    }

    /// Whether `id` is a live entry.
    pub fn contains(&self, id: EntryId) -> bool {
        self.get(id).is_some()
    }

    /// Apply a live entry's actions to `frame` (`None` if it is gone).
    pub fn apply(&self, id: EntryId, frame: &mut [u8]) -> Option<Outcome> {
        self.actions(id).map(|a| a.apply(frame))
    }

    fn get(&self, id: EntryId) -> Option<&Entry> {
        self.entries
            .get(id.idx as usize)
            .filter(|e| e.live && !e.revoked && e.gen == id.gen)
    }

    /// Look one key up: the exact front, then the subtables in rank order,
    /// stopping at the first hit.
    pub fn lookup(&mut self, key: &HeaderKey) -> Option<EntryId> {
        let mut out = [None];
        self.lookup_batch(std::slice::from_ref(key), &mut out);
        out[0]
    }

    /// Look up `keys[i]` into `out[i]` for `i < min(keys.len(), out.len())`,
    /// in groups of [`BATCH`]: all front probes of a group, then each
    /// subtable in rank order for the keys still unanswered. Returns the
    /// number of hits.
    pub fn lookup_batch(&mut self, keys: &[HeaderKey], out: &mut [Option<EntryId>]) -> usize {
        let n = keys.len().min(out.len());
        let mut hits = 0;
        for start in (0..n).step_by(BATCH) {
            let end = (start + BATCH).min(n);
            hits += self.lookup_group(&keys[start..end], &mut out[start..end]);
        }
        self.since_rerank += n as u64;
        if self.since_rerank >= self.cfg.rerank_every {
            self.rerank();
        }
        hits
    }

    fn lookup_group(&mut self, keys: &[HeaderKey], out: &mut [Option<EntryId>]) -> usize {
        let seed = self.cfg.seed;
        let front_on = !self.front.is_empty();
        let mut fh = [0u64; BATCH];
        let mut pending: u64 = 0;
        for (j, k) in keys.iter().enumerate() {
            out[j] = None;
            if front_on {
                fh[j] = k.hash_exact(seed);
                if let Some(idx) = self.front_find(fh[j], k) {
                    out[j] = Some(self.id_of(idx));
                    continue;
                }
            }
            pending |= 1 << j;
        }
        let front_hits = keys.len() - pending.count_ones() as usize;
        let mut wild_hits = 0usize;
        let mut from_wild: u64 = 0;
        let mut probed = 0u64;
        for r in 0..self.rank.len() {
            if pending == 0 {
                break;
            }
            let sid = self.rank[r];
            let Some(st) = self.subtables[usize::from(sid)].as_ref() else {
                continue;
            };
            let mut left = pending;
            let mut st_hits = 0;
            while left != 0 {
                let j = left.trailing_zeros() as usize;
                left &= left - 1;
                let k = &keys[j];
                if k.len() < usize::from(st.min_len) {
                    continue;
                }
                probed += 1;
                let h = masked_hash(seed, st, k);
                let entries = &self.entries;
                if let Some(&idx) = st
                    .table
                    .find(h, |&i| entry_matches(&entries[i as usize], st, k))
                {
                    out[j] = Some(EntryId {
                        idx,
                        gen: entries[idx as usize].gen,
                    });
                    pending &= !(1 << j);
                    from_wild |= 1 << j;
                    st_hits += 1;
                }
            }
            if st_hits > 0 {
                wild_hits += st_hits;
                if let Some(st) = self.subtables[usize::from(sid)].as_mut() {
                    st.epoch_hits += st_hits as u64;
                }
            }
        }
        for j in 0..keys.len() {
            if let Some(id) = out[j] {
                self.touch(id.idx);
                if front_on && from_wild & (1 << j) != 0 {
                    self.front_insert(fh[j], id.idx);
                }
            }
        }
        let c = &mut self.counters;
        c.lookups += keys.len() as u64;
        c.front_hits += front_hits as u64;
        c.wildcard_hits += wild_hits as u64;
        c.misses += u64::from(pending.count_ones());
        c.subtables_probed += probed;
        front_hits + wild_hits
    }

    /// Cache `decision`, made by the app for the frame whose key is `key`.
    ///
    /// Not cached (and `Ok`): no dependencies at all (paper §6.1), a state
    /// id removed meanwhile, or a new mask refused by admission control.
    /// An entry with the same mask and masked key (and port, where marked)
    /// is replaced. At capacity the least recently used entry is evicted.
    pub fn install(
        &mut self,
        key: &HeaderKey,
        decision: &Decision,
    ) -> Result<Installed, InstallError> {
        let mask = &decision.mask;
        if mask.is_empty() && decision.states.is_empty() {
            self.counters.not_cached_no_deps += 1;
            return Ok(Installed::NotCached(NotCached::NoDependencies));
        }
        let got = key.len();
        let needed = mask.min_len();
        if needed > got {
            return Err(InstallError::MarkBeyondFrame { needed, got });
        }
        let needed = decision.actions.min_len();
        if needed > got {
            return Err(InstallError::ActionBeyondFrame { needed, got });
        }
        // Filled in place (a clone returned by value is built on the stack
        // and then moved: a store-forwarding stall per install).
        let mut states = StateIds::new();
        states.extend_from_slice(&decision.states);
        states.sort_unstable();
        states.dedup();
        if states.len() > self.cfg.max_states_per_entry {
            return Err(InstallError::TooManyStates {
                got: states.len(),
                max: self.cfg.max_states_per_entry,
            });
        }
        for &s in &states {
            match self.status(s) {
                StateStatus::Live => {}
                StateStatus::Unknown => return Err(InstallError::UnknownState(s.0)),
                StateStatus::Removed => {
                    self.counters.not_cached_stale += 1;
                    return Ok(Installed::NotCached(NotCached::StaleState(s)));
                }
            }
        }
        let sid = match self.admit(mask) {
            Ok(sid) => sid,
            Err(why) => return Ok(Installed::NotCached(why)),
        };
        let min_len = mask
            .min_len()
            .max(decision.actions.min_len())
            .min(KEY_BYTES) as u8;
        let (h, masked) = {
            let st = self.subtables[usize::from(sid)]
                .as_ref()
                .expect("admit returns a live subtable");
            (masked_hash(self.cfg.seed, st, key), mask_words(st, key))
        };
        // Same mask, same masked key (and port): the newer decision wins.
        let dup = {
            let st = self.subtables[usize::from(sid)].as_ref().expect("live");
            let entries = &self.entries;
            st.table
                .find(h, |&i| {
                    let e = &entries[i as usize];
                    !e.revoked && e.key == masked && (!st.mask.ingress || e.in_port == key.in_port)
                })
                .copied()
        };
        if let Some(i) = dup {
            self.free_entry(i, Some(sid));
            self.counters.replaced += 1;
        }
        // Revoked entries go before live ones are evicted for room.
        if self.unswept > 0 {
            self.sweep_keeping(SWEEP_PER_INSTALL, Some(sid));
            while self.live >= self.cfg.capacity
                && self.unswept > 0
                && self.sweep_keeping(1, Some(sid)) > 0
            {}
        }
        while self.live >= self.cfg.capacity && self.lru_tail != NIL {
            let t = self.lru_tail;
            self.free_entry(t, Some(sid));
            self.counters.evictions += 1;
        }
        let entry = Entry {
            key: masked,
            hash: h,
            gen: 1,
            live: true,
            revoked: false,
            subtable: sid,
            in_port: key.in_port,
            min_len,
            prev: NIL,
            next: NIL,
            deps: SmallVec::new(),
            actions: decision.actions.clone(),
        };
        let idx = match self.free.pop() {
            Some(i) => {
                let gen = self.entries[i as usize].gen;
                self.entries[i as usize] = Entry { gen, ..entry };
                i
            }
            None => {
                self.entries.push(entry);
                (self.entries.len() - 1) as u32
            }
        };
        self.live += 1;
        self.link_head(idx);
        let gen = self.entries[idx as usize].gen;
        for &s in &states {
            self.states[s.slot()].deps.push((idx, gen));
            self.entries[idx as usize].deps.push(s);
        }
        {
            let entries = &self.entries;
            let st = self.subtables[usize::from(sid)].as_mut().expect("live");
            st.table
                .insert_unique(h, idx, |&i| entries[i as usize].hash);
        }
        if !self.front.is_empty() {
            let fh = key.hash_exact(self.cfg.seed);
            self.front_insert(fh, idx);
        }
        self.counters.installs += 1;
        Ok(Installed::Cached(self.id_of(idx)))
    }

    /// Re-rank the subtables by hits since the last re-ranking (most hit
    /// first), then halve the counts and forget masks on probation. Done
    /// every `rerank_every` lookups; public for tests and for pipelines
    /// that re-rank on a timer.
    pub fn rerank(&mut self) {
        self.since_rerank = 0;
        let subs = &self.subtables;
        self.rank.sort_by_key(|&s| {
            std::cmp::Reverse(subs[usize::from(s)].as_ref().map_or(0, |t| t.epoch_hits))
        });
        for st in self.subtables.iter_mut().flatten() {
            st.epoch_hits /= 2;
        }
        self.candidates.clear();
        self.counters.reranks += 1;
    }

    /// The subtable for `mask`, creating it if admission allows.
    fn admit(&mut self, mask: &Mask) -> Result<u16, NotCached> {
        let mask = &mask.bits_only();
        if let Some(&sid) = self.mask_index.get(mask) {
            return Ok(sid);
        }
        let free = self.cfg.admit_after <= 1 || self.rank.len() < self.cfg.free_masks;
        let requests = if free {
            1
        } else {
            if self.candidates.len() >= 4 * self.cfg.max_masks
                && !self.candidates.contains_key(mask)
            {
                self.candidates.clear();
            }
            let c = self.candidates.entry(mask.clone()).or_insert(0);
            *c += 1;
            if *c < self.cfg.admit_after {
                self.counters.mask_probation += 1;
                return Err(NotCached::MaskProbation);
            }
            *c
        };
        if self.rank.len() >= self.cfg.max_masks {
            // Displace the coldest subtable if it has had fewer recent hits
            // than the newcomer has requests; otherwise refuse.
            let coldest = self
                .rank
                .iter()
                .copied()
                .filter_map(|s| {
                    self.subtables[usize::from(s)]
                        .as_ref()
                        .map(|t| (t.epoch_hits, s))
                })
                .min();
            match coldest {
                Some((hits, victim)) if hits < u64::from(requests) => {
                    self.drop_subtable(victim);
                    self.counters.mask_displaced += 1;
                }
                _ => {
                    self.counters.mask_refused += 1;
                    return Err(NotCached::MaskCapFull);
                }
            }
        }
        self.candidates.remove(mask);
        let words: SmallVec<[u8; 4]> = (0..KEY_WORDS)
            .filter(|&i| mask.words[i] != 0)
            .map(|i| i as u8)
            .collect();
        let st = Subtable {
            mask: mask.clone(),
            words,
            min_len: mask.bits_min_len() as u8,
            table: HashTable::new(),
            // A newcomer starts with its requests as hits, so the next new
            // mask cannot displace it before it had a chance to be hit.
            epoch_hits: u64::from(requests),
        };
        let sid = match self.free_subtables.pop() {
            Some(s) => {
                self.subtables[usize::from(s)] = Some(st);
                s
            }
            None => {
                self.subtables.push(Some(st));
                (self.subtables.len() - 1) as u16
            }
        };
        self.rank.push(sid);
        self.mask_index.insert(mask.clone(), sid);
        self.counters.masks_created += 1;
        Ok(sid)
    }

    /// Evict every entry of subtable `sid` and free it.
    fn drop_subtable(&mut self, sid: u16) {
        let idxs: Vec<u32> = self.subtables[usize::from(sid)]
            .as_ref()
            .map(|t| t.table.iter().copied().collect())
            .unwrap_or_default();
        self.counters.evictions += idxs.len() as u64;
        for i in idxs {
            self.free_entry(i, Some(sid));
        }
        self.free_subtable(sid);
    }

    fn free_subtable(&mut self, sid: u16) {
        if let Some(st) = self.subtables[usize::from(sid)].take() {
            self.mask_index.remove(&st.mask);
            self.rank.retain(|&s| s != sid);
            self.free_subtables.push(sid);
        }
    }

    /// Remove entry `idx` from its subtable, the LRU list and the
    /// dependents of its states (a state already taken out of the index,
    /// as `removed` does, is skipped). Its subtable is freed when it
    /// empties, unless it is `keep`.
    fn free_entry(&mut self, idx: u32, keep: Option<u16>) {
        let i = idx as usize;
        if !self.entries[i].live {
            return;
        }
        let (sid, h) = (self.entries[i].subtable, self.entries[i].hash);
        let mut empty = false;
        if let Some(st) = self.subtables[usize::from(sid)].as_mut() {
            if let Ok(o) = st.table.find_entry(h, |&x| x == idx) {
                o.remove();
            }
            empty = st.table.is_empty();
        }
        if empty && keep != Some(sid) {
            self.free_subtable(sid);
        }
        self.unlink(idx);
        // Dead first, so the pairs naming it in its ids' lists are stale.
        let e = &mut self.entries[i];
        if e.revoked {
            e.revoked = false;
            self.unswept -= 1;
        }
        e.live = false;
        e.gen = e.gen.wrapping_add(1).max(1);
        e.actions = Actions::default();
        let deps = std::mem::take(&mut e.deps);
        self.live -= 1;
        self.free.push(idx);
        for s in deps {
            // The id being removed (already dead) is skipped.
            let st = &mut self.states[s.slot()];
            if !st.live || st.gen != s.gen() {
                continue;
            }
            st.stale += 1;
            if st.stale >= COMPACT_MIN && st.stale as usize * 2 > st.deps.len() {
                let entries = &self.entries;
                st.deps.retain(|&(j, g)| {
                    let e = &entries[j as usize];
                    e.live && e.gen == g
                });
                st.stale = 0;
            }
        }
    }

    fn id_of(&self, idx: u32) -> EntryId {
        EntryId {
            idx,
            gen: self.entries[idx as usize].gen,
        }
    }

    fn front_bucket(&self, h: u64) -> usize {
        ((h >> 32) as usize & self.front_buckets_mask) * FRONT_WAYS
    }

    fn front_find(&self, h: u64, key: &HeaderKey) -> Option<u32> {
        let b = self.front_bucket(h);
        for s in &self.front[b..b + FRONT_WAYS] {
            if s.gen != 0 && s.hash == h {
                let e = &self.entries[s.idx as usize];
                if e.live && e.gen == s.gen {
                    // A front slot is trusted only as far as the entry it
                    // names still matches the key: a hash collision can
                    // cost a front miss, never a wrong answer.
                    let st = self.subtables[usize::from(e.subtable)].as_ref()?;
                    if entry_matches(e, st, key) {
                        return Some(s.idx);
                    }
                }
            }
        }
        None
    }

    /// Put `idx` in the front bucket of `h`: over the slot of the same
    /// hash, else a slot that is empty or whose entry has died, else the
    /// slot `h` picks. Telling a dead slot from a live one reads the
    /// slots' entries (random lines, a miss-path cost), but without it
    /// installs under churn overwrite the live slots of steady flows and
    /// their lookups fall back to the subtables.
    fn front_insert(&mut self, h: u64, idx: u32) {
        let b = self.front_bucket(h);
        let gen = self.entries[idx as usize].gen;
        let ways = &mut self.front[b..b + FRONT_WAYS];
        // The same key's slot, else an empty one, else the way the hash
        // picks. Slots of freed or revoked entries are not looked for:
        // that reads each way's entry (a cache line apiece, cold in a
        // churning cache, whose front holds the newest installs) for a
        // slot that is rarely dead; a stale slot never answers (its
        // generation is checked) and goes when its way is picked.
        let w = ways
            .iter()
            .position(|s| s.gen != 0 && s.hash == h)
            .or_else(|| ways.iter().position(|s| s.gen == 0))
            .unwrap_or((h as usize) % FRONT_WAYS);
        ways[w] = FrontSlot { hash: h, idx, gen };
    }

    fn unlink(&mut self, idx: u32) {
        let (p, n) = {
            let e = &self.entries[idx as usize];
            (e.prev, e.next)
        };
        if p == NIL {
            self.lru_head = n;
        } else {
            self.entries[p as usize].next = n;
        }
        if n == NIL {
            self.lru_tail = p;
        } else {
            self.entries[n as usize].prev = p;
        }
        let e = &mut self.entries[idx as usize];
        e.prev = NIL;
        e.next = NIL;
    }

    fn link_head(&mut self, idx: u32) {
        let old = self.lru_head;
        {
            let e = &mut self.entries[idx as usize];
            e.prev = NIL;
            e.next = old;
        }
        if old == NIL {
            self.lru_tail = idx;
        } else {
            self.entries[old as usize].prev = idx;
        }
        self.lru_head = idx;
    }

    /// Make `idx` the most recently used entry.
    fn touch(&mut self, idx: u32) {
        if self.lru_head != idx {
            self.unlink(idx);
            self.link_head(idx);
        }
    }
}

/// The key's words under the subtable's mask (zero elsewhere).
fn mask_words(st: &Subtable, key: &HeaderKey) -> [u64; KEY_WORDS] {
    let mut out = [0u64; KEY_WORDS];
    for &w in &st.words {
        let w = usize::from(w);
        out[w] = key.words[w] & st.mask.words[w];
    }
    out
}

/// Seeded hash of the marked words (and the port, where marked).
#[inline]
fn masked_hash(seed: u64, st: &Subtable, key: &HeaderKey) -> u64 {
    let mut buf = [0u8; KEY_BYTES + 2];
    let mut n = 0;
    for &w in &st.words {
        let w = usize::from(w);
        buf[n..n + 8].copy_from_slice(&(key.words[w] & st.mask.words[w]).to_ne_bytes());
        n += 8;
    }
    if st.mask.ingress {
        buf[n..n + 2].copy_from_slice(&key.in_port.to_le_bytes());
        n += 2;
    }
    nexthop_hash::hash64(&buf[..n], seed)
}

#[inline]
fn entry_matches(e: &Entry, st: &Subtable, key: &HeaderKey) -> bool {
    !e.revoked
        && key.len >= e.min_len
        && (!st.mask.ingress || e.in_port == key.in_port)
        && st.words.iter().all(|&w| {
            let w = usize::from(w);
            e.key[w] == key.words[w] & st.mask.words[w]
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependents_lists_of_long_lived_ids_stay_bounded_under_eviction() {
        let mut c = DecisionCache::new(Config {
            capacity: 4,
            ..Config::default()
        })
        .unwrap();
        let s = c.new_state_id().unwrap();
        let mut mask = Mask::new();
        mask.mark_bytes(0, 2).unwrap();
        for v in 0..10_000u32 {
            let key = HeaderKey::from_frame(&v.to_be_bytes()[2..], 0);
            let d = Decision {
                mask: mask.clone(),
                states: StateIds::from_slice(&[s]),
                actions: Actions::output(1),
            };
            assert!(matches!(c.install(&key, &d), Ok(Installed::Cached(_))));
            let st = &c.states[s.slot()];
            assert!(st.deps.len() <= 2 * c.dependents(s) + COMPACT_MIN as usize);
        }
        assert_eq!(c.dependents(s), 4);
        assert_eq!(c.removed(s), 4);
        assert!(c.is_empty());
    }

    /// `n` distinct keys over 4 two-byte masks (one subtable each), the
    /// decisions all registering `s` (and `other`, every other one).
    fn install_deps(c: &mut DecisionCache, n: u32, s: StateId, other: StateId) -> Vec<HeaderKey> {
        let mut keys = Vec::new();
        for v in 0..n {
            let mut frame = [0u8; 16];
            let m = (v % 4) as usize;
            frame[2 * m..2 * m + 2].copy_from_slice(&((v / 4) as u16).to_be_bytes());
            frame[15] = m as u8;
            let key = HeaderKey::from_frame(&frame, 0);
            let mut mask = Mask::new();
            mask.mark_bytes(2 * m, 2).unwrap();
            mask.mark_bytes(15, 1).unwrap();
            let states = if v % 2 == 0 {
                StateIds::from_slice(&[s, other])
            } else {
                StateIds::from_slice(&[s])
            };
            let d = Decision {
                mask,
                states,
                actions: Actions::output(1),
            };
            assert!(matches!(c.install(&key, &d), Ok(Installed::Cached(_))));
            keys.push(key);
        }
        keys
    }

    #[test]
    fn a_revoked_entry_never_answers_once_removed_returns_though_not_yet_swept() {
        let mut c = DecisionCache::new(Config::default()).unwrap();
        let s = c.new_state_id().unwrap();
        let other = c.new_state_id().unwrap();
        let keys = install_deps(&mut c, 10_000, s, other);
        // Every key hits once (a wildcard hit fills the front), and twice
        // (the front answers).
        let mut ids = vec![None; keys.len()];
        for _ in 0..2 {
            assert_eq!(c.lookup_batch(&keys, &mut ids), keys.len());
        }
        assert!(c.counters().front_hits >= keys.len() as u64);
        assert_eq!(c.removed(s), 10_000);
        // Only a few were freed so far: the rest are marked.
        assert_eq!(c.unswept(), 10_000 - SWEEP_ON_REMOVE);
        assert_eq!(c.len(), 0);
        assert!(c.is_empty());
        assert_eq!(c.masks(), 4, "subtables of unswept entries stay");
        // Counted until swept (the count is O(1)).
        assert_eq!(c.dependents(other), 5_000 - SWEEP_ON_REMOVE / 2);
        // No front slot, subtable or old EntryId answers.
        let mut out = vec![None; keys.len()];
        assert_eq!(c.lookup_batch(&keys, &mut out), 0);
        assert!(out.iter().all(Option::is_none));
        for k in &keys {
            assert_eq!(c.lookup(k), None);
        }
        assert!(ids
            .iter()
            .flatten()
            .all(|&id| !c.contains(id) && c.actions(id).is_none()));
        // The other id's removal revokes nothing more (and sweeps as any
        // `removed` does).
        assert_eq!(c.removed(other), 0);
        assert_eq!(c.unswept(), 10_000 - 2 * SWEEP_ON_REMOVE);
        // A new decision for the same keys is cached beside the marked
        // ones and answers (not counted as a replacement).
        let s2 = c.new_state_id().unwrap();
        let other2 = c.new_state_id().unwrap();
        let replaced = c.counters().replaced;
        let again = install_deps(&mut c, 100, s2, other2);
        assert_eq!(c.counters().replaced, replaced);
        assert_eq!(c.len(), 100);
        assert!(again.iter().all(|k| c.lookup(k).is_some()));
        // Each install swept a few; the rest on demand.
        assert_eq!(
            c.unswept(),
            10_000 - 2 * SWEEP_ON_REMOVE - 100 * SWEEP_PER_INSTALL
        );
        let left = c.unswept();
        assert_eq!(c.sweep(usize::MAX), left);
        assert_eq!(c.unswept(), 0);
        assert_eq!(c.dependents(other), 0);
        assert!(c.to_sweep.is_empty());
        assert_eq!(c.len(), 100);
        assert_eq!(c.entries.len() - c.free.len(), 100);
        assert_eq!(c.removed(s2), 100);
        assert_eq!(c.sweep(usize::MAX), 100 - SWEEP_ON_REMOVE);
        assert_eq!(c.masks(), 0, "empty subtables are freed by the sweep");
    }

    /// An install into a subtable whose only entries are revoked and not
    /// yet swept: its own sweep empties that subtable, which must stay for
    /// the entry being installed (it was freed under the install: a panic).
    #[test]
    fn an_install_sweeping_its_own_subtable_empty_keeps_the_subtable() {
        let mut c = DecisionCache::new(Config::default()).unwrap();
        let one = |c: &mut DecisionCache, v: u16, s: StateId| {
            let mut frame = [0u8; 16];
            frame[..2].copy_from_slice(&v.to_be_bytes());
            let key = HeaderKey::from_frame(&frame, 0);
            let mut mask = Mask::new();
            mask.mark_bytes(0, 2).unwrap();
            let d = Decision {
                mask,
                states: StateIds::from_slice(&[s]),
                actions: Actions::output(1),
            };
            assert!(matches!(c.install(&key, &d), Ok(Installed::Cached(_))));
            key
        };
        let s = c.new_state_id().unwrap();
        let n = SWEEP_ON_REMOVE as u16 + 2;
        for v in 0..n {
            one(&mut c, v, s);
        }
        assert_eq!(c.removed(s), usize::from(n));
        assert_eq!(c.unswept(), 2);
        let fresh = c.new_state_id().unwrap();
        let key = one(&mut c, n, fresh);
        assert_eq!(c.unswept(), 0);
        assert_eq!(c.len(), 1);
        assert!(c.lookup(&key).is_some());
    }

    #[test]
    fn a_full_cache_frees_revoked_entries_before_it_evicts_live_ones() {
        let mut c = DecisionCache::new(Config {
            capacity: 1000,
            ..Config::default()
        })
        .unwrap();
        let s = c.new_state_id().unwrap();
        let other = c.new_state_id().unwrap();
        let _ = install_deps(&mut c, 500, s, other);
        let keep = c.new_state_id().unwrap();
        let keep2 = c.new_state_id().unwrap();
        let mut kept = Vec::new();
        for v in 0..500u32 {
            // Other keys than install_deps's: byte 14 set.
            let mut frame = [0u8; 16];
            frame[..4].copy_from_slice(&v.to_be_bytes());
            frame[14] = 1;
            let key = HeaderKey::from_frame(&frame, 0);
            let mut mask = Mask::new();
            mask.mark_bytes(0, 4).unwrap();
            mask.mark_bytes(14, 1).unwrap();
            let d = Decision {
                mask,
                states: StateIds::from_slice(&[keep]),
                actions: Actions::output(2),
            };
            assert!(matches!(c.install(&key, &d), Ok(Installed::Cached(_))));
            kept.push(key);
        }
        assert_eq!(c.len(), 1000);
        assert_eq!(c.removed(s), 500);
        assert!(c.unswept() > 0);
        // 500 new entries fit in the revoked ones' room: no live entry is
        // evicted.
        let _ = install_deps(&mut c, 500, keep2, other);
        assert_eq!(c.counters().evictions, 0);
        assert_eq!(c.len(), 1000);
        assert!(kept.iter().all(|k| c.lookup(k).is_some()));
    }
}
