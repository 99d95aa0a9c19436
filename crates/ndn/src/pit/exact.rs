//! The exact PIT of an edge router (NFD's semantics).
//!
//! An entry is keyed by the Interest's name plus its CanBePrefix and
//! MustBeFresh flags, as NFD keys them: two Interests for the same name
//! that differ in either flag do not aggregate. Each entry keeps one
//! in-record per downstream face (nonce, PIT token, expiry) and one
//! out-record per upstream face (nonce, when sent, expiry, Nack state).
//!
//! Storage: a slab of slots (recycled with their buffers, so a steady
//! state allocates nothing) chained from an array of chain heads indexed
//! by the low bits of a 64-bit hash of name and flags (a power of two,
//! doubled when the live entries reach half of it: a new name's walk reads
//! every slot of its chain, on average 0.03 to 0.11 slots beyond the first
//! one a batch prefetches at a load of 1/4 to 1/2, against 0.11 to 0.37 at
//! 1/2 to 1; [`ExactPit::prefetch`]
//! loads a name's head line ahead of a batch); a lazy min-heap of
//! expiries; a [`DeadNonceList`].
//! Data matching probes the exact name (both MustBeFresh values), each
//! prefix of the Data name with CanBePrefix set (only while such entries
//! exist) and the name plus its implicit digest (only while entries with a
//! digest component exist and the caller passes the digest); a flags
//! value no live entry has is not probed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use nexthop_wire::ndn::extend_prefix_hash;

use super::{
    check_range, split_implicit_digest, ConfigError, DeadNonceList, FaceId, Millis, PitToken,
    DEFAULT_INTEREST_LIFETIME_MS,
};
use crate::name::{mix64, tlv_name_hash, NameView};

const NONE: u32 = u32::MAX;
const F_CBP: u8 = 1;
const F_MBF: u8 = 2;
/// Chain heads of an empty PIT.
const MIN_HEADS: usize = 16;

/// Exact PIT configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactPitConfig {
    /// Most entries held (`1..=2^31`); a new Interest beyond it is refused
    /// and counted in [`ExactPitStats::full`].
    pub max_entries: usize,
    /// Most in-records and most out-records per entry (`1..=65535`).
    pub max_records: usize,
    /// Most `(name, nonce)` pairs in the dead-nonce list (`0..=2^31`).
    pub max_dead_nonces: usize,
    /// How long a dead nonce is remembered (NFD: 6 s), `1..=3_600_000` ms.
    pub dead_nonce_lifetime_ms: Millis,
    /// Longest InterestLifetime honoured; longer ones are clamped
    /// (`1..=3_600_000` ms).
    pub max_lifetime_ms: Millis,
    /// Most entries in one chain of the index (`1..=65536`). The chain
    /// index is keyed on the name's hash under the process's secret seed
    /// ([`nexthop_wire::ndn::name::prefix_hash_seed`]), so chains stay short
    /// (about one entry each) whatever names arrive; the cap bounds the
    /// work of one Interest or Data even if that secret were known: a new
    /// entry for a chain holding this many already is refused and counted
    /// in [`ExactPitStats::chain_full`].
    pub max_chain: usize,
    /// Hash seed.
    pub seed: u64,
}

impl Default for ExactPitConfig {
    fn default() -> ExactPitConfig {
        ExactPitConfig {
            max_entries: 1 << 20,
            max_records: 64,
            max_dead_nonces: 1 << 18,
            dead_nonce_lifetime_ms: 6000,
            max_lifetime_ms: 120_000,
            max_chain: 16,
            seed: 0x5049_545f_6578_6163,
        }
    }
}

impl ExactPitConfig {
    /// Check every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_range(
            "max_entries",
            self.max_entries as u64,
            1,
            1 << 31,
            "1..=2^31",
        )?;
        check_range(
            "max_records",
            self.max_records as u64,
            1,
            65535,
            "1..=65535",
        )?;
        check_range(
            "max_dead_nonces",
            self.max_dead_nonces as u64,
            0,
            1 << 31,
            "0..=2^31",
        )?;
        check_range(
            "dead_nonce_lifetime_ms",
            self.dead_nonce_lifetime_ms,
            1,
            3_600_000,
            "1..=3600000 ms",
        )?;
        check_range(
            "max_lifetime_ms",
            self.max_lifetime_ms,
            1,
            3_600_000,
            "1..=3600000 ms",
        )?;
        check_range("max_chain", self.max_chain as u64, 1, 65536, "1..=65536")
    }
}

/// A handle to an entry; stale once the entry is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PitId {
    slot: u32,
    gen: u32,
}

/// A downstream's pending Interest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InRecord {
    /// Downstream face.
    pub face: FaceId,
    /// Nonce of its last Interest.
    pub nonce: u32,
    /// PIT token to echo on Data and Nack.
    pub token: Option<PitToken>,
    /// When its last Interest arrived.
    pub last_renewed: Millis,
    /// When it expires (arrival + InterestLifetime).
    pub expiry: Millis,
}

/// An Interest sent upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutRecord {
    /// Upstream face.
    pub face: FaceId,
    /// Nonce sent.
    pub nonce: u32,
    /// When it was sent.
    pub last_sent: Millis,
    /// When it expires.
    pub expiry: Millis,
    /// Whether the upstream answered with a Nack.
    pub nacked: bool,
    /// The NackReason code of that Nack (0: none or unspecified).
    pub nack_code: u64,
}

/// A pending Interest (read-only view).
#[derive(Clone, Debug, Default)]
pub struct PitEntry {
    name: Vec<u8>,
    flags: u8,
    has_digest: bool,
    /// The chain key: [`ExactPit::key_hash`] of `name_hash` and `flags`.
    hash: u64,
    /// The name's [`NameView::name_hash`] (the dead-nonce list's key).
    name_hash: u64,
    in_records: Vec<InRecord>,
    out_records: Vec<OutRecord>,
    expiry: Millis,
    /// The retransmission suppression interval the strategy applies next
    /// (0: the configured initial one; see [`ExactPit::set_retx_interval`]).
    retx_interval: Millis,
}

