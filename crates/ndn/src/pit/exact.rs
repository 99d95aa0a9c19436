//! The exact PIT of an edge router (NFD's semantics).
//!
//! An entry is keyed by the Interest's name plus its CanBePrefix and
//! MustBeFresh flags, as NFD keys them: two Interests for the same name
//! that differ in either flag do not aggregate. Each entry keeps one
//! in-record per downstream face (nonce, PIT token, expiry) and one
//! out-record per upstream face (nonce, when sent, expiry, Nack state).
//!
//! Storage: a slab of 256-byte slots, each holding its name (up to 64
//! bytes inline), first in-record and first out-record (longer names and
//! more records spill to the heap), recycled with their buffers so a
//! steady state allocates nothing, chained from an array of chain heads indexed
//! by the low bits of a 64-bit hash of name and flags (a power of two,
//! doubled when the live entries reach half of it: a new name's walk reads
//! every slot of its chain, on average 0.03 to 0.11 slots beyond the first
//! one a batch prefetches at a load of 1/4 to 1/2, against 0.11 to 0.37 at
//! 1/2 to 1; [`ExactPit::prefetch`]
//! loads a name's head line ahead of a batch, [`ExactPit::prefetch_slot`]
//! the slot it points to); slab and heads on huge pages once large (a
//! random head and slot per packet: on 4 KiB pages, two TLB misses); a
//! lazy min-heap of expiries; a [`DeadNonceList`].
//! Data matching probes the exact name (both MustBeFresh values), each
//! prefix of the Data name with CanBePrefix set (only while such entries
//! exist) and the name plus its implicit digest (only while entries with a
//! digest component exist and the caller passes the digest); a flags
//! value no live entry has is not probed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use nexthop_wire::ndn::extend_prefix_hash;
use smallvec::SmallVec;

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

/// Name bytes an entry keeps inline (longer names go to the heap).
const NAME_INLINE: usize = 64;

/// A pending Interest (read-only view). The name and the first in- and
/// out-record live in the entry itself: a lookup or insertion touches the
/// slot's adjacent lines instead of three separate heap blocks. Laid out
/// (after the slot's chain link) so that a chain walk past another name
/// reads the first line only, a name comparison the first two.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct PitEntry {
    /// The chain key: [`ExactPit::key_hash`] of `name_hash` and `flags`.
    hash: u64,
    /// The name's [`NameView::name_hash`] (the dead-nonce list's key).
    name_hash: u64,
    flags: u8,
    has_digest: bool,
    expiry: Millis,
    /// The retransmission suppression interval the strategy applies next
    /// (0: the configured initial one; see [`ExactPit::set_retx_interval`]).
    retx_interval: Millis,
    name: SmallVec<[u8; NAME_INLINE]>,
    in_records: SmallVec<[InRecord; 1]>,
    out_records: SmallVec<[OutRecord; 1]>,
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

/// Four whole cache lines, so a slot's lines are its own.
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct Slot {
    next: u32,
    gen: u32,
    live: bool,
    e: PitEntry,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 4 * nexthop_mem::CACHE_LINE);
/// Bytes of a slot a chain walk and a name comparison read: the link,
/// hash, flags and the inline name.
const SLOT_PROBE_BYTES: usize =
    std::mem::offset_of!(Slot, e) + std::mem::offset_of!(PitEntry, in_records);

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
    ///
    /// On huge pages once large: every Interest and Data reads a random
    /// head, a TLB miss per packet on 4 KiB pages.
    heads: nexthop_mem::HugeBox<u32>,
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

/// Grow a record list by doubling (most entries hold one record, inline;
/// a spilled list's default first step of 4 would quadruple its size).
fn grow_exact<A: smallvec::Array>(v: &mut SmallVec<A>) {
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
            heads: nexthop_mem::HugeBox::new(MIN_HEADS, NONE),
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
        self.heads = nexthop_mem::HugeBox::new(self.heads.len() * 2, NONE);
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
            if interest_flags.is_some() {
                // An Interest walks past other names (the first line) or
                // compares its own (the second): its records are read
                // only on a match, a retransmission or aggregation.
                nexthop_mem::prefetch_range((sl as *const Slot).cast(), SLOT_PROBE_BYTES);
            } else {
                // A Data's match reads its records too.
                nexthop_mem::prefetch_lines(sl);
            }
        }
    }

    fn find(&self, name: &[u8], flags: u8, h: u64) -> Option<u32> {
        let mut s = self.heads[self.head(h)];
        while s != NONE {
            let sl = &self.slots[s as usize];
            if sl.e.hash == h && sl.e.flags == flags && sl.e.name[..] == *name {
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
            + self.heads.len() * 4
            + self.heap.capacity() * size_of::<(Millis, u32, u32)>()
            + self.dnl.len() * (size_of::<(u64, Millis)>() + size_of::<(u64, u32)>() + 1);
        // Spilled lists only: inline ones are inside the slot.
        for s in &self.slots {
            let e = &s.e;
            b += e.name.spilled() as usize * e.name.capacity()
                + e.in_records.spilled() as usize * e.in_records.capacity() * size_of::<InRecord>()
                + e.out_records.spilled() as usize
                    * e.out_records.capacity()
                    * size_of::<OutRecord>();
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
                        if self.slots.len() == self.slots.capacity() {
                            // Doubling onto huge pages once large (a
                            // random slot per packet, as for the heads).
                            let n = (2 * self.slots.len()).max(16);
                            nexthop_mem::reserve_huge(&mut self.slots, n);
                        }
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
mod tests;