impl PitEntry {
    /// The Interest name (concatenated component TLVs).
    pub fn name(&self) -> &[u8] {
        &self.name
    }
    /// The suppression interval for the next retransmission (0: the
    /// initial one).
    pub fn retx_interval(&self) -> Millis {
        self.retx_interval
    }
    /// The Interest's CanBePrefix.
    pub fn can_be_prefix(&self) -> bool {
        self.flags & F_CBP != 0
    }
    /// The Interest's MustBeFresh.
    pub fn must_be_fresh(&self) -> bool {
        self.flags & F_MBF != 0
    }
    /// Downstreams.
    pub fn in_records(&self) -> &[InRecord] {
        &self.in_records
    }
    /// Upstreams.
    pub fn out_records(&self) -> &[OutRecord] {
        &self.out_records
    }
    /// When the entry expires (the latest in-record expiry).
    pub fn expiry(&self) -> Millis {
        self.expiry
    }
    /// Whether an upstream that has not Nacked is still waited on.
    pub fn has_pending_upstream(&self, now: Millis) -> bool {
        self.out_records.iter().any(|o| !o.nacked && o.expiry > now)
    }
}

#[derive(Clone, Debug, Default)]
struct Slot {
    gen: u32,
    live: bool,
    next: u32,
    e: PitEntry,
}

/// An incoming Interest, as the PIT needs it.
#[derive(Clone, Copy, Debug)]
pub struct InterestIn<'a, N: NameView + ?Sized> {
    /// Its name.
    pub name: &'a N,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
    /// Nonce.
    pub nonce: u32,
    /// InterestLifetime (`None`: the 4 s default).
    pub lifetime_ms: Option<Millis>,
    /// Incoming face.
    pub face: FaceId,
    /// PitToken of the incoming LpPacket.
    pub token: Option<PitToken>,
    /// Whether `face` is multi-access (a nonce repeated on it is a loop).
    pub multi_access: bool,
}

/// What the PIT did with an Interest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOutcome {
    /// A new entry: forward the Interest.
    New(PitId),
    /// Added a downstream to an entry already pending: the strategy
    /// decides whether to forward again.
    Aggregated(PitId),
    /// The same downstream sent the Interest again with a new nonce (a
    /// retransmission): its in-record was refreshed.
    Retransmitted(PitId),
    /// The nonce is already in this entry from another face, in its
    /// out-records, or in the dead-nonce list: a loop (Nack Duplicate).
    DuplicateNonce {
        /// Found in the dead-nonce list rather than a live entry.
        dead: bool,
    },
    /// The table holds `max_entries` already: dropped.
    Full,
    /// The new entry's index chain holds `max_chain` entries already:
    /// dropped.
    ChainFull,
    /// The entry holds `max_records` in-records already: dropped.
    RecordsFull,
}

/// A Data packet, as the PIT matches it.
#[derive(Clone, Copy, Debug)]
pub struct DataMatch<'a, N: NameView + ?Sized> {
    /// The Data name.
    pub name: &'a N,
    /// Its implicit SHA-256 digest, if computed (needed only while
    /// [`ExactPit::needs_digest`] is true).
    pub digest: Option<&'a [u8; 32]>,
}

/// Where a Data packet goes: one per distinct `(face, token)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Downstream {
    /// The face.
    pub face: FaceId,
    /// The PitToken to send with the Data.
    pub token: Option<PitToken>,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExactPitStats {
    /// Entries created.
    pub created: u64,
    /// Interests aggregated into an existing entry.
    pub aggregated: u64,
    /// Retransmissions from a downstream already recorded.
    pub retransmitted: u64,
    /// Loops detected in a live entry.
    pub duplicate_nonce: u64,
    /// Loops detected in the dead-nonce list.
    pub dead_nonce_hits: u64,
    /// Interests refused because the table was full.
    pub full: u64,
    /// Interests refused because their index chain held `max_chain`
    /// entries.
    pub chain_full: u64,
    /// Interests refused because the entry's records were full.
    pub records_full: u64,
    /// Entries satisfied by Data.
    pub satisfied: u64,
    /// Data that matched no entry.
    pub unsolicited: u64,
    /// Entries that expired.
    pub expired: u64,
    /// Entries removed by the caller.
    pub removed: u64,
    /// Dead nonces forgotten early because the list was full.
    pub dead_nonce_evicted: u64,
}

/// The exact PIT. See the module docs.
#[derive(Debug, Clone)]
pub struct ExactPit {
    cfg: ExactPitConfig,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Chain heads: `heads[h & (len - 1)]` is the first slot whose key
    /// hash `h` ends in those bits (`NONE`: none); the length is a power
    /// of two, more than twice the live entries.
    heads: Vec<u32>,
    heap: BinaryHeap<Reverse<(Millis, u32, u32)>>,
    dnl: DeadNonceList,
    live: usize,
    cbp_live: usize,
    /// Live entries per flags value (a Data skips the probes of flag
    /// combinations no entry has).
    flag_live: [usize; 4],
    digest_live: usize,
    /// Reused buffer for the name plus digest.
    scratch: Vec<u8>,
    stats: ExactPitStats,
}

/// Grow a record list by doubling from 1 (most entries hold one record;
/// `Vec`'s default first step of 4 would quadruple their size).
fn grow_exact<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len().max(1));
    }
}

fn last_component_start<N: NameView + ?Sized>(n: &N) -> usize {
    let c = n.component_count();
    if c == 0 {
        0
    } else {
        n.prefix_end(c - 1)
    }
}

impl ExactPit {
    /// An empty PIT.
    pub fn new(cfg: ExactPitConfig) -> Result<ExactPit, ConfigError> {
        cfg.validate()?;
        Ok(ExactPit {
            cfg,
            slots: Vec::new(),
            free: Vec::new(),
            heads: vec![NONE; MIN_HEADS],
            heap: BinaryHeap::new(),
            dnl: DeadNonceList::new(
                cfg.max_dead_nonces,
                cfg.dead_nonce_lifetime_ms,
                cfg.seed ^ 0xd1,
            ),
            live: 0,
            cbp_live: 0,
            flag_live: [0; 4],
            digest_live: 0,
            scratch: Vec::new(),
            stats: ExactPitStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ExactPitConfig {
        &self.cfg
    }

    /// The key of a name with these flags, from the name's hash
    /// ([`NameView::name_hash`]: cached by a decoded wire name, so the
    /// PIT does not hash the bytes again).
    fn key_hash(&self, name_hash: u64, flags: u8) -> u64 {
        mix64(name_hash ^ self.cfg.seed ^ (flags as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    fn head(&self, h: u64) -> usize {
        h as usize & (self.heads.len() - 1)
    }

    /// Double the chain heads and re-thread every live slot.
    fn grow_heads(&mut self) {
        let n = self.heads.len() * 2;
        self.heads.clear();
        self.heads.resize(n, NONE);
        for s in 0..self.slots.len() {
            if self.slots[s].live {
                let i = self.head(self.slots[s].e.hash);
                self.slots[s].next = self.heads[i];
                self.heads[i] = s as u32;
            }
        }
    }

    /// Hint the CPU to load the chain head of an Interest name with these
    /// flags (or, for a Data, `None`: of the exact name under every flags
    /// value a live entry has), ahead of [`Self::insert`] or
    /// [`Self::satisfy`]. Changes nothing.
    pub fn prefetch<N: NameView + ?Sized>(&self, name: &N, interest_flags: Option<(bool, bool)>) {
        let nh = name.name_hash();
        match interest_flags {
            Some((cbp, mbf)) => {
                let flags = (cbp as u8 * F_CBP) | (mbf as u8 * F_MBF);
                nexthop_mem::prefetch(&self.heads[self.head(self.key_hash(nh, flags))]);
            }
            None => {
                for flags in [0, F_MBF, F_CBP, F_CBP | F_MBF] {
                    if self.flag_live[flags as usize] > 0 {
                        nexthop_mem::prefetch(&self.heads[self.head(self.key_hash(nh, flags))]);
                    }
                }
            }
        }
    }

    /// The second step after [`Self::prefetch`] (once its line has had
    /// time to arrive): read the chain head and hint the CPU to load the
    /// first slot of the chain. Changes nothing.
    pub fn prefetch_slot<N: NameView + ?Sized>(
        &self,
        name: &N,
        interest_flags: Option<(bool, bool)>,
    ) {
        let flags = match interest_flags {
            Some((cbp, mbf)) => (cbp as u8 * F_CBP) | (mbf as u8 * F_MBF),
            None if self.flag_live[0] > 0 => 0,
            None => return,
        };
        let s = self.heads[self.head(self.key_hash(name.name_hash(), flags))];
        if let Some(sl) = self.slots.get(s as usize) {
            // Every line: a slot spans two or three, and the walk reads
            // its hash and link wherever the compiler put them.
            nexthop_mem::prefetch_lines(sl);
        }
    }

    fn find(&self, name: &[u8], flags: u8, h: u64) -> Option<u32> {
        let mut s = self.heads[self.head(h)];
        while s != NONE {
            let sl = &self.slots[s as usize];
            if sl.e.hash == h && sl.e.flags == flags && sl.e.name == name {
                return Some(s);
            }
            s = sl.next;
        }
        None
    }

    /// Entries in chain `at` (at most `max_chain`: only an insert
    /// lengthens a chain, and it refuses to beyond that; doubling the heads
    /// only splits chains).
    fn chain_len(&self, at: usize) -> usize {
        let mut n = 0;
        let mut s = self.heads[at];
        while s != NONE {
            n += 1;
            s = self.slots[s as usize].next;
        }
        n
    }

    /// The longest chain of the index (a test and diagnostics aid: walks
    /// every chain).
    pub fn longest_chain(&self) -> usize {
        (0..self.heads.len())
            .map(|at| self.chain_len(at))
            .max()
            .unwrap_or(0)
    }

    fn id(&self, slot: u32) -> PitId {
        PitId {
            slot,
            gen: self.slots[slot as usize].gen,
        }
    }

    fn slot_of(&self, id: PitId) -> Option<usize> {
        let s = self.slots.get(id.slot as usize)?;
        (s.live && s.gen == id.gen).then_some(id.slot as usize)
    }

    /// The entry `id`, if it still exists.
    pub fn entry(&self, id: PitId) -> Option<&PitEntry> {
        self.slot_of(id).map(|s| &self.slots[s].e)
    }

    /// The live entry for an Interest name with these flags (NFD keys
    /// entries by name, CanBePrefix and MustBeFresh), e.g. to match a Nack.
    pub fn find_entry(
        &self,
        name: &[u8],
        can_be_prefix: bool,
        must_be_fresh: bool,
    ) -> Option<PitId> {
        let flags = (can_be_prefix as u8 * F_CBP) | (must_be_fresh as u8 * F_MBF);
        let s = self.find(name, flags, self.key_hash(tlv_name_hash(name)?, flags))?;
        Some(self.id(s))
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Whether Data matching needs the implicit digest (an entry's name
    /// ends in an implicit digest component).
    pub fn needs_digest(&self) -> bool {
        self.digest_live > 0
    }

    /// Counters.
    pub fn stats(&self) -> ExactPitStats {
        ExactPitStats {
            dead_nonce_evicted: self.dnl.evicted(),
            ..self.stats
        }
    }

    /// Dead-nonce pairs remembered.
    pub fn dead_nonces(&self) -> usize {
        self.dnl.len()
    }

    /// Bytes held by the table's structures (slots, names, records,
    /// index, heap, dead-nonce list), for the bytes-per-entry figure.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut b = self.slots.capacity() * size_of::<Slot>()
            + self.free.capacity() * 4
            + self.heads.capacity() * 4
            + self.heap.capacity() * size_of::<(Millis, u32, u32)>()
            + self.dnl.len() * (size_of::<(u64, Millis)>() + size_of::<(u64, u32)>() + 1);
        for s in &self.slots {
            b += s.e.name.capacity()
                + s.e.in_records.capacity() * size_of::<InRecord>()
                + s.e.out_records.capacity() * size_of::<OutRecord>();
        }
        b
    }

    fn unlink(&mut self, slot: u32) {
        let i = self.head(self.slots[slot as usize].e.hash);
        let next = self.slots[slot as usize].next;
        if self.heads[i] == slot {
            self.heads[i] = next;
            return;
        }
        let mut s = self.heads[i];
        while s != NONE {
            let n = self.slots[s as usize].next;
            if n == slot {
                self.slots[s as usize].next = next;
                return;
            }
            s = n;
        }
    }

    /// Remove slot `s`, remembering its out-record nonces (or its
    /// in-record nonces if it was never forwarded) in the dead-nonce list
    /// when `dead_nonces`.
    fn free_slot(&mut self, s: u32, dead_nonces: bool, now: Millis) {
        self.unlink(s);
        let sl = &mut self.slots[s as usize];
        sl.live = false;
        sl.gen = sl.gen.wrapping_add(1);
        sl.next = NONE;
        let e = &sl.e;
        if e.flags & F_CBP != 0 {
            self.cbp_live -= 1;
        }
        self.flag_live[e.flags as usize & 3] -= 1;
        if e.has_digest {
            self.digest_live -= 1;
        }
        if dead_nonces {
            let use_out = !e.out_records.is_empty();
            let k = if use_out {
                e.out_records.len()
            } else {
                e.in_records.len()
            };
            let name_hash = e.name_hash;
            for r in 0..k {
                let e = &self.slots[s as usize].e;
                let n = if use_out {
                    e.out_records[r].nonce
                } else {
                    e.in_records[r].nonce
                };
                self.dnl.add(name_hash, n, now);
            }
        }
        let e = &mut self.slots[s as usize].e;
        e.name.clear();
        e.in_records.clear();
        e.out_records.clear();
        e.retx_interval = 0;
        self.free.push(s);
        self.live -= 1;
    }

    /// Remove every entry whose expiry is at or before `now` (their
    /// nonces go to the dead-nonce list). Returns how many expired.
    /// [`Self::insert`] and [`Self::satisfy`] call it first, so a caller
    /// needs it only to reclaim memory while idle.
    pub fn expire(&mut self, now: Millis) -> usize {
        let mut n = 0;
        while let Some(&Reverse((exp, s, gen))) = self.heap.peek() {
            if exp > now {
                break;
            }
            self.heap.pop();
            let sl = &self.slots[s as usize];
            if sl.live && sl.gen == gen && sl.e.expiry == exp {
                self.free_slot(s, true, now);
                self.stats.expired += 1;
                n += 1;
            }
        }
        // Drop stale heap items when they outnumber live entries.
        if self.heap.len() > 2 * self.live + 1024 {
            let slots = &self.slots;
            self.heap.retain(|Reverse((exp, s, gen))| {
                let sl = &slots[*s as usize];
                sl.live && sl.gen == *gen && sl.e.expiry == *exp
            });
        }
        n
    }

    /// Record an incoming Interest (NFD's incoming-Interest pipeline from
    /// the dead-nonce check to the in-record). HopLimit is checked by the
    /// caller before this; nothing here depends on it.
    pub fn insert<N: NameView + ?Sized>(
        &mut self,
        i: &InterestIn<'_, N>,
        now: Millis,
    ) -> InsertOutcome {
        self.expire(now);
        let name = i.name.tlv();
        let name_hash = i.name.name_hash();
        if self.dnl.contains(name_hash, i.nonce, now) {
            self.stats.dead_nonce_hits += 1;
            return InsertOutcome::DuplicateNonce { dead: true };
        }
        let flags = (i.can_be_prefix as u8 * F_CBP) | (i.must_be_fresh as u8 * F_MBF);
        let h = self.key_hash(name_hash, flags);
        let lifetime = i
            .lifetime_ms
            .unwrap_or(DEFAULT_INTEREST_LIFETIME_MS)
            .min(self.cfg.max_lifetime_ms);
        let rec_expiry = now.saturating_add(lifetime);
        let (s, created) = match self.find(name, flags, h) {
            Some(s) => {
                let e = &self.slots[s as usize].e;
                let loop_in = e
                    .in_records
                    .iter()
                    .any(|r| r.nonce == i.nonce && (r.face != i.face || i.multi_access));
                let loop_out = e.out_records.iter().any(|r| r.nonce == i.nonce);
                if loop_in || loop_out {
                    self.stats.duplicate_nonce += 1;
                    return InsertOutcome::DuplicateNonce { dead: false };
                }
                (s, false)
            }
            None => {
                if self.live >= self.cfg.max_entries {
                    self.stats.full += 1;
                    return InsertOutcome::Full;
                }
                if 2 * self.live >= self.heads.len() {
                    self.grow_heads();
                }
                let at = self.head(h);
                if self.chain_len(at) >= self.cfg.max_chain {
                    self.stats.chain_full += 1;
                    return InsertOutcome::ChainFull;
                }
                let s = match self.free.pop() {
                    Some(s) => s,
                    None => {
                        self.slots.push(Slot {
                            next: NONE,
                            ..Slot::default()
                        });
                        (self.slots.len() - 1) as u32
                    }
                };
                let has_digest =
                    split_implicit_digest(name, last_component_start(i.name)).is_some();
                let head = std::mem::replace(&mut self.heads[at], s);
                let sl = &mut self.slots[s as usize];
                sl.live = true;
                sl.next = head;
                sl.e.name.extend_from_slice(name);
                sl.e.flags = flags;
                sl.e.hash = h;
                sl.e.name_hash = name_hash;
                sl.e.has_digest = has_digest;
                sl.e.expiry = 0;
                self.live += 1;
                self.cbp_live += i.can_be_prefix as usize;
                self.flag_live[flags as usize & 3] += 1;
                self.digest_live += has_digest as usize;
                self.stats.created += 1;
                (s, true)
            }
        };
        let max_records = self.cfg.max_records;
        let e = &mut self.slots[s as usize].e;
        let rec = InRecord {
            face: i.face,
            nonce: i.nonce,
            token: i.token,
            last_renewed: now,
            expiry: rec_expiry,
        };
        let outcome = match e.in_records.iter_mut().find(|r| r.face == i.face) {
            Some(r) => {
                *r = rec;
                self.stats.retransmitted += 1;
                InsertOutcome::Retransmitted(PitId { slot: s, gen: 0 })
            }
            None => {
                if e.in_records.len() >= max_records {
                    self.stats.records_full += 1;
                    return InsertOutcome::RecordsFull;
                }
                grow_exact(&mut e.in_records);
                e.in_records.push(rec);
                if created {
                    InsertOutcome::New(PitId { slot: s, gen: 0 })
                } else {
                    self.stats.aggregated += 1;
                    InsertOutcome::Aggregated(PitId { slot: s, gen: 0 })
                }
            }
        };
        let exp = e
            .in_records
            .iter()
            .map(|r| r.expiry)
            .max()
            .unwrap_or(rec_expiry);
        if exp != e.expiry {
            e.expiry = exp;
            let gen = self.slots[s as usize].gen;
            self.heap.push(Reverse((exp, s, gen)));
        }
        let id = self.id(s);
        match outcome {
            InsertOutcome::New(_) => InsertOutcome::New(id),
            InsertOutcome::Aggregated(_) => InsertOutcome::Aggregated(id),
            InsertOutcome::Retransmitted(_) => InsertOutcome::Retransmitted(id),
            o => o,
        }
    }

    /// Record that the Interest of `id` was sent to `face` with `nonce`
    /// (the strategy's decision). Returns false for a gone entry or when
    /// the entry holds `max_records` out-records for other faces already.
    pub fn add_out_record(
        &mut self,
        id: PitId,
        face: FaceId,
        nonce: u32,
        lifetime_ms: Option<Millis>,
        now: Millis,
    ) -> bool {
        let Some(s) = self.slot_of(id) else {
            return false;
        };
        let lifetime = lifetime_ms
            .unwrap_or(DEFAULT_INTEREST_LIFETIME_MS)
            .min(self.cfg.max_lifetime_ms);
        let rec = OutRecord {
            face,
            nonce,
            last_sent: now,
            expiry: now.saturating_add(lifetime),
            nacked: false,
            nack_code: 0,
        };
        let max = self.cfg.max_records;
        let e = &mut self.slots[s].e;
        if let Some(r) = e.out_records.iter_mut().find(|r| r.face == face) {
            *r = rec;
        } else if e.out_records.len() < max {
            grow_exact(&mut e.out_records);
            e.out_records.push(rec);
        } else {
            return false;
        }
        true
    }

    /// Set the suppression interval for the next retransmission of `id`
    /// (the strategy grows it each time it forwards one). Returns false
    /// when the entry is gone.
    pub fn set_retx_interval(&mut self, id: PitId, ms: Millis) -> bool {
        match self.slot_of(id) {
            Some(s) => {
                self.slots[s].e.retx_interval = ms;
                true
            }
            None => false,
        }
    }

    /// A Nack from `face` for the Interest of `id` with `nonce`: marks its
    /// out-record. Returns `None` when the entry is gone or has no
    /// out-record for `face` with that nonce (a stale Nack), else whether
    /// an upstream is still pending.
    pub fn nack(&mut self, id: PitId, face: FaceId, nonce: u32, now: Millis) -> Option<bool> {
        self.nack_with_reason(id, face, nonce, 0, now)
    }

    /// [`Self::nack`], recording the Nack's reason code in the out-record
    /// (a strategy returns the least severe reason downstream).
    pub fn nack_with_reason(
        &mut self,
        id: PitId,
        face: FaceId,
        nonce: u32,
        code: u64,
        now: Millis,
    ) -> Option<bool> {
        let s = self.slot_of(id)?;
        let e = &mut self.slots[s].e;
        let r = e
            .out_records
            .iter_mut()
            .find(|r| r.face == face && r.nonce == nonce)?;
        r.nacked = true;
        r.nack_code = code;
        Some(e.has_pending_upstream(now))
    }

    /// Remove `id` unsatisfied (after a Nack went downstream); its nonces
    /// go to the dead-nonce list. Returns false when already gone.
    pub fn remove(&mut self, id: PitId, now: Millis) -> bool {
        match self.slot_of(id) {
            Some(s) => {
                self.free_slot(s as u32, true, now);
                self.stats.removed += 1;
                true
            }
            None => false,
        }
    }

    fn take_match(&mut self, s: u32, ingress: FaceId, now: Millis, out: &mut Vec<Downstream>) {
        let e = &self.slots[s as usize].e;
        for r in &e.in_records {
            if r.face == ingress || r.expiry <= now {
                continue;
            }
            let d = Downstream {
                face: r.face,
                token: r.token,
            };
            if !out.contains(&d) {
                out.push(d);
            }
        }
        // NFD keeps the nonces of a MustBeFresh Interest: the Data may go
        // stale before a looping copy of the Interest returns.
        let mbf = e.flags & F_MBF != 0;
        self.free_slot(s, mbf, now);
        self.stats.satisfied += 1;
    }

    fn probe(
        &mut self,
        name: &[u8],
        name_hash: u64,
        flags: u8,
        ingress: FaceId,
        now: Millis,
        out: &mut Vec<Downstream>,
    ) -> usize {
        if self.flag_live[flags as usize & 3] == 0 {
            return 0;
        }
        let h = self.key_hash(name_hash, flags);
        match self.find(name, flags, h) {
            Some(s) => {
                self.take_match(s, ingress, now, out);
                1
            }
            None => 0,
        }
    }

    /// Match a Data packet from `ingress`: every entry it satisfies (exact
    /// name, a CanBePrefix entry whose name is a prefix of the Data name,
    /// or the Data name plus its implicit digest) is removed and its
    /// downstreams (live in-records, not `ingress`) are appended to `out`,
    /// once per distinct `(face, token)`. Returns the number of entries
    /// satisfied; 0 means the Data was unsolicited.
    pub fn satisfy<N: NameView + ?Sized>(
        &mut self,
        d: &DataMatch<'_, N>,
        ingress: FaceId,
        now: Millis,
        out: &mut Vec<Downstream>,
    ) -> usize {
        self.expire(now);
        let tlv = d.name.tlv();
        let whole = d.name.name_hash();
        let mut n = 0;
        for flags in [0, F_MBF, F_CBP, F_CBP | F_MBF] {
            n += self.probe(tlv, whole, flags, ingress, now, out);
        }
        if self.cbp_live > 0 {
            for k in 0..d.name.component_count() {
                let p = &tlv[..d.name.prefix_end(k)];
                let ph = d.name.prefix_hash(k);
                for flags in [F_CBP, F_CBP | F_MBF] {
                    n += self.probe(p, ph, flags, ingress, now, out);
                }
            }
        }
        if self.digest_live > 0 {
            if let Some(dg) = d.digest {
                let mut full = std::mem::take(&mut self.scratch);
                full.clear();
                full.extend_from_slice(tlv);
                full.extend_from_slice(&[super::TT_IMPLICIT_DIGEST, 32]);
                full.extend_from_slice(dg);
                let fh = extend_prefix_hash(whole, &full[tlv.len()..]);
                for flags in [0, F_MBF, F_CBP, F_CBP | F_MBF] {
                    n += self.probe(&full, fh, flags, ingress, now, out);
                }
                self.scratch = full;
            }
        }
        if n == 0 {
            self.stats.unsolicited += 1;
        }
        n
    }

    /// Every live entry's id (for tests and management datasets).
    pub fn ids(&self) -> impl Iterator<Item = PitId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live)
            .map(|(i, s)| PitId {
                slot: i as u32,
                gen: s.gen,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::NameBuf;

    fn nm(c: &[&str]) -> NameBuf {
        NameBuf::from_components(c).unwrap()
    }

    fn interest(name: &NameBuf, face: FaceId, nonce: u32) -> InterestIn<'_, NameBuf> {
        InterestIn {
            name,
            can_be_prefix: false,
            must_be_fresh: false,
            nonce,
            lifetime_ms: Some(1000),
            face,
            token: PitToken::new(&[face as u8]),
            multi_access: false,
        }
    }

    fn pit() -> ExactPit {
        ExactPit::new(ExactPitConfig::default()).unwrap()
    }

    fn data(pit: &mut ExactPit, name: &NameBuf, now: Millis) -> Vec<Downstream> {
        let mut out = Vec::new();
        pit.satisfy(&DataMatch { name, digest: None }, 99, now, &mut out);
        out
    }

    /// Keys derive from the name hash a wire `Name` caches when decoded
    /// (no hashing in the PIT); a `NameBuf` computes the same hash: an
    /// entry inserted under one type is found, aggregated and satisfied
    /// (exact, CanBePrefix prefix, implicit digest) under the other, and
    /// by `find_entry` on the bytes.
    #[test]
    fn cached_wire_name_hash_and_computed_hash_key_the_same_entries() {
        use nexthop_wire::ndn::{implicit_digest, Data, Name};
        let mut p = pit();
        let wire = |u: &str| Name::from_uri(u).unwrap();
        let buf = |n: &Name| NameBuf::from_name(n).unwrap();
        fn wi(name: &Name, nonce: u32) -> InterestIn<'_, Name> {
            InterestIn {
                name,
                can_be_prefix: false,
                must_be_fresh: false,
                nonce,
                lifetime_ms: Some(1000),
                face: 1,
                token: PitToken::new(&[1]),
                multi_access: false,
            }
        }
        let a = wire("/a/b/c");
        let ia = wi(&a, 1);
        let id = match p.insert(&ia, 0) {
            InsertOutcome::New(id) => id,
            o => panic!("{o:?}"),
        };
        let ab = buf(&a);
        assert_eq!(ab.name_hash(), a.name_hash());
        assert_eq!(tlv_name_hash(ab.tlv()), Some(a.name_hash()));
        assert_eq!(p.find_entry(ab.tlv(), false, false), Some(id));
        assert_eq!(
            p.insert(&interest(&ab, 2, 2), 0),
            InsertOutcome::Aggregated(id)
        );
        let mut out = Vec::new();
        let m = DataMatch {
            name: &ab,
            digest: None,
        };
        assert_eq!(p.satisfy(&m, 9, 1, &mut out), 1);
        // CanBePrefix: entry from a NameBuf, Data as a wire Name.
        let pn = nm(&["p"]);
        let mut i = interest(&pn, 1, 3);
        i.can_be_prefix = true;
        assert!(matches!(p.insert(&i, 1), InsertOutcome::New(_)));
        let long = wire("/p/q/r");
        let m = DataMatch {
            name: &long,
            digest: None,
        };
        assert_eq!(p.satisfy(&m, 9, 2, &mut out), 1);
        // Implicit digest: entry as a wire Name with the digest component.
        let d = Data::new(wire("/d/e"), vec![1, 2, 3]);
        let dw = d.to_wire();
        let dg = implicit_digest(&dw);
        let mut full = wire("/d/e");
        full.push(&nexthop_wire::ndn::NameComponent::implicit_digest(dg));
        let fi = wi(&full, 4);
        assert!(matches!(p.insert(&fi, 2), InsertOutcome::New(_)));
        let dn = buf(&wire("/d/e"));
        let m = DataMatch {
            name: &dn,
            digest: Some(&dg),
        };
        assert_eq!(p.satisfy(&m, 9, 3, &mut out), 1);
        assert!(p.is_empty());
    }

    /// The chain heads double as entries come (every live entry stays
    /// findable across each re-threading), unlink from the middle and the
    /// head of shared chains, and the prefetch hints change nothing.
    #[test]
    fn chain_heads_grow_and_unlink_keeping_every_entry_findable() {
        let mut p = pit();
        let names: Vec<NameBuf> = (0..5000).map(|k| nm(&["g", &format!("{k}")])).collect();
        let mut ids = Vec::new();
        for (k, n) in names.iter().enumerate() {
            p.prefetch(n, Some((false, false)));
            p.prefetch_slot(n, Some((false, false)));
            match p.insert(&interest(n, 1, k as u32), 0) {
                InsertOutcome::New(id) => ids.push(id),
                o => panic!("{k}: {o:?}"),
            }
        }
        assert!(p.heads.len() > 2 * names.len() && p.heads.len().is_power_of_two());
        // Every chain is short: the heads outnumber the entries twice.
        for (k, n) in names.iter().enumerate() {
            assert_eq!(p.find_entry(n.tlv(), false, false), Some(ids[k]), "{k}");
        }
        // Satisfy every third entry (unlinking wherever it sits in its chain).
        for n in names.iter().step_by(3) {
            p.prefetch(n, None);
            p.prefetch_slot(n, None);
            assert_eq!(data(&mut p, n, 1).len(), 1);
        }
        for (k, n) in names.iter().enumerate() {
            let found = p.find_entry(n.tlv(), false, false);
            assert_eq!(found.is_some(), k % 3 != 0, "{k}");
        }
        assert_eq!(p.len(), names.len() - names.len().div_ceil(3));
        // Freed slots are reused and chained again.
        for (k, n) in names.iter().enumerate().step_by(3) {
            assert!(matches!(
                p.insert(&interest(n, 2, 100_000 + k as u32), 2),
                InsertOutcome::New(_)
            ));
        }
        for n in &names {
            assert!(p.find_entry(n.tlv(), false, false).is_some());
        }
    }

    #[test]
    fn second_face_aggregates_and_both_get_data_with_their_tokens() {
        let mut p = pit();
        let a = nm(&["a", "b"]);
        let id = match p.insert(&interest(&a, 1, 10), 0) {
            InsertOutcome::New(id) => id,
            o => panic!("{o:?}"),
        };
        assert_eq!(
            p.insert(&interest(&a, 2, 11), 1),
            InsertOutcome::Aggregated(id)
        );
        let out = data(&mut p, &a, 2);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].token.unwrap().as_bytes(), &[1]);
        assert_eq!(out[1].token.unwrap().as_bytes(), &[2]);
        assert!(p.is_empty());
        assert!(p.entry(id).is_none());
    }

    #[test]
    fn flags_split_entries_like_nfd() {
        let mut p = pit();
        let a = nm(&["a"]);
        assert!(matches!(
            p.insert(&interest(&a, 1, 1), 0),
            InsertOutcome::New(_)
        ));
        let mut i = interest(&a, 2, 2);
        i.must_be_fresh = true;
        assert!(matches!(p.insert(&i, 0), InsertOutcome::New(_)));
        i.can_be_prefix = true;
        i.nonce = 3;
        assert!(matches!(p.insert(&i, 0), InsertOutcome::New(_)));
        assert_eq!(p.len(), 3);
        // Data /a satisfies all three.
        let out = data(&mut p, &a, 1);
        assert_eq!(out.len(), 2);
        assert!(p.is_empty());
    }

    #[test]
    fn same_face_new_nonce_is_a_retransmission() {
        let mut p = pit();
        let a = nm(&["a"]);
        let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 1), 0) else {
            panic!()
        };
        assert_eq!(
            p.insert(&interest(&a, 1, 2), 500),
            InsertOutcome::Retransmitted(id)
        );
        assert_eq!(p.entry(id).unwrap().expiry(), 1500);
        assert_eq!(p.entry(id).unwrap().in_records().len(), 1);
    }

    #[test]
    fn nonce_from_another_face_or_upstream_is_a_loop() {
        let mut p = pit();
        let a = nm(&["a"]);
        let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 7), 0) else {
            panic!()
        };
        assert_eq!(
            p.insert(&interest(&a, 2, 7), 1),
            InsertOutcome::DuplicateNonce { dead: false }
        );
        // Same face, same nonce: point-to-point, not a loop.
        assert_eq!(
            p.insert(&interest(&a, 1, 7), 1),
            InsertOutcome::Retransmitted(id)
        );
        // Multi-access face: it is.
        let mut i = interest(&a, 1, 7);
        i.multi_access = true;
        assert_eq!(
            p.insert(&i, 1),
            InsertOutcome::DuplicateNonce { dead: false }
        );
        assert!(p.add_out_record(id, 5, 8, Some(1000), 1));
        assert_eq!(
            p.insert(&interest(&a, 3, 8), 2),
            InsertOutcome::DuplicateNonce { dead: false }
        );
        assert_eq!(p.stats().duplicate_nonce, 3);
    }

    #[test]
    fn expired_entry_leaves_its_nonce_in_the_dead_nonce_list() {
        let mut p = pit();
        let a = nm(&["a"]);
        let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 7), 0) else {
            panic!()
        };
        p.add_out_record(id, 5, 7, Some(1000), 0);
        assert_eq!(p.expire(999), 0);
        assert_eq!(p.expire(1000), 1);
        assert!(p.is_empty());
        assert_eq!(
            p.insert(&interest(&a, 2, 7), 1001),
            InsertOutcome::DuplicateNonce { dead: true }
        );
        assert!(matches!(
            p.insert(&interest(&a, 2, 9), 1001),
            InsertOutcome::New(_)
        ));
        assert_eq!(p.stats().expired, 1);
        assert_eq!(p.stats().dead_nonce_hits, 1);
        // After the dead-nonce lifetime the nonce is usable again.
        assert!(data(&mut p, &a, 1002).len() == 1);
        assert!(!matches!(
            p.insert(&interest(&a, 2, 7), 1000 + 6000),
            InsertOutcome::DuplicateNonce { .. }
        ));
    }

    #[test]
    fn data_after_expiry_is_unsolicited() {
        let mut p = pit();
        let a = nm(&["a"]);
        p.insert(&interest(&a, 1, 7), 0);
        assert!(data(&mut p, &a, 1000).is_empty());
        assert_eq!(p.stats().unsolicited, 1);
    }

    #[test]
    fn can_be_prefix_entry_matches_longer_data_only_with_the_flag() {
        let mut p = pit();
        let a = nm(&["a"]);
        let mut i = interest(&a, 1, 1);
        i.can_be_prefix = true;
        p.insert(&i, 0);
        p.insert(&interest(&a, 2, 2), 0);
        let out = data(&mut p, &nm(&["a", "v1", "s0"]), 1);
        assert_eq!(
            out,
            vec![Downstream {
                face: 1,
                token: PitToken::new(&[1])
            }]
        );
        assert_eq!(p.len(), 1);
        assert!(data(&mut p, &nm(&["b"]), 1).is_empty());
        // The root name with CanBePrefix matches anything.
        let root = NameBuf::root();
        let mut i = interest(&root, 3, 3);
        i.can_be_prefix = true;
        p.insert(&i, 1);
        assert_eq!(data(&mut p, &nm(&["z"]), 2).len(), 1);
    }

    #[test]
    fn implicit_digest_entry_matches_only_the_data_with_that_digest() {
        let mut p = pit();
        let a = nm(&["a"]);
        let dg = [5u8; 32];
        let mut full = a.clone();
        full.push(1, &dg).unwrap();
        p.insert(&interest(&full, 1, 1), 0);
        assert!(p.needs_digest());
        let mut out = Vec::new();
        let other = [6u8; 32];
        assert_eq!(
            p.satisfy(
                &DataMatch {
                    name: &a,
                    digest: Some(&other)
                },
                9,
                1,
                &mut out
            ),
            0
        );
        assert_eq!(
            p.satisfy(
                &DataMatch {
                    name: &a,
                    digest: None
                },
                9,
                1,
                &mut out
            ),
            0
        );
        assert_eq!(
            p.satisfy(
                &DataMatch {
                    name: &a,
                    digest: Some(&dg)
                },
                9,
                1,
                &mut out
            ),
            1
        );
        assert_eq!(out.len(), 1);
        assert!(!p.needs_digest());
    }

    #[test]
    fn data_is_not_returned_to_its_ingress_face() {
        let mut p = pit();
        let a = nm(&["a"]);
        p.insert(&interest(&a, 1, 1), 0);
        let mut out = Vec::new();
        assert_eq!(
            p.satisfy(
                &DataMatch {
                    name: &a,
                    digest: None
                },
                1,
                1,
                &mut out
            ),
            1
        );
        assert!(out.is_empty());
    }

    #[test]
    fn caps_bite_and_are_counted() {
        let cfg = ExactPitConfig {
            max_entries: 2,
            max_records: 2,
            ..ExactPitConfig::default()
        };
        let mut p = ExactPit::new(cfg).unwrap();
        let (a, b, c) = (nm(&["a"]), nm(&["b"]), nm(&["c"]));
        p.insert(&interest(&a, 1, 1), 0);
        p.insert(&interest(&b, 1, 2), 0);
        assert_eq!(p.insert(&interest(&c, 1, 3), 0), InsertOutcome::Full);
        p.insert(&interest(&a, 2, 4), 0);
        assert_eq!(p.insert(&interest(&a, 3, 5), 0), InsertOutcome::RecordsFull);
        let s = p.stats();
        assert_eq!((s.full, s.records_full), (1, 1));
        // Expiry frees room.
        assert!(matches!(
            p.insert(&interest(&c, 1, 6), 1000),
            InsertOutcome::New(_)
        ));
    }

    #[test]
    fn lifetime_is_clamped_and_defaulted() {
        let cfg = ExactPitConfig {
            max_lifetime_ms: 100,
            ..ExactPitConfig::default()
        };
        let mut p = ExactPit::new(cfg).unwrap();
        let a = nm(&["a"]);
        let mut i = interest(&a, 1, 1);
        i.lifetime_ms = Some(u64::MAX);
        let InsertOutcome::New(id) = p.insert(&i, 0) else {
            panic!()
        };
        assert_eq!(p.entry(id).unwrap().expiry(), 100);
        let mut p = pit();
        i.lifetime_ms = None;
        let InsertOutcome::New(id) = p.insert(&i, 0) else {
            panic!()
        };
        assert_eq!(p.entry(id).unwrap().expiry(), DEFAULT_INTEREST_LIFETIME_MS);
    }

    #[test]
    fn nack_marks_out_records_and_remove_finalizes() {
        let mut p = pit();
        let a = nm(&["a"]);
        let InsertOutcome::New(id) = p.insert(&interest(&a, 1, 1), 0) else {
            panic!()
        };
        p.add_out_record(id, 5, 1, None, 0);
        p.add_out_record(id, 6, 1, None, 0);
        assert_eq!(p.nack(id, 5, 2, 1), None);
        assert_eq!(p.nack(id, 5, 1, 1), Some(true));
        assert_eq!(p.nack(id, 6, 1, 1), Some(false));
        assert!(p.remove(id, 1));
        assert!(!p.remove(id, 1));
        assert_eq!(
            p.insert(&interest(&a, 1, 1), 2),
            InsertOutcome::DuplicateNonce { dead: true }
        );
    }

    #[test]
    fn bad_config_is_refused_with_the_field_named() {
        let cfg = ExactPitConfig {
            max_entries: 0,
            ..ExactPitConfig::default()
        };
        let e = ExactPit::new(cfg).unwrap_err();
        assert!(e.to_string().contains("max_entries"), "{e}");
    }

    #[test]
    fn stale_expiry_items_are_compacted_and_expiry_still_fires() {
        let mut p = pit();
        let a = nm(&["a"]);
        for t in 0..5000u64 {
            // Each retransmission moves the expiry and pushes a heap item.
            let r = p.insert(&interest(&a, 1, t as u32), t);
            assert!(matches!(
                r,
                InsertOutcome::New(_) | InsertOutcome::Retransmitted(_)
            ));
        }
        assert!(
            p.heap.len() <= 2 * p.len() + 1024 + 1,
            "heap {}",
            p.heap.len()
        );
        assert_eq!(p.expire(4999 + 999), 0);
        assert_eq!(p.expire(4999 + 1000), 1);
        assert!(p.is_empty());
    }

    #[test]
    fn slots_are_recycled_without_growth() {
        let mut p = pit();
        let names: Vec<NameBuf> = (0..100).map(|i| nm(&[&format!("n{i}")])).collect();
        for round in 0..10u64 {
            for (k, n) in names.iter().enumerate() {
                p.insert(
                    &interest(n, 1, (round * 1000 + k as u64) as u32),
                    round * 10,
                );
            }
            for n in &names {
                assert_eq!(data(&mut p, n, round * 10 + 1).len(), 1);
            }
        }
        assert_eq!(p.slots.len(), 100);
        assert!(p.is_empty());
    }
}
